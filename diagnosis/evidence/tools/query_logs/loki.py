"""The Loki backend of query_logs: LogQL built from the filter, ``query_range`` per range,
exact counts past Loki's line limit."""

from __future__ import annotations

import json
import math
from typing import Any

from diagnosis.evidence.common import (
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    ToolTimeout,
)
from diagnosis.evidence.formats import (
    LogRecord,
    level_normalise,
    plain_line_parse,
)
from diagnosis.evidence.http import backend_get, bearer_headers
from diagnosis.evidence.timeutil import time_format, time_from_unix
from diagnosis.evidence.tools.query_logs.clustering import LogClusterer
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.render import logs_render
from diagnosis.models import SERVICE_LABEL

LOKI_MAX_LINES = 5000
LEVEL_ALIASES = {
    "WARN": ("warn", "warning"),
    "ERROR": ("error", "err"),
    "CRITICAL": ("critical", "crit"),
    "FATAL": ("fatal", "panic", "emerg"),
    "INFO": ("info",),
    "DEBUG": ("debug", "dbg"),
}


def _logql_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def logql_build(log_filter: LogFilter, service_label: str = SERVICE_LABEL) -> str:
    """LogQL for the filter: stream selector, line filter, and a coarse level line filter.

    The stream selector names the service with ``service_label``, the label the
    environment's streams name their service with. The level is matched in the line text
    (not as a label) because deployments differ in whether level is a stream label; each
    returned line's level is checked exactly afterwards.
    """
    if log_filter.service:
        selector = f"{{{service_label}={_logql_string(log_filter.service)}}}"
    elif log_filter.service_pattern is not None:
        pattern = _logql_string(log_filter.service_pattern.pattern)
        selector = f"{{{service_label}=~{pattern}}}"
    else:
        selector = f'{{{service_label}=~".+"}}'

    parts = [selector]
    if log_filter.text is not None:
        parts.append(f"|= {_logql_string(log_filter.text)}")
    if log_filter.pattern is not None:
        parts.append(f"|~ {_logql_string(log_filter.pattern.pattern)}")
    if log_filter.level:
        names = LEVEL_ALIASES.get(log_filter.level, (log_filter.level.lower(),))
        parts.append(f"|~ {_logql_string('(?i)(' + '|'.join(names) + ')')}")
    return " ".join(parts)


def _loki_record(stream: dict[str, str], ns: str, line: str, service_label: str) -> LogRecord:
    """A Loki entry as a log record: JSON lines and plain lines are read like pack files.

    An environment's own ``service_label`` names the stream's service (the record's
    ``service``): the label the LogQL selected the stream by wins over a ``service``
    field in the line. Without one (the default ``service`` label), the line's
    ``service`` field wins, as it always has: a stream label then only names the service
    of lines that do not name one.
    """
    ts = int(ns) / 1e9
    named = (stream.get(service_label) or "") if service_label != SERVICE_LABEL else ""
    service = (
        named
        or stream.get("service")
        or stream.get("service_name")
        or stream.get("app")
        or stream.get("job")
        or ""
    )
    stream_level = level_normalise(stream.get("level") or stream.get("detected_level") or "")
    text = line.rstrip("\r\n")
    ts_text = time_format(time_from_unix(ts))
    data: object = None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if isinstance(data, dict):
        message = data.get("message", data.get("msg"))
        if isinstance(message, str):
            level = level_normalise(data.get("level") or data.get("severity")) or stream_level
            line_service = data.get("service")
            if not named and isinstance(line_service, str) and line_service:
                service = line_service
            sample = f"{ts_text} {service} {level or '-'} {message}"
            return LogRecord(ts, ts_text, service, level, message, sample)
    try:
        parsed = plain_line_parse(text, service=service)
    except ValueError:
        return LogRecord(ts, ts_text, service, stream_level, text, f"{ts_text} {text}")
    return LogRecord(
        ts, parsed.ts_text, service, parsed.level or stream_level, parsed.message, text
    )


def _loki_headers(token_env: str, tenant: str) -> dict[str, str]:
    headers = bearer_headers(token_env, "Loki")
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    return headers


