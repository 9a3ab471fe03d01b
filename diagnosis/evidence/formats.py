"""Line parsers for the scenario-pack data formats: OpenMetrics samples and log records.

Both the pack validator and the file backends use these, so a line the loader accepts
is a line the tools can read.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from diagnosis.evidence.timeutil import TimeFormatError, time_parse

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_SPECIAL_VALUES = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class MetricSample:
    name: str
    labels: Labels
    value: float
    timestamp: float | None


def _float_parse(text: str, what: str) -> float:
    if text in _SPECIAL_VALUES:
        return _SPECIAL_VALUES[text]
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number") from None


def labels_parse(text: str, start: int = 0) -> tuple[dict[str, str], int]:
    """Parse ``{a="x",b="y"}`` from ``text[start]``; return the labels and the end index."""
    if start >= len(text) or text[start] != "{":
        raise ValueError("expected '{'")
    labels: dict[str, str] = {}
    i = start + 1
    while True:
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        match = _LABEL_NAME.match(text, i)
        if not match:
            raise ValueError(f"bad label name at column {i + 1}")
        name = match.group(0)
        i = match.end()
        if text[i : i + 2] != '="':
            raise ValueError(f'expected =" after label {name!r}')
        i += 2
        value_chars: list[str] = []
        while True:
            if i >= len(text):
                raise ValueError(f"unterminated value for label {name!r}")
            ch = text[i]
            if ch == "\\":
                nxt = text[i + 1 : i + 2]
                value_chars.append({"n": "\n", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value_chars.append(ch)
            i += 1
        if name in labels:
            raise ValueError(f"duplicate label {name!r}")
        labels[name] = "".join(value_chars)
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        raise ValueError(f"expected ',' or '}}' at column {i + 1}")


def openmetrics_line_parse(line: str) -> MetricSample | None:
    """Parse one OpenMetrics line; comments and blank lines give None; malformed lines raise."""
    text = line.rstrip("\r\n")
    if not text.strip() or text.startswith("#"):
        return None
    match = _METRIC_NAME.match(text)
    if not match:
        raise ValueError("a sample line must start with a metric name")
    name = match.group(0)
    i = match.end()
    labels: dict[str, str] = {}
    if i < len(text) and text[i] == "{":
        labels, i = labels_parse(text, i)
    rest = text[i:].split()
    if not rest:
        raise ValueError(f"sample {name} has no value")
    if len(rest) > 2 and rest[2] != "#":
        raise ValueError(f"sample {name} has unexpected text after the timestamp")
    value = _float_parse(rest[0], "value")
    timestamp = _float_parse(rest[1], "timestamp") if len(rest) > 1 else None
    return MetricSample(
        name=name, labels=tuple(sorted(labels.items())), value=value, timestamp=timestamp
    )


def openmetrics_comment_check(line: str) -> str | None:
    """Return a problem with a ``#`` line, or None when it is a valid descriptor or EOF."""
    parts = line.rstrip("\r\n").split(None, 3)
    if parts == ["#", "EOF"]:
        return None
    if len(parts) >= 2 and parts[1] in {"TYPE", "HELP", "UNIT"}:
        if len(parts) < 3 or not _METRIC_NAME.fullmatch(parts[2]):
            return f"# {parts[1]} needs a metric name"
        if parts[1] == "TYPE":
            kinds = {
                "counter",
                "gauge",
                "histogram",
                "gaugehistogram",
                "stateset",
                "info",
                "summary",
                "unknown",
            }
            if len(parts) < 4 or parts[3].strip() not in kinds:
                return f"# TYPE {parts[2]} has an unknown type"
        return None
    return "comment lines must be '# TYPE', '# HELP', '# UNIT' or '# EOF'"


# --- logs -------------------------------------------------------------------

