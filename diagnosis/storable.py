"""Outside text (model answers, tool output, arguments) made storable in any database."""

from __future__ import annotations

from typing import Any

_NUL = "\x00"


def nul_free(value: Any) -> Any:
    """``value`` with every NUL character replaced by U+FFFD, in strings, lists and dicts.

    PostgreSQL rejects NUL in text and jsonb; a stray NUL in a log line or a model
    answer must not fail the write that records it. Values without NUL come back as
    the same object.
    """
    if isinstance(value, str):
        return value.replace(_NUL, "\ufffd") if _NUL in value else value
    if isinstance(value, dict):
        pairs = [(nul_free(k), nul_free(v)) for k, v in value.items()]
        if all(nk is k and nv is v for (nk, nv), (k, v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list | tuple):
        items = [nul_free(v) for v in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    return value
