"""Raw series on one time grid: the grid, units read from names, grid evaluation with
Prometheus' lookback, counters as per-second rates; the collector paused while a fleet's
series are built."""

from __future__ import annotations

import gc
import itertools
import math
import operator
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from diagnosis.evidence.common import (
    QueryWindow,
)
from diagnosis.evidence.tools.query_metrics.selector import COUNTER_SUFFIXES

# The labels that tell one running copy of a service from another (a pod, an instance, a host).
REPLICA_LABELS = ("pod", "k8s_pod_name", "k8s.pod.name", "pod_name", "instance", "host", "hostname")
LOOKBACK_SECONDS = 300.0  # Prometheus' default lookback delta
DEFAULT_STEP_SECONDS = 60
MAX_GRID_POINTS = 1500
MAX_SERIES_READ = 50_000


@dataclass(frozen=True)
class Grid:
    start: float
    end: float
    step: float

    @classmethod
    def for_window(
        cls, window: QueryWindow, step: timedelta | None, max_points: int = MAX_GRID_POINTS
    ) -> Grid:
        span = (window.end - window.baseline_start).total_seconds()
        seconds = step.total_seconds() if step else float(DEFAULT_STEP_SECONDS)
        # A step longer than the window would leave it without points to compare.
        seconds = min(seconds, max((window.end - window.start).total_seconds(), 1.0))
        if span / seconds > max_points:
            # Coarsen to whole minutes so long ranges stay within Prometheus' point limit.
            seconds = math.ceil(span / max_points / 60) * 60
        # One extra step before the baseline so a counter's first rate lands on the baseline start.
        start = math.floor(window.baseline_start.timestamp() / seconds) * seconds - seconds
        end = math.floor(window.end.timestamp() / seconds) * seconds
        return cls(start=start, end=end, step=seconds)

    def times(self) -> list[float]:
        count = round((self.end - self.start) / self.step) + 1
        return [self.start + i * self.step for i in range(count)]


@dataclass
class RawSeries:
    name: str
    labels: dict[str, str]  # without __name__
    points: list[tuple[float, float]]  # on the grid
    is_rate: bool = False
    # The family's type as its source declares it (``# TYPE``): "" when none is known.
    declared_type: str = ""


def is_counter_name(name: str) -> bool:
    return name.endswith(COUNTER_SUFFIXES)


# The family types a suffixed sample name belongs to (OpenMetrics): a counter's _total, a
# histogram's or summary's _count and _sum, a histogram's or gauge histogram's _bucket.
_SUFFIX_FAMILIES = {
    "_total": {"counter"},
    "_count": {"histogram", "summary"},
    "_sum": {"histogram", "summary"},
    "_bucket": {"histogram", "gaugehistogram"},
}
# Family types whose suffixed samples count up (a gauge histogram's _bucket is a gauge).
_COUNTING_TYPES = {"counter", "histogram", "summary"}
# Types that say nothing of monotonicity.
_UNDECLARED_TYPES = {"", "unknown", "untyped"}


def declared_type_of(name: str, types: Mapping[str, str]) -> str:
    """The type declared for the family a sample ``name`` belongs to: its own ``# TYPE``, else
    the one of the name without its suffix where that family's samples carry it (OpenMetrics
    declares ``foo`` for ``foo_total``, a histogram ``foo`` for ``foo_count``…); "" when
    neither is declared."""
    own = types.get(name, "")
    if own not in _UNDECLARED_TYPES:
        return own
    for suffix, families in _SUFFIX_FAMILIES.items():
        if name.endswith(suffix):
            family = types.get(name[: -len(suffix)], "")
            if family in families:
                return family
    return own


class CountedSeries(Iterator[RawSeries]):
    """Series given one at a time (a fleet's never all held decoded at once), their number
    known before the first: what a statistic over the fleet (the near-miss bar) needs up
    front. ``count`` is of the series matched; one without a point on the grid is skipped."""

    def __init__(self, series: Iterator[RawSeries], count: int) -> None:
        self._series = series
        self.count = count

    def __next__(self) -> RawSeries:
        return next(self._series)


def types_declare(series: Iterable[RawSeries], types: Mapping[str, str]) -> Iterator[RawSeries]:
    """The series with the type their family is declared (``declared_type_of``)."""
    for item in series:
        item.declared_type = declared_type_of(item.name, types)
        yield item


def is_counter(series: RawSeries) -> bool:
    """Whether a series counts up (compared as a per-second rate): its declared type says so
    where its source declares one (a gauge named ``*_count`` stays a gauge), else its name."""
    declared = series.declared_type
    if declared in _UNDECLARED_TYPES:
        return is_counter_name(series.name)
    return declared == "counter" or (declared in _COUNTING_TYPES and is_counter_name(series.name))


