"""What a tool output says, as it says it: values, times and excerpts a claim may quote."""

from __future__ import annotations

import math
import re
from typing import Any

from diagnosis.contracts import EvidenceBinding
from diagnosis.evidence import vocab

from .analysis import STRONG_FACTOR, Call, LogSignal, MetricSignal
from .common import numbers_covered, time_parse

MIN_EXCERPT = 20


def value_in(value: Any, evidence: str) -> str | None:
    """How ``value`` is written in ``evidence``, if it is written there at all."""
    if value is None or isinstance(value, bool):
        return None
    candidates: list[str] = []
    if isinstance(value, int | float):
        number = float(value)
        if number.is_integer():
            candidates.append(str(int(number)))
        candidates += [
            str(value),
            f"{number:g}",
            f"{number:.1f}",
            f"{number:.2f}",
            f"{number:.3f}",
            f"{number:.3g}",
            f"{number:.4g}",
        ]
    else:
        candidates.append(str(value))
    for text in candidates:
        if text and re.search(rf"(?<![\d.]){re.escape(text)}(?![\d])", evidence):
            return text
    return None


def time_in(value: str, evidence: str, short: bool = False) -> str | None:
    """How the time ``value`` is written in ``evidence``; clock time only when ``short``."""
    if not value:
        return None
    parsed = time_parse(value)
    candidates = [value]
    if parsed is not None:
        candidates += [
            parsed.strftime("%Y-%m-%dT%H:%M:%SZ"),
            parsed.strftime("%Y-%m-%d %H:%M:%S"),
            parsed.strftime("%H:%M:%S"),
            parsed.strftime("%H:%M"),
        ]
        if short:
            clock = "%H:%M" if parsed.second == 0 and parsed.microsecond == 0 else "%H:%M:%S"
            candidates.insert(0, parsed.strftime(clock))
    for text in candidates:
        if text and text in evidence:
            return text
    return None


def binding(call: Call, excerpt: str) -> EvidenceBinding:
    return EvidenceBinding(
        source_type="tool_trace",
        source_id=call.trace_ref,
        tool_name=call.tool_name,
        source_invocation_ids=[call.invocation_id] if call.invocation_id is not None else [],
        evidence_excerpt=excerpt,
    )


def usable(text: str, call: Call) -> bool:
    return len(text.strip()) >= MIN_EXCERPT and call.contains(text)


def log_excerpts(lg: LogSignal) -> list[str]:
    excerpts = []
    if lg.line and usable(lg.line, lg.call):
        excerpts.append(lg.line)
    for sample in lg.samples:
        if usable(sample, lg.call) and not vocab.looks_like_instruction(sample):
            excerpts.append(sample)
            break
    return excerpts


def one_day(call: Call) -> bool:
    """The call's window lies within one day, so a clock time names a moment unambiguously."""
    window = call.summary.get("window")
    if not isinstance(window, dict):
        return False
    start, end = time_parse(window.get("start")), time_parse(window.get("end"))
    return bool(start and end and start.date() == end.date())


def fitting(parts: list[str], evidence: str) -> list[str]:
    """The parts whose numbers all occur in the evidence."""
    return [part for part in parts if part and numbers_covered(part, evidence)]


def from_zero(signal: MetricSignal, evidence: str) -> bool:
    """The series was zero throughout the baseline and shows up in the window."""
    return (
        signal.direction == "up"
        and value_in(signal.baseline_mean, evidence) == "0"
        and math.isinf(signal.factor)
    )


def ratio_text(signal: MetricSignal, evidence: str) -> str | None:
    """The window/baseline ratio as the tool wrote it, for a real shift."""
    if signal.ratio is None or signal.factor < STRONG_FACTOR:
        return None
    return value_in(signal.ratio, evidence)
