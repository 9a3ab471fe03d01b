"""The live backends of query_traces: Jaeger's HTTP query API (``/api/services``,
``/api/traces``, ``/api/traces/{id}``, ``/api/dependencies``), Jaeger v2's OTLP/JSON API
(``/api/v3/services``, ``/api/v3/traces``, ``/api/v3/traces/{id}``) and Grafana Tempo
(``/api/search`` with TraceQL, ``/api/traces/{id}``).

Each fetches a bounded sample of the traces of the window and of the baseline (a trace
store answers with at most ``limit`` traces a query: the output says how many it got) and
hands their spans to the same scan as the files, so a live fleet view has the same figures,
the same statistic and the same lines. A trace id is fetched whole. Every failure is a tool
error naming the backend; no answer within the deadline a timeout.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from diagnosis.evidence.common import BackendOutput, Deadline, QueryWindow, ToolFailure
from diagnosis.evidence.http import backend_get, bearer_headers
from diagnosis.evidence.timeutil import time_format
from diagnosis.evidence.tools.query_traces.figures import Grid
from diagnosis.evidence.tools.query_traces.otlp import (
    HEX_ID,
    STATUS_ERROR,
    UNKNOWN_SERVICE,
    ReadStats,
    Span,
    request_spans,
)
from diagnosis.evidence.tools.query_traces.render import scan_render, tree_render
from diagnosis.evidence.tools.query_traces.scan import Scan, TraceFilter, spans_scan
from diagnosis.evidence.tools.query_traces.trees import tree_build

SERVICES_MAX = 30  # services asked for one by one in a fleet view (Jaeger needs a service)
TRACES_PER_QUERY = 100  # the limit sent with each search
TEMPO_FETCH_MAX = 40  # traces fetched by id per period (Tempo's search gives summaries)
KINDS = ("jaeger", "jaeger_v2", "tempo")
_JAEGER_KINDS = {"server": 2, "client": 3, "producer": 4, "consumer": 5, "internal": 1}


@dataclass(frozen=True)
class TraceBackend:
    kind: str  # jaeger | jaeger_v2 | tempo
    url: str
    token_env: str
    deadline: Deadline

    @property
    def name(self) -> str:
        return {"jaeger": "Jaeger", "jaeger_v2": "Jaeger v2", "tempo": "Tempo"}[self.kind]

    def get(self, path: str, params: dict[str, str]) -> Any:
        """One GET of the backend's API; its JSON answer (a non-200 is a tool error)."""
        response = backend_get(
            backend=self.name,
            base_url=self.url,
            url=self.url.rstrip("/") + path,
            params=params,
            headers={"Accept": "application/json", **bearer_headers(self.token_env, self.name)},
            deadline=self.deadline,
        )
        if response.status_code == 404 and "/traces/" in path:
            return None  # no such trace
        if response.status_code != 200:
            raise ToolFailure(
                f"{self.name} at {self.url} refused {path} (HTTP {response.status_code}): "
                f"{response.text[:300].strip()}"
            )
        try:
            return response.json()
        except ValueError:
            return _json_lines(response.text, self.name)


def _json_lines(text: str, name: str) -> Any:
    """A streamed answer (one JSON object a line, as Jaeger v2 may send) as a list."""
    out = []
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise ToolFailure(f"{name} answered without JSON") from None
    return out


def _micros(moment: datetime) -> str:
    return str(int(moment.timestamp() * 1_000_000))


# --- Jaeger (v1 JSON) -------------------------------------------------------------


def jaeger_spans(trace: Any) -> Iterator[Span]:
    """The spans of one trace of Jaeger's JSON (``processes`` name the services; tags
    ``error``/``otel.status_code`` and ``span.kind``)."""
    if not isinstance(trace, dict):
        return
    processes = trace.get("processes")
    if not isinstance(processes, dict):
        processes = {}
    for raw in trace.get("spans") or []:
        if not isinstance(raw, dict):
            continue
        process = processes.get(raw.get("processID")) or raw.get("process") or {}
        tags = {t.get("key"): t.get("value") for t in raw.get("tags") or [] if isinstance(t, dict)}
        parent = ""
        for ref in raw.get("references") or []:
            if isinstance(ref, dict) and ref.get("refType") in ("CHILD_OF", "FOLLOWS_FROM"):
                parent = str(ref.get("spanID") or "")
                break
        error = tags.get("error") in (True, "true") or tags.get("otel.status_code") == "ERROR"
        try:
            start_ns = int(raw["startTime"]) * 1000
            end_ns = start_ns + int(raw["duration"]) * 1000
            trace_id, span_id = str(raw["traceID"]).lower(), str(raw["spanID"]).lower()
        except (KeyError, TypeError, ValueError):
            continue
        yield Span(
            trace_id=trace_id.rjust(32, "0"),
            span_id=span_id,
            parent_id=parent.lower(),
            service=str(process.get("serviceName") or UNKNOWN_SERVICE),
            name=str(raw.get("operationName") or "")[:200],
            kind=_JAEGER_KINDS.get(str(tags.get("span.kind") or "")),
            start_ns=start_ns,
            end_ns=end_ns,
            # Jaeger marks errors with a tag: a span without one did not fail
            status=STATUS_ERROR if error else 0,
            message=str(tags.get("otel.status_description") or "")[:200],
            instance=str(tags.get("hostname") or ""),
        )


