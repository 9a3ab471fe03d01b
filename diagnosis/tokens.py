"""A conservative token estimate for budgeting prompts without a model tokenizer."""

from __future__ import annotations

import math
import re

# CJK ideographs, kana, hangul and full-width forms: tokenizers spend about one token each.
_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff]"
)


def estimate_tokens(text: str) -> int:
    """Overestimate the tokens of ``text``: one per CJK character, one per 3 other characters."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 3)
