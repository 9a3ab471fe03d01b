"""Spans assembled into traces: the tree, each span's own (self) time, the spans where a
service is entered, the call edges between services, and where errors begin.

- **Self time** is a span's duration minus the part of it its children cover (their
  intervals merged and clipped to the parent's), so concurrent children are not counted
  twice and an asynchronous child running past its parent takes nothing the parent did not
  wait for.
- A span is a service's **entry** when its parent is missing or belongs to another
  service; the entry's local self time is the self time of the service's own spans under
  it (down to where another service is called): what the service itself spent on the request.
- A **call edge** is a parent span of service A with a child of service B ≠ A.
- An error **originates** in a span in error none of whose children is in error.
- A span whose parent is not in the trace is an **orphan**, kept as a root and counted.

Traces may be split over lines and files; ``TraceBuffer`` holds the traces still open and
closes the oldest when it holds too many spans, so memory stays bounded whatever the input's
size (a span of a closed trace arriving later starts an orphan fragment).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from diagnosis.evidence.tools.query_traces.otlp import STATUS_ERROR, Span

PENDING_SPANS_MAX = 200_000


@dataclass
class TraceTree:
    trace_id: str
    spans: dict[str, Span]  # span id -> span
    children: dict[str, list[str]]  # span id -> child span ids, by start time
    roots: list[str]  # true roots first, then orphans, each by start time
    orphans: int
    self_ns: dict[str, int]
    entry_of: dict[str, str]  # span id -> the entry span of its service it runs under
    local_self_ns: dict[str, int]  # entry span id -> its service's self time under it
    own_error: set[str]  # spans where an error originates

    def parent(self, span: Span) -> Span | None:
        return self.spans.get(span.parent_id) if span.parent_id else None

    def is_entry(self, span_id: str) -> bool:
        return self.entry_of.get(span_id) == span_id

    def duration_ns(self) -> int:
        starts = [s.start_ns for s in self.spans.values()]
        ends = [s.end_ns for s in self.spans.values()]
        return max(ends) - min(starts) if starts else 0

    def slowest_path(self) -> list[str]:
        """From the longest root down, always to the child that ends last (what the parent
        waited for longest)."""
        if not self.roots:
            return []
        node = max(self.roots, key=lambda i: self.spans[i].end_ns - self.spans[i].start_ns)
        path = [node]
        while self.children.get(node):
            node = max(self.children[node], key=lambda i: (self.spans[i].end_ns, i))
            path.append(node)
        return path


def _covered_ns(parent: Span, children: list[Span]) -> int:
    """How much of ``parent``'s interval its children cover (merged, clipped)."""
    covered = 0
    reach = parent.start_ns
    for child in sorted(children, key=lambda c: c.start_ns):
        start = max(child.start_ns, reach)
        end = min(child.end_ns, parent.end_ns)
        if end > start:
            covered += end - start
            reach = end
    return covered


def tree_build(trace_id: str, spans: list[Span]) -> TraceTree:
    """The tree of one trace's spans (a repeated span id keeps its first copy)."""
    by_id: dict[str, Span] = {}
    for span in spans:
        by_id.setdefault(span.span_id, span)
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    orphans: list[str] = []
    for span in sorted(by_id.values(), key=lambda s: (s.start_ns, s.span_id)):
        if not span.parent_id:
            roots.append(span.span_id)
        elif span.parent_id in by_id and span.parent_id != span.span_id:
            children.setdefault(span.parent_id, []).append(span.span_id)
        else:
            orphans.append(span.span_id)
    self_ns = {
        sid: span.end_ns
        - span.start_ns
        - _covered_ns(span, [by_id[c] for c in children.get(sid, ())])
        for sid, span in by_id.items()
    }
    own_error = {
        sid
        for sid, span in by_id.items()
        if span.status == STATUS_ERROR
        and not any(by_id[c].status == STATUS_ERROR for c in children.get(sid, ()))
    }
    entry_of: dict[str, str] = {}
    local: dict[str, int] = {}
    stack = [*roots, *orphans]
    while stack:
        sid = stack.pop()
        span = by_id[sid]
        parent = by_id.get(span.parent_id) if span.parent_id else None
        if parent is not None and parent.service == span.service and parent.span_id in entry_of:
            entry = entry_of[parent.span_id]
        else:
            entry = sid
        entry_of[sid] = entry
        local[entry] = local.get(entry, 0) + self_ns[sid]
        stack.extend(children.get(sid, ()))
    return TraceTree(
        trace_id=trace_id,
        spans=by_id,
        children=children,
        roots=[*roots, *orphans],
        orphans=len(orphans),
        self_ns=self_ns,
        entry_of=entry_of,
        local_self_ns=local,
        own_error=own_error,
    )


class TraceBuffer:
    """Open traces, in the order they were first seen; ``add`` returns the traces it had
    to close to stay under ``max_spans``, ``drain`` the rest at the end."""

    def __init__(self, max_spans: int = PENDING_SPANS_MAX) -> None:
        self.max_spans = max_spans
        self.open: OrderedDict[str, list[Span]] = OrderedDict()
        self.held = 0
        self.closed_early = 0

    def add(self, span: Span) -> Iterator[TraceTree]:
        spans = self.open.get(span.trace_id)
        if spans is None:
            spans = self.open[span.trace_id] = []
        spans.append(span)
        self.held += 1
        while self.held > self.max_spans and len(self.open) > 1:
            trace_id, oldest = self.open.popitem(last=False)
            self.held -= len(oldest)
            self.closed_early += 1
            yield tree_build(trace_id, oldest)

    def drain(self) -> Iterator[TraceTree]:
        while self.open:
            trace_id, spans = self.open.popitem(last=False)
            self.held -= len(spans)
            yield tree_build(trace_id, spans)