def _jaeger_traces(
    backend: TraceBackend, service: str, start: datetime, end: datetime, shown: TraceFilter
) -> list[Any]:
    params = {
        "service": service,
        "start": _micros(start),
        "end": _micros(end),
        "limit": str(TRACES_PER_QUERY),
    }
    if shown.operation and service == shown.service:
        params["operation"] = shown.operation
    body = backend.get("/api/traces", params)
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, list) else []


def jaeger_services(backend: TraceBackend) -> list[str]:
    path = "/api/v3/services" if backend.kind == "jaeger_v2" else "/api/services"
    body = backend.get(path, {})
    names = body.get("services" if backend.kind == "jaeger_v2" else "data") if body else None
    return sorted(str(n) for n in names or [] if isinstance(n, str) and n)


def jaeger_dependencies(
    backend: TraceBackend, end: datetime, lookback_s: float
) -> set[tuple[str, str]]:
    """``/api/dependencies``: the call edges Jaeger aggregated (parent -> child)."""
    body = backend.get(
        "/api/dependencies",
        {"endTs": str(int(end.timestamp() * 1000)), "lookback": str(int(lookback_s * 1000))},
    )
    data = body.get("data") if isinstance(body, dict) else None
    return {
        (str(d["parent"]), str(d["child"]))
        for d in data or []
        if isinstance(d, dict) and d.get("parent") and d.get("child") and d["parent"] != d["child"]
    }


# --- OTLP/JSON answers (Jaeger v2, Tempo) -------------------------------------------


def _hex_id(value: Any) -> Any:
    """An id as hex: OTLP/JSON says hex, but some stores write the proto's base64."""
    if not isinstance(value, str) or not value or HEX_ID.match(value):
        return value
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return raw.hex() if len(raw) in (8, 16) else value


def otlp_spans(body: Any, stats: ReadStats) -> Iterator[Span]:
    """Spans of an OTLP/JSON answer: ``{"resourceSpans"}``, Tempo's ``{"batches"}``,
    Jaeger v2's ``{"result": …}`` (or a stream of them), v2 ``{"trace": …}``."""
    for part in body if isinstance(body, list) else [body]:
        if not isinstance(part, dict):
            continue
        inner = part.get("result") or part.get("trace") or part
        if not isinstance(inner, dict):
            continue
        resources = inner.get("resourceSpans") or inner.get("batches") or []
        for resource in resources:
            for scope in (
                (resource or {}).get("scopeSpans")
                or (resource or {}).get("instrumentationLibrarySpans")
                or []
            ):
                for raw in (scope or {}).get("spans") or []:
                    if isinstance(raw, dict):
                        for key in ("traceId", "spanId", "parentSpanId"):
                            raw[key] = _hex_id(raw.get(key))
        request = {"resourceSpans": resources}
        try:
            yield from request_spans(request, where=f"answer {stats.lines}", stats=stats)
        except ValueError as exc:
            stats.malformed += 1
            stats.problem("answer", str(exc))


def _v3_traces(
    backend: TraceBackend, service: str, start: datetime, end: datetime, shown: TraceFilter
) -> Any:
    params = {
        "query.service_name": service,
        "query.start_time_min": time_format(start),
        "query.start_time_max": time_format(end),
        "query.num_traces": str(TRACES_PER_QUERY),
    }
    if shown.operation and service == shown.service:
        params["query.operation_name"] = shown.operation
    return backend.get("/api/v3/traces", params)


def traceql(shown: TraceFilter, service: str) -> str:
    """The TraceQL selecting the spans of ``service`` (every span without one)."""
    conditions = []
    if service:
        conditions.append(f'resource.service.name = "{_quoted(service)}"')
    if shown.operation and service == shown.service:
        conditions.append(f'name = "{_quoted(shown.operation)}"')
    return "{ " + " && ".join(conditions) + " }" if conditions else "{ }"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _tempo_ids(
    backend: TraceBackend, service: str, start: datetime, end: datetime, shown: TraceFilter
) -> list[str]:
    body = backend.get(
        "/api/search",
        {
            "q": traceql(shown, service),
            "start": str(int(start.timestamp())),
            "end": str(int(end.timestamp())),
            "limit": str(TRACES_PER_QUERY),
        },
    )
    traces = body.get("traces") if isinstance(body, dict) else None
    ids = [str(t.get("traceID")) for t in traces or [] if isinstance(t, dict) and t.get("traceID")]
    return ids[:TEMPO_FETCH_MAX]


