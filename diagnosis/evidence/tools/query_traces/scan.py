"""One pass over spans: the figures of every service and call edge (and of one service's
operations), and the slowest traces, from traces assembled as they stream by."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from diagnosis.evidence.tools.query_metrics.series import collection_paused
from diagnosis.evidence.tools.query_traces.figures import Figures, Grid
from diagnosis.evidence.tools.query_traces.otlp import STATUS_ERROR, Span
from diagnosis.evidence.tools.query_traces.trees import TraceBuffer, TraceTree


@dataclass(frozen=True)
class TraceFilter:
    """Which traces are listed: through ``service``, with a span named ``operation``, at
    least ``min_duration_ns`` long, with a span of ``status`` (error, ok, unset)."""

    service: str = ""
    operation: str = ""
    min_duration_ns: int = 0
    status: str = ""

    def matches(self, tree: TraceTree, duration_ns: int) -> bool:
        if duration_ns < self.min_duration_ns:
            return False
        spans = tree.spans.values()
        if self.service and not any(s.service == self.service for s in spans):
            return False
        if self.operation and not any(
            s.name == self.operation and (not self.service or s.service == self.service)
            for s in spans
        ):
            return False
        if self.status:
            wanted = {"error": (STATUS_ERROR,), "ok": (1,), "unset": (0, None)}[self.status]
            if not any(s.status in wanted for s in spans):
                return False
        return True


@dataclass(frozen=True, order=True)
class TraceBrief:
    duration_ns: int
    trace_id: str
    root: str  # "service operation" of its first root
    spans: int
    errors: int
    start_ns: int


@dataclass
class Scan:
    grid: Grid
    focus: str = ""  # a service whose operations are counted too
    shown: TraceFilter = field(default_factory=TraceFilter)
    limit: int = 5
    services: dict[str, Figures] = field(default_factory=dict)
    edges: dict[tuple[str, str], Figures] = field(default_factory=dict)
    operations: dict[str, Figures] = field(default_factory=dict)
    traces: int = 0
    spans_window: int = 0
    spans_baseline: int = 0
    orphans: int = 0
    slowest: list[TraceBrief] = field(default_factory=list)  # a min-heap of `limit`
    extra_edges: set[tuple[str, str]] = field(default_factory=set)  # a backend's own call map

    def tree_add(self, tree: TraceTree) -> None:
        grid = self.grid
        self.traces += 1
        self.orphans += tree.orphans
        erring = {tree.entry_of[sid] for sid in tree.own_error}
        for sid, span in tree.spans.items():
            step = grid.step_of(span.start_ns)
            if step is None:
                continue
            if step >= grid.window_from:
                self.spans_window += 1
            else:
                self.spans_baseline += 1
            duration_us = (span.end_ns - span.start_ns) / 1000
            if span.service == self.focus:
                self._figures(self.operations, span.name).add(
                    step, duration_us, tree.self_ns[sid] / 1000, span.status,
                    sid in tree.own_error,
                )  # fmt: skip
            if not tree.is_entry(sid):
                continue
            own = sid in erring
            local_us = tree.local_self_ns[sid] / 1000
            self._figures(self.services, span.service).add(
                step, duration_us, local_us, span.status, own
            )
            parent = tree.parent(span)
            if parent is not None and parent.service != span.service:
                edge = self._figures(self.edges, (parent.service, span.service))
                edge.add(step, duration_us, None, span.status, own)
        self._brief(tree)

    def _figures(self, table: dict, key: object) -> Figures:  # type: ignore[type-arg]
        figures = table.get(key)
        if figures is None:
            figures = table[key] = Figures(grid=self.grid)
        return figures

    def _brief(self, tree: TraceTree) -> None:
        if not tree.roots:
            return
        root = tree.spans[tree.roots[0]]
        if root.start_ns < self.grid.window_ns or root.start_ns >= self.grid.end_ns:
            return
        duration = tree.duration_ns()
        if not self.shown.matches(tree, duration):
            return
        brief = TraceBrief(
            duration_ns=duration,
            trace_id=tree.trace_id,
            root=f"{root.service} {root.name}".strip(),
            spans=len(tree.spans),
            errors=sum(1 for s in tree.spans.values() if s.status == STATUS_ERROR),
            start_ns=root.start_ns,
        )
        if len(self.slowest) < self.limit:
            heapq.heappush(self.slowest, brief)
        elif brief > self.slowest[0]:
            heapq.heapreplace(self.slowest, brief)


def spans_scan(spans: Iterable[Span], scan: Scan) -> Scan:
    """Every span into traces, every trace into ``scan``; bounded memory (``TraceBuffer``).

    The cyclic collector is held off meanwhile: the open traces are up to PENDING_SPANS_MAX
    tuples (none in a cycle; reference counting frees them), and every collection would
    walk them all again (a 256 MB file: 22k spans/s with it, against 84k on 16 MB).
    """
    buffer = TraceBuffer()
    with collection_paused():
        for span in spans:
            for tree in buffer.add(span):
                scan.tree_add(tree)
        for tree in buffer.drain():
            scan.tree_add(tree)
    return scan
