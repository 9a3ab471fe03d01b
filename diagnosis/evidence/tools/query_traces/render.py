"""The query_traces output and summary: the fleet view (services and call edges ranked by
change), a service's view (its operations and the edges into and out of it) and one trace
as an indented span tree with each span's own time and the slowest path marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnosis.evidence.common import BackendOutput, QueryWindow, num_format, num_value
from diagnosis.evidence.timeutil import unix_format
from diagnosis.evidence.tools.query_metrics.statistics import ANOMALY_THRESHOLD, Shift
from diagnosis.evidence.tools.query_traces.figures import MEASURES, Cell, Figures, Grid
from diagnosis.evidence.tools.query_traces.otlp import KIND_NAMES, STATUS_ERROR, ReadStats
from diagnosis.evidence.tools.query_traces.scan import Scan, TraceBrief
from diagnosis.evidence.tools.query_traces.trees import TraceTree

MAX_KEYS_SHOWN = 12
MAX_TREE_LINES = 120
MAX_GRAPH_LINES = 100
MEASURE_WORDS = {"self": "self time", "errors": "error share", "latency": "latency"}
SAMPLING_NOTE = (
    "sampling: counts are of the spans recorded; a service with few spans is not a service "
    "without traffic"
)


def duration_text(micros: float | None) -> str:
    """A duration in human units (``120 ms``, ``1.2 s``); ``n/a`` when there is none."""
    if micros is None:
        return "n/a"
    if micros < 1000:
        return f"{num_format(micros)} µs"
    if micros < 1_000_000:
        return f"{num_format(micros / 1000)} ms"
    return f"{num_format(micros / 1_000_000)} s"


def _share(cell: Cell) -> str:
    share = cell.error_share()
    return "unknown (no status recorded)" if share is None else f"{num_format(share * 100)}%"


def _quantiles(cell: Cell, measure: str) -> str:
    return " ".join(
        f"p{int(q * 100)} {duration_text(cell.quantile(measure, q))}" for q in (0.5, 0.95, 0.99)
    )


@dataclass(frozen=True)
class KeyReport:
    """A service, call edge or operation: its figures, its change, its line."""

    kind: str  # service | edge | operation
    name: str
    window: Cell
    baseline: Cell
    shifts: dict[str, Shift]
    minutes: float
    caller: str = ""
    callee: str = ""

    @property
    def change(self) -> tuple[str, Shift] | None:
        """The measure that moved most, a rise before a fall (ties: self time, errors,
        latency)."""
        moved = [(m, s) for m, s in self.shifts.items() if s.direction != "flat"]
        if not moved:
            return None
        return max(
            moved, key=lambda ms: (ms[1].direction == "up", ms[1].score, -MEASURES.index(ms[0]))
        )

    @property
    def score(self) -> float:
        """How far it got worse by its own doing: the largest rise of its time or errors.

        A fault makes a service slower or failing; one that got faster is shown, not ranked.
        A service's latency that rose while its own time did not is its callees' (it waits),
        and errors none of which begin in its spans are carried up from a callee: both are
        shown and ranked on the callee's account, not on this service's.
        """
        scores = [
            shift.score
            for measure, shift in self.shifts.items()
            if shift.direction == "up"
            and not (self.kind == "service" and measure == "latency" and self.waiting)
            and not (self.kind == "service" and measure == "errors" and not self.window.own_errors)
        ]
        return max(scores, default=0.0)

    def rose(self, measure: str) -> bool:
        shift = self.shifts.get(measure)
        return bool(shift and shift.direction == "up" and shift.score >= ANOMALY_THRESHOLD)

    @property
    def waiting(self) -> bool:
        """Latency up while its own time stayed flat: it waits on what it calls."""
        return self.kind == "service" and self.rose("latency") and not self.rose("self")

    def _change_text(self) -> str:
        change = self.change
        if change is None:
            return "change: none sustained"
        measure, shift = change
        if measure == "errors":
            level = f"{num_format(shift.level * 100)}%"
        else:
            level = duration_text(shift.level * 1000)
        since = f" since {unix_format(shift.change_point)}" if shift.change_point else ""
        text = (
            f"change: {MEASURE_WORDS[measure]} {shift.direction} to {level} "
            f"(score {num_format(shift.score)}){since}"
        )
        if self.waiting:
            text += "; its own time is flat: waiting on its callees"
        return text

    def line(self) -> str:
        w, b = self.window, self.baseline
        label = f"edge {self.caller} -> {self.callee}" if self.kind == "edge" else self.name
        noun = (
            "calls" if self.kind == "edge" else "spans" if self.kind == "operation" else "requests"
        )
        rate = w.count / self.minutes if self.minutes else 0.0
        parts = [
            f"{label}: {w.count} {noun} ({num_format(rate)}/min; baseline {b.count})",
            f"errors {_share(w)} (baseline {_share(b)}"
            + (f"; {w.own_errors} originate here)" if w.own_errors else ")"),
            f"latency {_quantiles(w, 'latency')} (baseline p50 "
            f"{duration_text(b.quantile('latency', 0.5))})",
        ]
        if self.kind != "edge":
            parts.append(
                f"self p50 {duration_text(w.quantile('self', 0.5))} (baseline "
                f"{duration_text(b.quantile('self', 0.5))})"
            )
        return ", ".join(parts) + "; " + self._change_text()

    def summary(self) -> dict[str, Any]:
        change = self.change
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "requests_window": self.window.count,
            "requests_baseline": self.baseline.count,
            "errors_window": self.window.errors,
            "errors_baseline": self.baseline.errors,
            "own_errors_window": self.window.own_errors,
            "error_share_window": _rounded(self.window.error_share()),
            "error_share_baseline": _rounded(self.baseline.error_share()),
            "p50_ms_window": _ms(self.window.quantile("latency", 0.5)),
            "p50_ms_baseline": _ms(self.baseline.quantile("latency", 0.5)),
            "self_p50_ms_window": _ms(self.window.quantile("self", 0.5)),
            "self_p50_ms_baseline": _ms(self.baseline.quantile("self", 0.5)),
            "changes": {
                m: {
                    "direction": s.direction,
                    "score": num_value(s.score) or 0.0,
                    "change_point": unix_format(s.change_point) if s.change_point else None,
                }
                for m, s in self.shifts.items()
            },
            "change": change[0] if change else None,
            "direction": change[1].direction if change else "flat",
            "score": num_value(self.score) or 0.0,
            "waiting": self.waiting,
            "line": self.line(),
        }
        if self.kind == "edge":
            out.update(caller=self.caller, callee=self.callee)
        else:
            out["service" if self.kind == "service" else "operation"] = self.name
        return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else num_value(value)


def _ms(micros: float | None) -> float | None:
    return None if micros is None else num_value(micros / 1000)


def reports(
    table: dict[Any, Figures], kind: str, grid: Grid, window: QueryWindow
) -> list[KeyReport]:
    """Every key's report, most changed first; among equal changes one that is not just
    waiting on its callees, then the one where more errors originate (errors carried up
    from a callee are the callee's), then more requests, then by name."""
    minutes = (window.end - window.start).total_seconds() / 60
    out = []
    for key, figures in table.items():
        caller, callee = key if kind == "edge" else ("", "")
        name = f"{caller} -> {callee}" if kind == "edge" else str(key)
        out.append(
            KeyReport(
                kind=kind,
                name=name,
                window=figures.window,
                baseline=figures.baseline,
                shifts=figures.shifts(grid),
                minutes=minutes,
                caller=caller,
                callee=callee,
            )
        )
    out.sort(key=lambda r: (-r.score, r.waiting, -r.window.own_errors, -r.window.count, r.name))
    return out


def _read_line(stats: ReadStats, scan: Scan, buffer_note: str = "") -> str:
    source = f"{stats.files} files, {stats.lines} lines" if stats.files else "the backend's answers"
    return (
        f"read: {source}, {stats.spans} spans "
        f"({scan.spans_window} in the window, {scan.spans_baseline} in the baseline), "
        f"{scan.traces} traces; malformed lines {stats.malformed}, spans skipped "
        f"{stats.bad_spans}, orphan spans {scan.orphans} (parent missing, kept as roots)"
        + buffer_note
    )


def _brief_line(brief: TraceBrief) -> str:
    errors = f", {brief.errors} spans in error" if brief.errors else ""
    return (
        f"trace {brief.trace_id}: {brief.root}, {duration_text(brief.duration_ns / 1000)}, "
        f"{brief.spans} spans{errors}, at {unix_format(brief.start_ns / 1e9)}"
    )


def _section(
    lines: list[str], title: str, items: list[KeyReport], summary: list[dict[str, Any]]
) -> int:
    shown = items[:MAX_KEYS_SHOWN]
    if not shown:
        return 0
    lines.append(f"{title} ({len(shown)} of {len(items)}, most changed first):")
    for item in shown:
        lines.append(item.line())
        summary.append(item.summary())
    return len(items) - len(shown)


def _graph(lines: list[str], scan: Scan) -> list[dict[str, Any]]:
    """Every call edge the spans show, one line per caller (the call graph, for
    localisation along the calls), at most MAX_GRAPH_LINES callers."""
    callees: dict[str, list[str]] = {}
    for caller, callee in sorted({*scan.edges, *scan.extra_edges}):
        callees.setdefault(caller, []).append(callee)
    if scan.focus:
        callees = {
            a: bs if a == scan.focus else [b for b in bs if b == scan.focus]
            for a, bs in callees.items()
        }
        callees = {a: bs for a, bs in callees.items() if bs}
    if not callees:
        return []
    shown = sorted(callees)[:MAX_GRAPH_LINES]
    count = sum(len(v) for v in callees.values())
    lines.append(f"call graph from the spans ({count} edges; caller -> callees):")
    out = []
    for caller in shown:
        line = f"calls {caller} -> {', '.join(callees[caller])}"
        lines.append(line)
        out.append({"caller": caller, "callees": callees[caller], "line": line})
    if len(callees) > len(shown):
        lines.append(f"{len(callees) - len(shown)} more callers omitted")
    return out


def scan_render(
    *,
    scan: Scan,
    stats: ReadStats,
    window: QueryWindow,
    description: str,
    notes: list[str],
) -> BackendOutput:
    """The fleet view (``scan.focus`` empty) or one service's view, as excerptable lines."""
    grid = scan.grid
    lines = [f"query_traces {description}", window.describe(), *notes]
    lines.append(_read_line(stats, scan))
    if stats.first_problem:
        lines.append(f"first problem: {stats.first_problem}")
    lines.append(SAMPLING_NOTE)
    services = reports(scan.services, "service", grid, window)
    edges = reports(scan.edges, "edge", grid, window)
    summary: dict[str, Any] = {
        "window": window.as_dict(),
        "baseline": window.baseline_dict(),
        "view": "service" if scan.focus else "fleet",
        "totals": {
            "files": stats.files,
            "lines": stats.lines,
            "spans": stats.spans,
            "spans_window": scan.spans_window,
            "spans_baseline": scan.spans_baseline,
            "traces": scan.traces,
            "malformed_lines": stats.malformed,
            "spans_skipped": stats.bad_spans,
            "orphan_spans": scan.orphans,
            "line": lines[len(notes) + 2],
        },
        "services": [],
        "edges": [],
        "operations": [],
        "traces": [],
        "graph": [],
        "omitted": 0,
    }
    if not scan.spans_window and not scan.spans_baseline:
        lines.append("no data: no spans in this time range")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    if scan.focus:
        services = [s for s in services if s.name == scan.focus]
        edges = [e for e in edges if scan.focus in (e.caller, e.callee)]
        if not services and not scan.operations:
            lines.append(f"no data: no spans of service {scan.focus} in this time range")
            return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    omitted = _section(lines, "services", services, summary["services"])
    if scan.focus:
        operations = reports(scan.operations, "operation", grid, window)
        omitted += _section(lines, "operations", operations, summary["operations"])
    omitted += _section(lines, "call edges", edges, summary["edges"])
    summary["graph"] = _graph(lines, scan)
    slowest = sorted(scan.slowest, reverse=True)
    if slowest:
        lines.append(f"slowest traces in the window ({len(slowest)}):")
        for brief in slowest:
            lines.append(_brief_line(brief))
            summary["traces"].append(
                {"trace_id": brief.trace_id, "line": _brief_line(brief), "root": brief.root}
            )
    summary["omitted"] = omitted
    if omitted:
        lines.append(f"{omitted} more omitted (smaller changes)")
    return BackendOutput(status="ok", output="\n".join(lines), summary=summary)


def _span_text(tree: TraceTree, sid: str, origin_ns: int) -> str:
    span = tree.spans[sid]
    kind = KIND_NAMES.get(span.kind or 0, "kind unknown")
    status = ""
    if span.status == STATUS_ERROR:
        status = " ERROR" + (f" {span.message}" if span.message else "")
    elif span.status is None:
        status = " status unknown"
    return (
        f"{span.service} {span.name} [{kind}] {duration_text((span.end_ns - span.start_ns) / 1000)}"
        f" (self {duration_text(tree.self_ns[sid] / 1000)}) "
        f"+{duration_text((span.start_ns - origin_ns) / 1000)}{status}"
    )


def tree_render(*, tree: TraceTree | None, trace_id: str, stats: ReadStats) -> BackendOutput:
    """One trace as an indented span tree; ``*`` marks the slowest path."""
    lines = [f"query_traces trace_id={trace_id}"]
    summary: dict[str, Any] = {"view": "trace", "trace_id": trace_id, "spans": [], "omitted": 0}
    if tree is None or not tree.spans:
        lines.append(f"no data: no spans of trace {trace_id} in the trace files")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    path = set(tree.slowest_path())
    origin = min(s.start_ns for s in tree.spans.values())
    services = sorted({s.service for s in tree.spans.values()})
    errors = sum(1 for s in tree.spans.values() if s.status == STATUS_ERROR)
    head = (
        f"trace {trace_id}: {len(tree.spans)} spans, {len(services)} services, "
        f"{duration_text(tree.duration_ns() / 1000)}, {errors} spans in error, "
        f"{tree.orphans} orphan spans (kept as roots); * marks the slowest path"
    )
    lines += [head, f"starts at {unix_format(origin / 1e9)}"]
    if stats.malformed:
        lines.append(f"malformed lines {stats.malformed}")
    stack = [(sid, 0) for sid in reversed(tree.roots)]
    shown = 0
    while stack:
        sid, depth = stack.pop()
        if shown >= MAX_TREE_LINES:
            summary["omitted"] += 1
            continue
        shown += 1
        mark = "*" if sid in path else "-"
        text = f"{'  ' * min(depth, 20)}{mark} {_span_text(tree, sid, origin)}"
        lines.append(text)
        span = tree.spans[sid]
        summary["spans"].append(
            {
                "span_id": sid,
                "parent_span_id": span.parent_id,
                "service": span.service,
                "name": span.name,
                "depth": depth,
                "offset_ms": num_value((span.start_ns - origin) / 1e6),
                "duration_ms": num_value((span.end_ns - span.start_ns) / 1e6),
                "self_ms": num_value(tree.self_ns[sid] / 1e6),
                "error": span.status == STATUS_ERROR,
                "slowest_path": sid in path,
                "line": text.strip(),
            }
        )
        stack.extend((c, depth + 1) for c in reversed(tree.children.get(sid, ())))
    if summary["omitted"]:
        lines.append(f"{summary['omitted']} more spans omitted")
    summary["line"] = head
    return BackendOutput(status="ok", output="\n".join(lines), summary=summary)