# --- the views ----------------------------------------------------------------------


def _period_spans(
    backend: TraceBackend,
    services: list[str],
    start: datetime,
    end: datetime,
    shown: TraceFilter,
    stats: ReadStats,
    seen: set[str],
) -> Iterator[Span]:
    """The spans of the traces of one period (window or baseline), each trace once."""
    for service in services:
        backend.deadline.check()
        if backend.kind == "jaeger":
            for trace in _jaeger_traces(backend, service, start, end, shown):
                trace_id = str(trace.get("traceID") if isinstance(trace, dict) else "")
                if trace_id in seen:
                    continue
                seen.add(trace_id)
                stats.lines += 1
                yield from jaeger_spans(trace)
        elif backend.kind == "jaeger_v2":
            stats.lines += 1
            spans = list(otlp_spans(_v3_traces(backend, service, start, end, shown), stats))
            fresh = {s.trace_id for s in spans} - seen
            seen.update(fresh)
            yield from (s for s in spans if s.trace_id in fresh)
        else:
            for trace_id in _tempo_ids(backend, service, start, end, shown):
                if trace_id in seen:
                    continue
                seen.add(trace_id)
                stats.lines += 1
                yield from otlp_spans(backend.get(f"/api/traces/{trace_id}", {}), stats)


def _entries_first(services: list[str], calls: set[tuple[str, str]]) -> list[str]:
    """Services nobody calls first: a trace asked for by its entry service comes whole,
    with the spans of every service below it, so SERVICES_MAX entries cover a fleet that
    an alphabetical cap would cut."""
    called = {callee for _, callee in calls}
    return sorted(services, key=lambda name: (name in called, name))


def traces_scan_live(
    *,
    backend: TraceBackend,
    window: QueryWindow,
    service: str,
    shown: TraceFilter,
    limit: int,
    description: str,
) -> BackendOutput:
    """The fleet or service view over a sample of the backend's traces."""
    if backend.kind not in KINDS:
        raise ToolFailure(f"unknown trace backend kind {backend.kind!r}; one of {', '.join(KINDS)}")
    grid = Grid.of(window)
    stats = ReadStats(files=0)
    lookback = (window.end - window.baseline_start).total_seconds()
    dependencies: set[tuple[str, str]] = set()
    if service:
        services = [service]
    elif backend.kind == "tempo":
        services = [""]  # one TraceQL search for every span
    else:
        if backend.kind == "jaeger":
            dependencies = jaeger_dependencies(backend, window.end, lookback)
        services = _entries_first(jaeger_services(backend), dependencies)[:SERVICES_MAX]
    seen: set[str] = set()
    periods = ((window.baseline_start, window.start), (window.start, window.end))

    def spans() -> Iterator[Span]:
        for start, end in periods:
            for span in _period_spans(backend, services, start, end, shown, stats, seen):
                stats.spans += 1
                yield span

    scan = spans_scan(spans(), Scan(grid=grid, focus=service, shown=shown, limit=limit))
    scan.extra_edges = dependencies
    note = (
        f"sampled from {backend.name}: {len(seen)} traces fetched, at most {TRACES_PER_QUERY} "
        f"per query{f' (and {TEMPO_FETCH_MAX} read)' if backend.kind == 'tempo' else ''}, "
        f"window and baseline asked separately"
        + (f"; {len(services)} services asked" if len(services) > 1 else "")
    )
    return scan_render(scan=scan, stats=stats, window=window, description=description, notes=[note])


def trace_from_live(*, backend: TraceBackend, trace_id: str) -> BackendOutput:
    """One trace by id, whole."""
    stats = ReadStats()
    wanted = trace_id.lower()
    if backend.kind == "jaeger":
        body = backend.get(f"/api/traces/{wanted}", {})
        data = body.get("data") if isinstance(body, dict) else None
        spans = [s for trace in data or [] for s in jaeger_spans(trace)]
    else:
        path = (
            f"/api/v3/traces/{wanted}" if backend.kind == "jaeger_v2" else f"/api/traces/{wanted}"
        )
        spans = list(otlp_spans(backend.get(path, {}), stats))
    found = [s for s in spans if s.trace_id.lstrip("0") == wanted.lstrip("0")]
    tree = tree_build(wanted, found) if found else None
    return tree_render(tree=tree, trace_id=wanted, stats=stats)