_LEVEL_ALIASES = {
    "WARNING": "WARN",
    "ERR": "ERROR",
    "CRIT": "CRITICAL",
    "EMERG": "FATAL",
    "PANIC": "FATAL",
    "INFORMATION": "INFO",
    "DBG": "DEBUG",
    "NOTE": "NOTICE",
    "SYSTEM": "INFO",
}
_KNOWN_LEVELS = {"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "ERROR", "CRITICAL", "FATAL"}
_PLAIN_TS = re.compile(
    r"^\[?(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[Zz]|[+-]\d{2}:?\d{2})?)\]?\s*"
)
_PLAIN_LEVEL = re.compile(
    r"^\[?(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|CRIT|FATAL|PANIC)\]?[:\s]\s*",
    re.IGNORECASE,
)
_BRACKET_LEVEL = re.compile(
    r"\[(TRACE|DEBUG|INFO|NOTE|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|FATAL|SYSTEM)\]",
    re.IGNORECASE,
)
_TS_KEYS = ("ts", "timestamp", "time", "@timestamp")
_LEVEL_KEYS = ("level", "severity", "lvl", "loglevel")


def level_normalise(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        return ""
    upper = value.strip().upper()
    upper = _LEVEL_ALIASES.get(upper, upper)
    return upper if upper in _KNOWN_LEVELS else upper[:16]


@dataclass(frozen=True, slots=True)
class LogRecord:
    ts: float  # unix seconds
    ts_text: str  # as written in the source
    service: str
    level: str
    message: str
    sample: str  # the verbatim line shown to the model (timestamp and message)


def log_time_parse(value: object) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ValueError("ts must be an RFC 3339 time or Unix seconds")
    if isinstance(value, int | float):
        return float(value), str(value)
    if isinstance(value, str):
        text = value.strip()
        if len(text) >= 19 and text[4] == "-" and text[10] in "Tt ":
            # The common case, RFC 3339: parse directly (3.11 reads a trailing Z).
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                pass
            else:
                if parsed.tzinfo is None:
                    parsed = parsed.replace(tzinfo=UTC)
                return parsed.timestamp(), text
        try:
            return float(text), text
        except ValueError:
            pass
        try:
            return time_parse(text.replace(",", ".")).timestamp(), text
        except TimeFormatError:
            pass
    raise ValueError(f"ts {value!r} is not an RFC 3339 time or Unix seconds")


# What a line break inside a message is shown as: the message stays one line.
LINE_BREAK_MARK = " ⏎ "


def message_single_line(text: str) -> str:
    """The message on one line: each ``\r\n`` or ``\n`` in it as ``LINE_BREAK_MARK``."""
    return text.replace("\r\n", "\n").replace("\n", LINE_BREAK_MARK) if "\n" in text else text


def jsonl_line_parse(line: str) -> LogRecord:
    """Parse one JSON-lines log record; raises ValueError naming what is wrong."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("a log line must be a JSON object")
    service = data.get("service")
    if not isinstance(service, str) or not service:
        raise ValueError("missing 'service' (a non-empty string)")
    message = data.get("message")
    if not isinstance(message, str):
        raise ValueError("missing 'message' (a string)")
    ts_value = next((data[k] for k in _TS_KEYS if k in data), None)
    if ts_value is None:
        raise ValueError("missing 'ts'")
    ts, ts_text = log_time_parse(ts_value)
    level = level_normalise(next((data[k] for k in _LEVEL_KEYS if k in data), ""))
    message = message_single_line(message)
    sample = f"{ts_text} {service} {level or '-'} {message}"
    return LogRecord(
        ts=ts, ts_text=ts_text, service=service, level=level, message=message, sample=sample
    )


def plain_line_parse(line: str, *, service: str) -> LogRecord:
    """Parse one plain-text log line that starts with its timestamp."""
    text = line.rstrip("\r\n")
    match = _PLAIN_TS.match(text)
    if not match:
        raise ValueError("a plain log line must start with an RFC 3339 timestamp")
    ts, ts_text = log_time_parse(match.group(1))
    rest = text[match.end() :]
    level, message_at = plain_level_split(rest)
    return LogRecord(
        ts=ts, ts_text=ts_text, service=service, level=level, message=rest[message_at:], sample=text
    )


def plain_level_split(rest: str) -> tuple[str, int]:
    """The level of a plain line's text after its timestamp, and where its message starts.

    Neither depends on which ASCII digits the text holds (only on where they are), so the
    counting scan runs this on a line's digit shape.
    """
    level_match = _PLAIN_LEVEL.match(rest)
    if level_match:
        return level_normalise(level_match.group(1)), level_match.end()
    # Servers such as MySQL put the level in brackets after a thread id: "25 [Note] …".
    bracketed = _BRACKET_LEVEL.search(rest, 0, 48)
    return (level_normalise(bracketed.group(1)) if bracketed else ""), 0
