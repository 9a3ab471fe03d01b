"""query_traces: spans of the window against the baseline before it, as the fleet's
services and call edges, one service's operations and edges, or one trace's span tree;
from a pack's OTLP/JSON files (``files``) or a live Jaeger or Tempo."""

from __future__ import annotations

from typing import Any

from diagnosis.evidence.common import BackendOutput, Deadline, QueryWindow, ToolFailure
from diagnosis.evidence.tools.base import (
    TIME_ARGS,
    Arg,
    ToolCall,
    ToolDefinition,
    no_files,
    source_missing,
)
from diagnosis.evidence.tools.query_traces.files import trace_from_files, traces_scan_files
from diagnosis.evidence.tools.query_traces.live import (
    TraceBackend,
    trace_from_live,
    traces_scan_live,
)
from diagnosis.evidence.tools.query_traces.otlp import HEX_ID
from diagnosis.evidence.tools.query_traces.scan import TraceFilter
from diagnosis.models import Environment

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
STATUSES = ("error", "ok", "unset")


def _empty() -> dict[str, Any]:
    return {
        "window": None,
        "baseline": None,
        "view": None,
        "services": [],
        "edges": [],
        "operations": [],
        "traces": [],
        "graph": [],
        "omitted": 0,
    }


def _filter(call: ToolCall) -> TraceFilter:
    status = str(call.args.get("status") or "").lower()
    if status and status not in STATUSES:
        raise ToolFailure(
            f"argument 'status' of query_traces must be one of: {', '.join(STATUSES)}"
        )
    minimum = float(call.args.get("min_duration_ms") or 0)
    return TraceFilter(
        service=call.args.get("service") or "",
        operation=call.args.get("operation") or "",
        min_duration_ns=int(minimum * 1_000_000),
        status=status,
    )


def _description(call: ToolCall) -> str:
    given = " ".join(f"{k}={v}" for k, v in call.given.items() if v not in (None, ""))
    view = (
        "trace view"
        if call.args.get("trace_id")
        else ("service view" if call.args.get("service") else "fleet view")
    )
    return f"{view} {given}".rstrip()


def _run(call: ToolCall) -> BackendOutput:
    trace_id = call.args.get("trace_id")
    if trace_id is not None and not HEX_ID.match(trace_id):
        raise ToolFailure("argument 'trace_id' of query_traces must be a hex trace id")
    shown = _filter(call)
    window = call.window()
    missing = source_missing(call, "traces", _empty())
    if missing is not None:
        return missing
    if call.environment.kind == Environment.Kind.LIVE:
        return _live(call, trace_id, shown, window)
    if not call.pack.paths.traces:
        raise no_files(call, "trace files")
    files = call.pack.paths.traces
    if trace_id:
        return trace_from_files(files=files, trace_id=trace_id, deadline=call.deadline)
    return traces_scan_files(
        files=files,
        window=window,
        service=shown.service,
        shown=shown,
        limit=call.args.get("limit", DEFAULT_LIMIT),
        deadline=call.deadline,
        description=_description(call),
        notes=[],
    )


def _live(
    call: ToolCall, trace_id: str | None, shown: TraceFilter, window: QueryWindow
) -> BackendOutput:
    env = call.environment
    seconds = call.deadline.remaining()
    if env.traces_timeout_seconds:
        seconds = min(seconds, float(env.traces_timeout_seconds))
    backend = TraceBackend(
        kind=env.traces_kind or "jaeger",
        url=env.traces_url,
        token_env=env.traces_token_env,
        deadline=Deadline.after(max(seconds, 0.05)),
    )
    if trace_id:
        return trace_from_live(backend=backend, trace_id=trace_id)
    return traces_scan_live(
        backend=backend,
        window=window,
        service=shown.service,
        shown=shown,
        limit=call.args.get("limit", DEFAULT_LIMIT),
        description=_description(call),
    )


def _facts(summary: dict[str, Any]) -> list[str]:
    """The read totals, then the ranked services, operations and edges (or the trace's
    head and spans on its slowest path)."""
    if summary.get("recorded"):
        return []
    if summary.get("view") == "trace":
        spans = [s for s in summary.get("spans") or [] if isinstance(s, dict)]
        return [str(summary.get("line") or "")] + [
            str(s.get("line") or "") for s in spans if s.get("slowest_path")
        ]
    totals = summary.get("totals") if isinstance(summary.get("totals"), dict) else {}
    facts = [str(totals.get("line") or "")] if totals else []
    for key in ("services", "operations", "edges", "traces"):
        facts += [str(item.get("line") or "") for item in summary.get(key) or []]
    return [f for f in facts if f]


def _cut(summary: dict[str, Any], output: str) -> dict[str, Any]:
    """Only the entries whose lines the truncated output still shows."""
    out = dict(summary)
    dropped = 0
    for key in ("services", "operations", "edges", "traces", "spans", "graph"):
        items = out.get(key)
        if isinstance(items, list):
            kept = [i for i in items if isinstance(i, dict) and str(i.get("line", "")) in output]
            dropped += len(items) - len(kept)
            out[key] = kept
    out["omitted"] = int(out.get("omitted") or 0) + dropped
    return out


DEFINITION = ToolDefinition(
    name="query_traces",
    purpose="distributed traces: who calls whom, and who is slow or failing itself",
    description=(
        "Spans of the window compared with the baseline before it. Without service and "
        "trace_id it is the fleet view: per service (requests entering it) and per call edge "
        "(caller -> callee, from parent/child spans of different services), request count, "
        "error share (status code 2; unknown when no status is recorded), latency p50/p95/p99 "
        "and self time (a span's duration minus its children's), ranked by change - start "
        "there, then drill into the leaders. A service whose latency rose while its own time "
        "stayed flat is waiting on its callees. With service=...: that service's operations "
        "and the edges into and out of it. Both list the slowest traces of the window "
        "(filtered by operation, min_duration_ms, status; limit = how many). With "
        "trace_id=...: that trace as an indented span tree, each span's own time, the "
        "slowest path marked with *. Exports are sampled: few spans is not no traffic."
    ),
    args=(
        Arg("service", "string", "Service name (the resource's service.name)."),
        Arg("operation", "string", "Span name, e.g. GET /cart or PlaceOrder."),
        Arg("trace_id", "string", "Trace id (hex) for one trace's span tree."),
        Arg("min_duration_ms", "number", "Only list traces at least this long.", minimum=0),
        Arg("status", "string", "Only list traces with a span of this status: error, ok, unset."),
        *TIME_ARGS,
        Arg(
            "limit",
            "integer",
            f"Traces listed (default {DEFAULT_LIMIT}; at most {MAX_LIMIT}).",
            minimum=1,
            maximum=MAX_LIMIT,
        ),
    ),
    run=_run,
    empty_summary=_empty,
    kind="evidence",
    facts=_facts,
    summary_cut=_cut,
)
