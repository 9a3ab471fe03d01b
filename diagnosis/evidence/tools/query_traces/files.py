"""The files backend of query_traces: a pack's ``traces/*.jsonl[.gz]``, streamed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from diagnosis.evidence.common import BackendOutput, Deadline, QueryWindow, ToolFailure
from diagnosis.evidence.tools.query_traces.figures import Grid
from diagnosis.evidence.tools.query_traces.otlp import ReadStats, Span, file_spans
from diagnosis.evidence.tools.query_traces.render import scan_render, tree_render
from diagnosis.evidence.tools.query_traces.scan import Scan, TraceFilter, spans_scan
from diagnosis.evidence.tools.query_traces.trees import tree_build

# A trace's spans beyond this many are dropped (and the tree says how many it shows).
TRACE_SPANS_MAX = 20_000


def _max_bytes() -> int:
    return int(settings.TRACE_FILES_MAX_BYTES)


def _size_check(files: tuple[Path, ...], limit: int) -> None:
    """Refuse before reading when the files on disk are already past the limit."""
    on_disk = sum(p.stat().st_size for p in files if p.exists())
    if on_disk > limit:
        raise ToolFailure(
            f"the trace files hold {on_disk} bytes, more than the limit of {limit} bytes "
            "(TRACE_FILES_MAX_BYTES); query a shorter export"
        )


def _spans(
    files: tuple[Path, ...],
    stats: ReadStats,
    deadline: Deadline,
    *,
    since_ns: int = 0,
    until_ns: int = 0,
    needle: bytes = b"",
) -> Iterator[Span]:
    limit = _max_bytes()
    _size_check(files, limit)
    for path in files:
        yield from file_spans(
            path,
            stats=stats,
            deadline=deadline,
            max_bytes=limit,
            since_ns=since_ns,
            until_ns=until_ns,
            needle=needle,
        )


def traces_scan_files(
    *,
    files: tuple[Path, ...],
    window: QueryWindow,
    service: str,
    shown: TraceFilter,
    limit: int,
    deadline: Deadline,
    description: str,
    notes: list[str],
) -> BackendOutput:
    """The fleet view (no ``service``) or one service's view over the files."""
    grid = Grid.of(window)
    stats = ReadStats()
    scan = Scan(grid=grid, focus=service, shown=shown, limit=limit)
    spans = _spans(files, stats, deadline, since_ns=grid.start_ns, until_ns=grid.end_ns)
    spans_scan(spans, scan)
    return scan_render(scan=scan, stats=stats, window=window, description=description, notes=notes)


def trace_from_files(
    *, files: tuple[Path, ...], trace_id: str, deadline: Deadline
) -> BackendOutput:
    """One trace's span tree, whatever its time (a trace id names it wherever it lies)."""
    stats = ReadStats()
    wanted = trace_id.lower()
    found: list[Span] = []
    for span in _spans(files, stats, deadline, needle=wanted.encode()):
        if span.trace_id == wanted and len(found) < TRACE_SPANS_MAX:
            found.append(span)
    tree = tree_build(wanted, found) if found else None
    return tree_render(tree=tree, trace_id=wanted, stats=stats)