# Unit words of metric-naming conventions (Prometheus base units, and common abbreviations),
# read from the end of the name or from a ``unit`` label: (unit, factor to the base unit).
_UNIT_WORDS = {
    "bytes": ("bytes", 1.0),
    "byte": ("bytes", 1.0),
    "kilobytes": ("bytes", 1024.0),
    "kibibytes": ("bytes", 1024.0),
    "kb": ("bytes", 1024.0),
    "kib": ("bytes", 1024.0),
    "megabytes": ("bytes", 1024.0**2),
    "mebibytes": ("bytes", 1024.0**2),
    "mb": ("bytes", 1024.0**2),
    "mib": ("bytes", 1024.0**2),
    "gigabytes": ("bytes", 1024.0**3),
    "gibibytes": ("bytes", 1024.0**3),
    "gb": ("bytes", 1024.0**3),
    "gib": ("bytes", 1024.0**3),
    "seconds": ("seconds", 1.0),
    "second": ("seconds", 1.0),
    "secs": ("seconds", 1.0),
    "sec": ("seconds", 1.0),
    "milliseconds": ("seconds", 1e-3),
    "millis": ("seconds", 1e-3),
    "ms": ("seconds", 1e-3),
    "microseconds": ("seconds", 1e-6),
    "micros": ("seconds", 1e-6),
    "us": ("seconds", 1e-6),
    "nanoseconds": ("seconds", 1e-9),
    "nanos": ("seconds", 1e-9),
    "ns": ("seconds", 1e-9),
}
# Words after the unit that do not change it: counter suffixes and aggregations.
_UNIT_TRAILERS = {"total", "sum", "max", "min", "avg", "mean", "median", "last", "current"}
_QUANTILE_WORD = re.compile(r"^p\d{1,3}$")


def unit_parse(name: str, labels: dict[str, str]) -> tuple[str, float]:
    """(unit, factor to it) from a ``unit`` label or the name's last words; ("", 1) if none."""
    label = labels.get("unit", "").strip().lower()
    if label in _UNIT_WORDS:
        return _UNIT_WORDS[label]
    words = name.lower().split("_")
    if words and words[-1] in {"count", "bucket"}:
        return "", 1.0  # how many observations, whatever they measure
    while words and (words[-1] in _UNIT_TRAILERS or _QUANTILE_WORD.match(words[-1])):
        words.pop()
    if len(words) >= 2 and words[-1] in _UNIT_WORDS:
        if words[-1].startswith("sec") and words[-2] in {"time", "timestamp"}:
            return "", 1.0  # a point in time (Unix seconds), not a duration
        return _UNIT_WORDS[words[-1]]
    return "", 1.0


def unit_detect(name: str, labels: dict[str, str], *, rate: bool) -> tuple[str, float]:
    """(``bytes``, ``seconds``, ``bytes/s`` or "", factor from the raw value to that unit)."""
    unit, factor = unit_parse(name, labels)
    if rate:
        # Seconds per second is a fraction (CPU cores, busy time), not a duration.
        return ("bytes/s", factor) if unit == "bytes" else ("", 1.0)
    return unit, factor


def grid_evaluate(samples: list[tuple[float, float]], grid: Grid) -> list[tuple[float, float]]:
    """Prometheus instant-vector semantics at each grid time: the latest sample within lookback."""
    samples.sort(key=lambda p: p[0])
    points: list[tuple[float, float]] = []
    index, last = -1, len(samples) - 1
    for t in grid.times():
        while index < last and samples[index + 1][0] <= t:
            index += 1
        if index >= 0 and samples[index][0] >= t - LOOKBACK_SECONDS:
            points.append((t, samples[index][1]))
    return points


def repeat_length(values: list[float]) -> int:
    """Grid points per raw sample: the shortest run of equal values inside the series.

    A sample coarser than the grid is repeated at every grid time of its lookback (a
    5-minute sample fills five 1-minute points); a series that changes at every point
    gives 1. Runs touching either end may be cut, so only inner runs count.
    """
    # Where a value differs from the one before; an inner run lies between two such places.
    # (map and compress keep the loop in C: this runs for every series of a fleet.)
    changes = list(itertools.compress(itertools.count(1), map(operator.ne, values, values[1:])))
    if len(changes) < 2:
        return 1
    return min(map(operator.sub, changes[1:], changes))


def counter_to_rate(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Per-second increase of a counter at each grid time, over one raw sample interval;
    a reset counted from zero.

    A sample coarser than the grid is held at every grid time of its lookback
    (``repeat_length`` points: a 5-minute sample fills five 1-minute points), so the increase
    between consecutive grid points is nothing where one sample is held and the whole
    interval's increase where the next one arrives: a rate alternating between zero and
    several times the real one, whose median is zero whatever the traffic. The increase is
    taken over one sample interval instead (the value now minus the value that many grid
    points before, over the seconds between them), as Prometheus' ``rate`` over a range of
    one interval reads it; at one sample per grid point that is consecutive points, as
    before."""
    values = [v for _, v in points]
    span = repeat_length(values)
    return [
        (t1, (v1 - v0 if v1 >= v0 else v1) / (t1 - t0))
        for (t0, v0), (t1, v1) in zip(points, points[span:], strict=False)
        if t1 > t0
    ]


@dataclass
class _Pauses:
    depth: int = 0
    resume: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_PAUSES = _Pauses()


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a block builds a fleet's series.

    Decoding a query_range matrix and analysing its series allocate hundreds of thousands
    of small lists and tuples, none in a reference cycle; each burst of allocations
    starts a collection that walks every tracked object again (measured on a 1,000-service
    matrix: the JSON decode 0.85 s with it, 0.25 s without). Reference counting frees them
    either way. The collector is
    switched back on (when it was on) as the last of concurrent pauses ends.
    """
    with _PAUSES.lock:
        if _PAUSES.depth == 0:
            _PAUSES.resume = gc.isenabled()
            gc.disable()
        _PAUSES.depth += 1
    try:
        yield
    finally:
        with _PAUSES.lock:
            _PAUSES.depth -= 1
            if _PAUSES.depth == 0 and _PAUSES.resume:
                gc.enable()
