"""OTLP/JSON spans read from lines: one ``ExportTraceServiceRequest`` a line, as the
OpenTelemetry Collector's file exporter writes them (``docs/scenario-pack.md``, *traces/*).

The rules are the OTLP/JSON encoding's: ``traceId``/``spanId``/``parentSpanId`` are hex
strings (an empty or absent parent is a root); ``startTimeUnixNano``/``endTimeUnixNano``
are decimal strings (integers are accepted too); ``kind`` and ``status`` may be absent, and
absent means unknown, never "ok". The service of a span is its resource's ``service.name``.

A span is a plain tuple (``Span``): a fleet over a gigabyte of spans builds one per span
that falls in the window and nothing else per span.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

import orjson

from diagnosis.evidence.common import Deadline, ToolFailure

UNKNOWN_SERVICE = "unknown_service"  # OpenTelemetry's name for a resource without service.name
KIND_NAMES = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_KIND_ENUM = {f"SPAN_KIND_{name.upper()}": code for code, name in KIND_NAMES.items()}
_STATUS_ENUM = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
STATUS_ERROR = 2
HEX_ID = re.compile(r"^[0-9a-fA-F]{1,32}$")
INSTANCE_KEYS = ("k8s.pod.name", "service.instance.id", "host.name")
# A line past this size is counted as malformed (oversized) and skipped, never buffered whole.
LINE_MAX_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024
_DEADLINE_EVERY = 256  # lines between deadline checks


class Span(NamedTuple):
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    service: str
    name: str
    kind: int | None  # None: not recorded
    start_ns: int
    end_ns: int
    status: int | None  # 0 unset, 1 ok, 2 error; None: no status recorded
    message: str
    instance: str


@dataclass
class ReadStats:
    """What reading the files met: lines, bytes, and what was skipped (never fatal)."""

    files: int = 0
    lines: int = 0
    bytes: int = 0
    malformed: int = 0
    oversized: int = 0
    spans: int = 0
    bad_spans: int = 0
    first_problem: str = ""
    problems: list[str] = field(default_factory=list)

    def problem(self, where: str, message: str) -> None:
        if not self.first_problem:
            self.first_problem = f"{where}: {message}"
        if len(self.problems) < 20:
            self.problems.append(f"{where}: {message}")


def _attribute(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in value:
            return str(value[key])
    return ""


def _resource_names(resource: Any) -> tuple[str, str]:
    """(service.name, instance) of one resource."""
    service, instance = "", ""
    attributes = resource.get("attributes") if isinstance(resource, dict) else None
    for item in attributes if isinstance(attributes, list) else ():
        if not isinstance(item, dict):
            continue
        key = item.get("key")
        if key == "service.name":
            service = _attribute(item.get("value"))
        elif key in INSTANCE_KEYS and not instance:
            instance = _attribute(item.get("value"))
    return service or UNKNOWN_SERVICE, instance


def _nanos(value: Any) -> int:
    if isinstance(value, str | int) and not isinstance(value, bool):
        return int(value)
    raise ValueError("a time must be a decimal string of Unix nanoseconds")


def _code(value: Any, names: dict[str, int]) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return names.get(value)
    return None


def _status(raw: Any) -> tuple[int | None, str]:
    if not isinstance(raw, dict):
        return None, ""
    # A status object without a code is OTLP's default, UNSET (JSON omits default values).
    code = _code(raw.get("code", 0), _STATUS_ENUM)
    message = raw.get("message")
    return code, message[:200] if isinstance(message, str) else ""


def _hex(value: Any, label: str, *, empty: bool = False) -> str:
    if isinstance(value, str) and (HEX_ID.match(value) or (empty and not value)):
        return value
    raise ValueError(f"{label} must be a hex string")


def span_read(raw: Any, service: str, instance: str) -> Span:
    """One OTLP/JSON span; ``ValueError`` naming what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("a span must be an object")
    trace_id = _hex(raw.get("traceId"), "traceId")
    span_id = _hex(raw.get("spanId"), "spanId")
    parent = _hex(raw.get("parentSpanId") or "", "parentSpanId", empty=True)
    start, end = _nanos(raw.get("startTimeUnixNano")), _nanos(raw.get("endTimeUnixNano"))
    if end < start:
        raise ValueError("endTimeUnixNano is before startTimeUnixNano")
    status, message = _status(raw.get("status"))
    name = raw.get("name")
    return Span(
        trace_id=trace_id.lower(),
        span_id=span_id.lower(),
        parent_id=parent.lower(),
        service=service,
        name=name[:200] if isinstance(name, str) else "",
        kind=_code(raw.get("kind"), _KIND_ENUM) or None,
        start_ns=start,
        end_ns=end,
        status=status,
        message=message,
        instance=instance,
    )


def request_spans(
    data: Any, *, where: str, stats: ReadStats, since_ns: int = 0, until_ns: int = 0
) -> Iterator[Span]:
    """The spans of one ``ExportTraceServiceRequest`` (any number of ``resourceSpans``).

    Only spans overlapping [``since_ns``, ``until_ns``] are built when a range is given.
    A span that breaks the rules is counted in ``stats.bad_spans``, not fatal.
    """
    if not isinstance(data, dict) or not isinstance(data.get("resourceSpans"), list):
        raise ValueError('a line must be an object {"resourceSpans": […]}')
    for resource_spans in data["resourceSpans"]:
        if not isinstance(resource_spans, dict):
            raise ValueError("each resourceSpans entry must be an object")
        service, instance = _resource_names(resource_spans.get("resource"))
        for scope in resource_spans.get("scopeSpans") or ():
            spans = scope.get("spans") if isinstance(scope, dict) else None
            for raw in spans if isinstance(spans, list) else ():
                span = _span_fast(raw, service, instance)
                if span is None:  # something is off: the careful reader says what
                    try:
                        span = span_read(raw, service, instance)
                    except (ValueError, TypeError) as exc:
                        stats.bad_spans += 1
                        stats.problem(where, f"span skipped: {exc}")
                        continue
                stats.spans += 1
                if until_ns and (span.end_ns < since_ns or span.start_ns >= until_ns):
                    continue
                yield span


