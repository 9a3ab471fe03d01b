"""Shared helpers of the offline engine: language, JSON, time, recording."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from diagnosis.evidence import timeutil
from diagnosis.i18n import language_key
from diagnosis.llm.base import CallRecorder, Role
from diagnosis.tokens import estimate_tokens

PROVIDER_NAME = "offline"
MODEL_NAME = "rootproof-offline-1"
# the one answer-language rule (diagnosis.i18n), by the name this engine's modules use
lang_key = language_key


def json_dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False, indent=None)


def time_parse(value: object) -> datetime | None:
    """An RFC 3339 string, any ISO 8601 text, a datetime or Unix seconds as an aware UTC
    datetime; None when unreadable (tool summaries and requests are data, never trusted)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return timeutil.time_from_unix(float(value))
        except (OverflowError, OSError, ValueError):
            return None
    try:
        return timeutil.time_parse(value)
    except timeutil.TimeFormatError:
        text = value.strip() if isinstance(value, str) else value
        return timeutil.time_parse(text, strict=False)


# the one RFC 3339 writer (diagnosis.evidence.timeutil), to the second
time_format = timeutil.rfc3339


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def numbers_in(text: str) -> list[str]:
    return _NUMBER.findall(text)


def number_occurs(number: str, text: str) -> bool:
    """``number`` occurs in ``text`` as a whole number (not inside a longer run of digits)."""
    pattern = rf"(?<![\d.]){re.escape(number)}(?![\d])"
    return re.search(pattern, text) is not None


def numbers_covered(text: str, evidence: str) -> bool:
    """Every number in ``text`` also occurs, whole, in ``evidence``."""
    return all(number_occurs(n, evidence) for n in numbers_in(text))


def record_call(
    recorder: CallRecorder,
    *,
    role: Role,
    request: dict[str, Any],
    raw_response: str,
    started: float,
) -> None:
    request_text = json_dump(request)
    recorder(
        role=role,
        provider=PROVIDER_NAME,
        model=MODEL_NAME,
        request=request,
        raw_response=raw_response,
        tokens_in=estimate_tokens(request_text),
        tokens_out=estimate_tokens(raw_response),
        latency_ms=max(0, int((time.monotonic() - started) * 1000)),
        status="ok",
    )


def clock() -> float:
    return time.monotonic()


def attr(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from a ToolResult-like object or a dict."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)
