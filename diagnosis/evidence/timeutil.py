"""RFC 3339 times and Prometheus-style durations, always as aware UTC datetimes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_DURATION_UNITS = {
    "ms": 0.001,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "y": 365 * 86400,
}


class TimeFormatError(ValueError):
    pass


def time_parse(value: object) -> datetime:
    """Parse an RFC 3339 string (or an aware/naive-UTC datetime) into an aware UTC datetime."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if not isinstance(value, str) or not _RFC3339.match(value.strip()):
        raise TimeFormatError(
            f"{value!r} is not an RFC 3339 time (expected e.g. 2026-03-02T10:20:00Z)"
        )
    text = value.strip()
    if text[-1] in "zZ":
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise TimeFormatError(f"{value!r} is not a valid time: {exc}") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def time_from_unix(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def time_format(value: datetime) -> str:
    """RFC 3339 in UTC with a Z; milliseconds only when the time has them."""
    value = value.astimezone(UTC)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def unix_format(seconds: float) -> str:
    return time_format(time_from_unix(seconds))


def duration_parse(value: object) -> timedelta:
    """Parse ``60s``, ``5m``, ``1h30m`` or a bare number of seconds."""
    if isinstance(value, bool):
        raise TimeFormatError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise TimeFormatError(
                    f"{value!r} is not a duration (expected e.g. 60s, 5m, 1h)"
                ) from None
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    else:
        raise TimeFormatError(f"{value!r} is not a duration (expected e.g. 60s, 5m, 1h)")
    if seconds <= 0:
        raise TimeFormatError(f"{value!r} must be a positive duration")
    return timedelta(seconds=seconds)


def duration_format(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds and seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{value.total_seconds():g}s"
