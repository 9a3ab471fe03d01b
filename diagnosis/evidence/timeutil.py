"""RFC 3339 times and Prometheus-style durations, always as aware UTC datetimes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal, overload

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


@overload
def time_parse(value: object, *, strict: Literal[True] = True, to_utc: bool = True) -> datetime: ...


@overload
def time_parse(
    value: object, *, strict: Literal[False], to_utc: bool = True
) -> datetime | None: ...


def time_parse(value: object, *, strict: bool = True, to_utc: bool = True) -> datetime | None:
    """A moment as an aware datetime (UTC when the text names no zone).

    ``strict`` (tool arguments, packs, log lines): an RFC 3339 string (seconds required;
    ``T``, ``t`` or a space; ``Z``, ``z``, an offset or none) or a datetime (naive read as
    UTC); anything else raises ``TimeFormatError``. Not strict (a model's plan, a tool
    summary's window): any ISO 8601 text Python reads (a date alone, minutes without
    seconds, an upper-case ``Z``); anything else, a datetime included, is None.
    ``to_utc=False`` keeps the offset the text names.
    """
    if not strict:
        return _time_read(value, to_utc=to_utc)
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        return moment.astimezone(UTC) if to_utc else moment
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
    return parsed.astimezone(UTC) if to_utc else parsed


def _time_read(value: object, *, to_utc: bool) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC) if to_utc else moment


def time_from_unix(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def time_format(value: datetime, *, fraction: bool = True) -> str:
    """RFC 3339 in UTC with a Z: the one writer of times.

    With ``fraction`` (tool output, points, log lines), milliseconds when the time has
    them; without (``rfc3339``), to the second.
    """
    value = value.astimezone(UTC)
    # isoformat, not strftime: "%Y" does not pad a year before 1000 to four digits.
    text = value.replace(microsecond=0, tzinfo=None).isoformat()
    if fraction and value.microsecond:
        return f"{text}.{value.microsecond // 1000:03d}Z"
    return text + "Z"


def rfc3339(moment: datetime) -> str:
    """A moment as the UTC timestamp the flow, the sessions and the model exchange:
    to the second (a plan's window, a session's ``now``, stored records)."""
    return time_format(moment, fraction=False)


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