def _loki_result(
    *,
    base_url: str,
    path: str,
    params: dict[str, str],
    headers: dict[str, str],
    deadline: Deadline,
    result_type: str,
) -> list[Any]:
    """One GET of the Loki HTTP API; the ``result`` of its JSON answer, of ``result_type``."""
    url = base_url.rstrip("/") + path
    response = backend_get(
        backend="Loki",
        base_url=base_url,
        url=url,
        params=params,
        headers=headers,
        deadline=deadline,
    )
    if response.status_code != 200:
        raise ToolFailure(
            f"Loki rejected the query {params['query']!r} "
            f"(HTTP {response.status_code}): {response.text[:300].strip()}"
        )
    try:
        body = response.json()
    except ValueError:
        raise ToolFailure(f"Loki at {base_url} answered without JSON") from None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != result_type:
        raise ToolFailure(
            f"Loki returned no {result_type} result (expected resultType {result_type!r})"
        )
    return data.get("result") or []


def loki_query_range(
    *,
    base_url: str,
    headers: dict[str, str],
    logql: str,
    start: float,
    end: float,
    deadline: Deadline,
    service_label: str = SERVICE_LABEL,
) -> tuple[list[LogRecord], bool]:
    """One ``/loki/api/v1/query_range`` call; the records and whether the line limit was hit."""
    params = {
        "query": logql,
        "start": str(int(start * 1e9)),
        "end": str(int(end * 1e9)),
        "limit": str(LOKI_MAX_LINES),
        "direction": "backward",
    }
    streams = _loki_result(
        base_url=base_url,
        path="/loki/api/v1/query_range",
        params=params,
        headers=headers,
        deadline=deadline,
        result_type="streams",
    )
    records = []
    for stream in streams:
        labels = stream.get("stream") or {}
        for value in stream.get("values") or []:
            ns, line = value[0], value[1]
            records.append(_loki_record(labels, ns, line, service_label))
    return records, len(records) >= LOKI_MAX_LINES


def _logql_duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def logql_count_build(logql: str, range_ms: int) -> str:
    """LogQL counting the lines ``logql`` matches in the ``range_ms`` up to the query time."""
    return f"sum(count_over_time({logql} [{_logql_duration(range_ms)}]))"


def loki_count(
    *,
    base_url: str,
    headers: dict[str, str],
    logql: str,
    start: float,
    end: float,
    deadline: Deadline,
) -> int:
    """The number of lines ``logql`` matches from ``start`` (inclusive) to ``end`` (exclusive).

    An instant ``/loki/api/v1/query`` of ``sum(count_over_time(...))``. Loki's range vector
    is ``(time - range, time]`` and LogQL ranges go down to milliseconds, so the query is
    evaluated 1 ms before ``end`` over the range's length: ``[start, end)`` exactly for
    stamps in whole milliseconds, the same split ``query_range`` makes.
    """
    range_ms = round((end - start) * 1000)
    query = logql_count_build(logql, range_ms)
    params = {"query": query, "time": str(round(end * 1e9) - 1_000_000)}
    samples = _loki_result(
        base_url=base_url,
        path="/loki/api/v1/query",
        params=params,
        headers=headers,
        deadline=deadline,
        result_type="vector",
    )
    total = 0.0
    for sample in samples:
        try:
            total += float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            raise ToolFailure(f"Loki returned an unreadable sample for {query!r}") from None
    if not math.isfinite(total) or total < 0:
        raise ToolFailure(f"Loki returned an unreadable count for {query!r}")
    return round(total)


def _loki_total(
    *,
    label: str,
    log_filter: LogFilter,
    fetched: int,
    counted: int,
    loki_total: int | None,
    failure: str,
    notes: list[str],
) -> int:
    """The total for one range after ``query_range`` hit its line limit there.

    ``fetched`` lines came back, ``counted`` of them passed the exact check; ``loki_total``
    is Loki's own count of the lines the LogQL matches (None when that query failed).
    """
    if loki_total is not None and loki_total <= fetched:
        return counted  # every line came back after all: the clustered count is exact
    if loki_total is not None and not log_filter.level:
        notes.append(
            f"Loki returned {fetched} of the {loki_total} matching lines for the {label}; "
            f"the {label} total is Loki's exact count (count_over_time), "
            "the template counts there come from the lines returned and are lower bounds"
        )
        return loki_total
    note = (
        f"Loki returned its limit of {LOKI_MAX_LINES} lines for the {label}; "
        "counts there are lower bounds"
    )
    if loki_total is not None:
        note += (
            f" (Loki counts {loki_total} lines matching the LogQL there, an upper bound: "
            "the level is matched in the line text)"
        )
    elif failure:
        note += f" (the count query failed: {failure})"
    notes.append(note)
    return counted