def _span_fast(raw: Any, service: str, instance: str) -> Span | None:
    """The common case read with the fewest checks (hex ids, decimal-string times, a
    status object or none); None when anything differs, for ``span_read`` to judge."""
    try:
        trace_id, span_id = raw["traceId"], raw["spanId"]
        parent = raw.get("parentSpanId") or ""
        start, end = raw["startTimeUnixNano"], raw["endTimeUnixNano"]
        if not (start.isdigit() and end.isdigit()):
            return None
        start_ns, end_ns = int(start), int(end)
        # bytes.fromhex: C speed; it takes spaces, which HEX_ID does not
        if (
            end_ns < start_ns
            or len(bytes.fromhex(trace_id)) > 16
            or len(bytes.fromhex(span_id)) > 8
            or (parent and len(bytes.fromhex(parent)) > 8)
            or " " in trace_id + span_id + parent
            or not trace_id
            or not span_id
        ):
            return None
        status_raw = raw.get("status")
        if status_raw is None:
            status, message = None, ""
        elif not status_raw:
            status, message = 0, ""
        else:
            status, message = _status(status_raw)
        kind = raw.get("kind")
        name = raw.get("name")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if kind is not None and type(kind) is not int:
        return None
    return Span(
        trace_id.lower(),
        span_id.lower(),
        parent.lower(),
        service,
        name[:200] if type(name) is str else "",
        kind or None,
        start_ns,
        end_ns,
        status,
        message,
        instance,
    )


def _open(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def _lines(handle: IO[bytes]) -> Iterator[bytes | None]:
    """Lines of a stream read in chunks; a line longer than LINE_MAX_BYTES is one None."""
    rest = b""
    skipping = False
    while True:
        chunk = handle.read(_CHUNK)
        if not chunk:
            break
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        for part in parts:
            if skipping:
                skipping = False  # the end of the oversized line
                continue
            yield part
        if len(rest) > LINE_MAX_BYTES:
            if not skipping:
                yield None
            skipping, rest = True, b""
    if rest and not skipping:
        yield rest


def file_spans(
    path: Path,
    *,
    stats: ReadStats,
    deadline: Deadline,
    max_bytes: int,
    since_ns: int = 0,
    until_ns: int = 0,
    needle: bytes = b"",
) -> Iterator[Span]:
    """The spans of one file, streamed (gzip or plain); a malformed line is counted and
    skipped; reading past ``max_bytes`` (all files together, uncompressed) is refused.

    ``needle`` (a trace id's bytes) skips lines that cannot hold it before parsing them.
    """
    stats.files += 1
    needles = (needle.lower(), needle.upper()) if needle else ()
    number = 0
    try:
        with _open(path) as handle:
            for line in _lines(handle):
                number += 1
                stats.lines += 1
                if number % _DEADLINE_EVERY == 0:
                    deadline.check()
                if line is None:
                    stats.oversized += 1
                    stats.malformed += 1
                    stats.bytes += LINE_MAX_BYTES
                    stats.problem(f"{path.name}:{number}", "line too long, skipped")
                    continue
                stats.bytes += len(line) + 1
                if stats.bytes > max_bytes:
                    raise ToolFailure(
                        f"the trace files hold more than {max_bytes} bytes (uncompressed); "
                        "narrow the files or raise TRACE_FILES_MAX_BYTES"
                    )
                if not line.strip() or (needles and not any(n in line for n in needles)):
                    continue
                try:
                    data = orjson.loads(line)
                    yield from request_spans(
                        data,
                        where=f"{path.name}:{number}",
                        stats=stats,
                        since_ns=since_ns,
                        until_ns=until_ns,
                    )
                except (orjson.JSONDecodeError, ValueError) as exc:
                    stats.malformed += 1
                    stats.problem(f"{path.name}:{number}", _reason(exc))
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        stats.malformed += 1
        stats.problem(path.name, f"cannot read: {exc}")


def _reason(exc: Exception) -> str:
    if isinstance(exc, orjson.JSONDecodeError):
        return f"not valid JSON ({exc.msg})"
    return str(exc)


def file_problems(path: Path) -> Iterator[tuple[int | None, str]]:
    """(line, message) for every line or span of a trace file that breaks the format (for
    pack validation, ``diagnosis.evidence.pack_check``); a file that cannot be read is one."""
    number = 0
    stats = ReadStats()
    try:
        with _open(path) as handle:
            for line in _lines(handle):
                number += 1
                if line is None:
                    yield number, f"line longer than {LINE_MAX_BYTES} bytes"
                    continue
                if not line.strip():
                    continue
                try:
                    data = orjson.loads(line)
                    before = stats.bad_spans
                    for _ in request_spans(data, where="", stats=stats):
                        pass
                except ValueError as exc:  # orjson.JSONDecodeError is one
                    yield number, _reason(exc)
                    continue
                if stats.bad_spans > before:
                    reason = (
                        stats.problems[-1].removeprefix(": span skipped: ")
                        if stats.problems
                        else ""
                    )
                    yield number, f"{stats.bad_spans - before} span(s) skipped ({reason})"
                stats.problems.clear()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        yield None, f"cannot read: {exc}"
