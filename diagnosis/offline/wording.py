"""How the offline engine words what it quotes: one line, cut at a word, names joined."""

from __future__ import annotations

import re

from diagnosis.evidence import vocab

from .analysis import LogSignal, MetricSignal, Suspect
from .common import time_parse
from .kinds import Ambiguity
from .texts import kind_names, texts

TEMPLATE_CHARS = 160  # a log message is quoted whole up to this, else cut at a word
WORD_CUT_MIN = 0.6  # a word boundary is used when it keeps at least this share of the limit


def short_text(text: str, limit: int = TEMPLATE_CHARS) -> str:
    """``text`` on one line, cut at a word boundary (never inside a number) when too long."""
    flat = re.sub(r"\s+", " ", text or "").strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * WORD_CUT_MIN:
        cut = cut[:space]
    else:
        number = "0123456789."
        while cut and cut[-1] in number and flat[len(cut)] in number:
            cut = cut[:-1]
    return cut.rstrip(" ,;:-—(=") + "…"


def labels_text(signal: MetricSignal) -> str:
    extra = {k: v for k, v in sorted(signal.labels.items()) if k not in vocab.INSTANCE_LABELS}
    if not extra:
        return ""
    return "{" + ",".join(f"{k}={v}" for k, v in extra.items()) + "}"


def log_message(lg: LogSignal, limit: int = TEMPLATE_CHARS) -> str:
    """The log message as logged (first sample, without time/service/level), else the template."""
    for sample in lg.samples:
        if vocab.looks_like_instruction(sample):
            continue
        for marker in (f" {lg.level} ", f" {lg.level.lower()} ", f"[{lg.level}]"):
            if lg.level and marker in sample:
                return short_text(_untagged(sample.split(marker, 1)[1], lg.service), limit)
        if lg.service and f"{lg.service} " in sample:
            return short_text(sample.split(f"{lg.service} ", 1)[1], limit)
        head, _, rest = sample.partition(" ")
        if rest and time_parse(head) is not None:  # a plain log line: drop its timestamp
            return short_text(_untagged(rest, lg.service), limit)
    return short_text(lg.template, limit)


def _untagged(message: str, service: str) -> str:
    """``message`` without a leading ``[pod-name]`` tag that only repeats the service."""
    match = re.match(r"\s*\[([^\]\s]+)\]\s+(\S.*)", message)
    if match and service and match.group(1).lower().startswith(service.lower()):
        return match.group(2)
    return message


def list_join(items: list[str], lang: str) -> str:
    return texts(lang)["list_sep"].join(items)


def kind_alternative(entry: Suspect) -> str | None:
    """The one kind the evidence cannot tell the service's kind from (None: it can)."""
    if entry.fault_alternative and entry.root_kind == entry.fault_kind:
        return entry.fault_alternative
    return None


def kind_said(entry: Suspect, lang: str) -> str:
    """ "（类型：X）", or, where the evidence cannot tell two kinds apart, both, why, and
    what evidence would tell them apart."""
    t = texts(lang)
    names = kind_names(lang)
    kind = entry.root_kind
    other = kind_alternative(entry)
    if other is None:
        return t["hyp_kind"].format(kind=names.get(kind, kind))
    reason = other if entry.fault_ambiguity == Ambiguity.SHARED else Ambiguity.TOGETHER.value
    why = t.get(f"kind_why_{reason}", t["kind_why_together"])
    what = t.get(f"kind_tell_{reason}", t["kind_tell_together"])
    return t["hyp_kind_either"].format(
        kind=names.get(kind, kind), other=names.get(other, other), why=why, what=what
    )