# A range that hit the line limit: (label, count start and end, lines returned, counted).
_Capped = tuple[str, float, float, int, int]


def _ranges_cluster(
    *,
    base_url: str,
    headers: dict[str, str],
    logql: str,
    log_filter: LogFilter,
    clusterer: LogClusterer,
    deadline: Deadline,
    service_label: str,
) -> list[_Capped]:
    """The baseline's and the window's lines into ``clusterer``; the ranges Loki capped."""
    baseline_start = clusterer.baseline_start
    start, end = clusterer.window_start, clusterer.window_end
    # (label, query_range start and end, count_over_time start and end): the window's
    # end is inclusive, so its count runs to 1 ms past it.
    ranges = (
        ("baseline", baseline_start, start - 1e-9, baseline_start, start),
        ("window", start, end + 1e-9, start, end + 1e-3),
    )
    capped_ranges: list[_Capped] = []
    for label, range_start, range_end, count_start, count_end in ranges:
        records, capped = loki_query_range(
            base_url=base_url,
            headers=headers,
            logql=logql,
            start=range_start,
            end=range_end,
            deadline=deadline,
            service_label=service_label,
        )
        before = clusterer.total_window + clusterer.total_baseline
        records.sort(key=lambda r: r.ts)
        for record in records:
            if clusterer.in_range(record.ts) and log_filter.matches(record):
                clusterer.add(record)
        if capped:
            counted = clusterer.total_window + clusterer.total_baseline - before
            capped_ranges.append((label, count_start, count_end, len(records), counted))
    return capped_ranges


def _capped_totals(
    *,
    base_url: str,
    headers: dict[str, str],
    logql: str,
    log_filter: LogFilter,
    capped_ranges: list[_Capped],
    deadline: Deadline,
    notes: list[str],
) -> dict[str, int]:
    """Each capped range's total: Loki's count, or the lines returned when that fails."""
    totals: dict[str, int] = {}
    for label, count_start, count_end, fetched, counted in capped_ranges:
        loki_total: int | None = None
        failure = ""
        try:
            loki_total = loki_count(
                base_url=base_url,
                headers=headers,
                logql=logql,
                start=count_start,
                end=count_end,
                deadline=deadline,
            )
        except (ToolFailure, ToolTimeout) as exc:
            failure = str(exc)
        totals[label] = _loki_total(
            label=label,
            log_filter=log_filter,
            fetched=fetched,
            counted=counted,
            loki_total=loki_total,
            failure=failure,
            notes=notes,
        )
    return totals


def logs_from_loki(
    *,
    base_url: str,
    token_env: str,
    tenant: str,
    log_filter: LogFilter,
    window: QueryWindow,
    limit: int,
    deadline: Deadline,
    service_label: str = SERVICE_LABEL,
) -> BackendOutput:
    """Lines of each range from ``query_range``, clustered; exact totals from Loki when capped.

    ``service_label`` is the stream label that names a service in this Loki (``service``
    unless the environment says otherwise): every selector is built with it, and it is
    read back as each record's service.

    ``query_range`` returns at most ``LOKI_MAX_LINES`` lines; when a range reaches that,
    its total comes from a ``count_over_time`` metric query instead (falling back to the
    lines returned, marked as lower bounds, when that query fails).
    """
    headers = _loki_headers(token_env, tenant)
    logql = logql_build(log_filter, service_label)
    clusterer = LogClusterer(window=window, limit=limit)
    notes = [f"LogQL: {logql}"]
    capped_ranges = _ranges_cluster(
        base_url=base_url,
        headers=headers,
        logql=logql,
        log_filter=log_filter,
        clusterer=clusterer,
        deadline=deadline,
        service_label=service_label,
    )
    # Counted after both line queries, so a slow count cannot cost the window's lines.
    totals = _capped_totals(
        base_url=base_url,
        headers=headers,
        logql=logql,
        log_filter=log_filter,
        capped_ranges=capped_ranges,
        deadline=deadline,
        notes=notes,
    )
    return logs_render(
        clusterer=clusterer,
        window=window,
        log_filter=log_filter,
        notes=notes,
        total_window=totals.get("window"),
        total_baseline=totals.get("baseline"),
    )
