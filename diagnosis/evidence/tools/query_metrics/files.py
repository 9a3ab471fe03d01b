"""The file backend of query_metrics: a pack's OpenMetrics files read into raw series."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

from diagnosis.evidence.common import (
    Deadline,
)
from diagnosis.evidence.formats import Labels, openmetrics_line_parse
from diagnosis.evidence.tools.query_metrics.selector import Selector
from diagnosis.evidence.tools.query_metrics.series import (
    LOOKBACK_SECONDS,
    MAX_SERIES_READ,
    CountedSeries,
    Grid,
    RawSeries,
    counter_to_rate,
    grid_evaluate,
    is_counter,
    types_declare,
)


def _head_key(head: str, selector: Selector) -> tuple[str, Labels] | None:
    """The series key of a sample head (``name{labels}``) when it matches ``selector``."""
    try:
        parsed = openmetrics_line_parse(head + " 0")
    except ValueError:
        return None
    if parsed is None or not selector.matches(parsed.name, dict(parsed.labels)):
        return None
    return parsed.name, parsed.labels


def metrics_from_files(
    *,
    files: Iterable[Path],
    selector: Selector,
    grid: Grid,
    deadline: Deadline,
) -> tuple[CountedSeries, list[str]]:
    """Read OpenMetrics files in one pass; keep only samples of matching series in range.

    Samples are kept compactly (two float arrays per series) and each series is put on
    the grid only when it is consumed, so a whole fleet fits in memory; a series that
    gathers more than a few times the grid's points (a fine scrape over a long range) keeps
    only the samples the grid uses (``_compacted``), so what is held grows with the series and
    the grid, never with the samples read.
    """
    earliest = grid.start - LOOKBACK_SECONDS
    collected: dict[tuple[str, Labels], tuple[array[float], array[float]]] = {}
    # head text -> the series key, or None when the series does not match the selector
    heads: dict[str, tuple[str, Labels] | None] = {}
    notes: list[str] = []
    types: dict[str, str] = {}  # metric family -> its declared type
    too_many = False
    latest = grid.end
    compact_at = max(COMPACT_FACTOR * len(grid.times()), COMPACT_MIN_SAMPLES)
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if number % 50_000 == 0:
                    deadline.check()
                if line[:1] == "#":
                    _type_read(line, types)
                    continue
                # The common line, "name{labels} value timestamp", splits from the right (the
                # value and timestamp hold no spaces); its head is parsed once per series.
                # Anything else (exemplars, no timestamp, odd spacing) takes the full parser.
                parts = line.rsplit(None, 2)
                try:
                    if len(parts) != 3 or " # " in line:
                        raise ValueError
                    head = parts[0]
                    timestamp = float(parts[2])
                    value = float(parts[1])
                except ValueError:
                    try:
                        sample = openmetrics_line_parse(line)
                    except ValueError:
                        continue
                    if sample is None or sample.timestamp is None:
                        continue
                    head = "\0" + repr((sample.name, sample.labels))  # never a real head
                    value, timestamp = sample.value, sample.timestamp
                    if timestamp < earliest or timestamp > latest:
                        continue
                    if head not in heads:
                        matched = selector.matches(sample.name, dict(sample.labels))
                        heads[head] = (sample.name, sample.labels) if matched else None
                else:
                    if timestamp < earliest or timestamp > latest:
                        continue
                    if head not in heads:
                        heads[head] = _head_key(head, selector)
                key = heads[head]
                if key is None:
                    continue
                bucket = collected.get(key)
                if bucket is None:
                    if len(collected) >= MAX_SERIES_READ:
                        too_many = True
                        continue
                    bucket = collected[key] = (array("d"), array("d"))
                bucket[0].append(timestamp)
                bucket[1].append(value)
                if len(bucket[0]) > compact_at:
                    collected[key] = _compacted(bucket, grid)
    if too_many:
        notes.append(f"more than {MAX_SERIES_READ} series matched; narrow the selector")

    return CountedSeries(types_declare(_evaluated(collected, grid), types), len(collected)), notes


COMPACT_FACTOR = 2  # a series holds at most this many times the grid's points, plus
COMPACT_MIN_SAMPLES = 256  # this many samples, before it is compacted


def _compacted(
    bucket: tuple[array[float], array[float]], grid: Grid
) -> tuple[array[float], array[float]]:
    """Only the samples some grid time uses (the latest at or before it, within the lookback):
    putting them on the grid gives what all of them give, and later samples add as before
    (the latest wins; among equal times the one read last, as the sort keeps reading order)."""
    times, values = bucket
    order = sorted(range(len(times)), key=times.__getitem__)
    kept: dict[int, None] = {}
    index, last = -1, len(order) - 1
    for t in grid.times():
        while index < last and times[order[index + 1]] <= t:
            index += 1
        if index >= 0 and times[order[index]] >= t - LOOKBACK_SECONDS:
            kept[order[index]] = None
    chosen = sorted(kept)  # reading order, so equal times keep theirs
    return array("d", (times[i] for i in chosen)), array("d", (values[i] for i in chosen))


def _evaluated(
    collected: dict[tuple[str, Labels], tuple[array[float], array[float]]], grid: Grid
) -> Iterator[RawSeries]:
    """The collected samples of each series put on the grid, one series at a time."""
    for name, label_pairs in sorted(collected):
        times, values = collected.pop((name, label_pairs))
        points = grid_evaluate(list(zip(times, values, strict=True)), grid)
        if points:
            yield RawSeries(name=name, labels=dict(label_pairs), points=points)


def _type_read(line: str, types: dict[str, str]) -> None:
    """Note a ``# TYPE <family> <type>`` line's type (other comments say nothing of it). Files
    that declare one family differently say nothing of it, as Prometheus' metadata does when
    its targets disagree: its series are judged by their names."""
    parts = line.split()
    if len(parts) >= 4 and parts[1] == "TYPE":
        kind = parts[3].lower()
        types[parts[2]] = kind if types.get(parts[2], kind) == kind else "unknown"


def rates_apply(series: Iterable[RawSeries]) -> Iterator[RawSeries]:
    """Counters as per-second rates (``is_counter``: by declared type, else by name)."""
    for item in series:
        if is_counter(item):
            yield RawSeries(
                item.name,
                item.labels,
                counter_to_rate(item.points),
                is_rate=True,
                declared_type=item.declared_type,
            )
        else:
            yield item
