"""The figures of a service, a call edge or an operation: exact request and error counts,
latency and self-time quantiles, in the window against the baseline, and their change.

Counts are exact. Quantiles come from log-spaced histograms (16 bins per doubling: a
quantile is within 2.2 % of the true value), so memory grows with the number of services
and minutes, never with the number of spans. The change of each measure is the one
statistic ``query_metrics`` uses (``shift_measure``), on one point a step (a minute, or a few
for a sparse key): the median latency, the median self time and the error share of that step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from diagnosis.evidence.common import QueryWindow
from diagnosis.evidence.tools.query_metrics.statistics import Shift, shift_measure

BINS_PER_DOUBLING = 16
QUANTILES = (0.5, 0.95, 0.99)
MIN_STEP_S = 60
MAX_WINDOW_STEPS = 60  # a longer window gets a coarser step, not more points
# What a change is measured on, in the order a tie is broken: the service's own time first
# (the principle of localisation: a service is the cause of what it spends itself).
MEASURES = ("self", "errors", "latency")
# A point of a sparse key (a sampled export: a few spans a minute) spans several steps, so
# that each holds POINT_SPANS spans on average: a median or a share of three spans is noise.
# MERGES stop where the window would keep fewer than 2 * MIN_POINTS points (a shift must
# hold over consecutive points).
POINT_SPANS = 20
MERGES = (1, 2, 5, 10)
MIN_POINTS = 3


def _bin(micros: float) -> int:
    return int(math.log2(micros) * BINS_PER_DOUBLING) if micros > 1 else 0


def _bin_value(index: int) -> float:
    return float(2 ** ((index + 0.5) / BINS_PER_DOUBLING)) if index > 0 else 1.0


def hist_quantile(hist: dict[int, int], q: float) -> float | None:
    """The ``q`` quantile in microseconds (None for an empty histogram)."""
    total = sum(hist.values())
    if not total:
        return None
    rank = q * (total - 1)
    seen = 0
    for index in sorted(hist):
        seen += hist[index]
        if seen > rank:
            return _bin_value(index)
    return _bin_value(max(hist))


@dataclass
class Cell:
    """Counts of one key over one step, or over the whole window or baseline."""

    count: int = 0
    errors: int = 0
    with_status: int = 0
    own_errors: int = 0  # errors that originate here (no child in error)
    duration: dict[int, int] = field(default_factory=dict)
    self_time: dict[int, int] = field(default_factory=dict)

    def add(
        self, duration_us: float, self_us: float | None, status: int | None, own_error: bool
    ) -> None:
        self.count += 1
        if status is not None:
            self.with_status += 1
            if status == 2:
                self.errors += 1
                self.own_errors += own_error
        d = _bin(duration_us)
        self.duration[d] = self.duration.get(d, 0) + 1
        if self_us is not None:
            s = _bin(self_us)
            self.self_time[s] = self.self_time.get(s, 0) + 1

    def merge(self, other: Cell) -> None:
        self.count += other.count
        self.errors += other.errors
        self.with_status += other.with_status
        self.own_errors += other.own_errors
        for mine, theirs in ((self.duration, other.duration), (self.self_time, other.self_time)):
            for index, number in theirs.items():
                mine[index] = mine.get(index, 0) + number

    def error_share(self) -> float | None:
        """Errors over spans; None when none of them recorded a status (unknown, not 0)."""
        return self.errors / self.count if self.with_status and self.count else None

    def quantile(self, measure: str, q: float) -> float | None:
        return hist_quantile(self.duration if measure == "latency" else self.self_time, q)


@dataclass
class Grid:
    """Steps from the baseline's start; the window starts at step ``window_from``."""

    start_ns: int
    step_ns: int
    window_from: int
    window_ns: int
    end_ns: int

    @classmethod
    def of(cls, window: QueryWindow) -> Grid:
        length = (window.end - window.start).total_seconds()
        step_s = max(MIN_STEP_S, math.ceil(length / MAX_WINDOW_STEPS / MIN_STEP_S) * MIN_STEP_S)
        # the baseline is cut to a whole number of steps ending at the window's start
        window_ns = int(window.start.timestamp() * 1e9)
        baseline_s = (window.start - window.baseline_start).total_seconds()
        steps = int(baseline_s // step_s)
        step_ns = step_s * 1_000_000_000
        return cls(
            start_ns=window_ns - steps * step_ns,
            step_ns=step_ns,
            window_from=steps,
            window_ns=window_ns,
            end_ns=int(window.end.timestamp() * 1e9),
        )

    @property
    def steps_total(self) -> int:
        return -(-(self.end_ns - self.start_ns) // self.step_ns)

    def step_of(self, start_ns: int) -> int | None:
        if start_ns < self.start_ns or start_ns >= self.end_ns:
            return None
        return (start_ns - self.start_ns) // self.step_ns

    def time_of(self, step: int) -> float:
        return (self.start_ns + step * self.step_ns) / 1e9


@dataclass
class Figures:
    """One key's cells per step; its window and baseline totals are their sums."""

    grid: Grid
    steps: dict[int, Cell] = field(default_factory=dict)
    _totals: tuple[Cell, Cell] | None = None

    def add(
        self,
        step: int,
        duration_us: float,
        self_us: float | None,
        status: int | None,
        own_error: bool,
    ) -> None:
        cell = self.steps.get(step)
        if cell is None:
            cell = self.steps[step] = Cell()
        cell.add(duration_us, self_us, status, own_error)
        self._totals = None

    def _sums(self) -> tuple[Cell, Cell]:
        if self._totals is None:
            window, baseline = Cell(), Cell()
            for step, cell in self.steps.items():
                (window if step >= self.grid.window_from else baseline).merge(cell)
            self._totals = (window, baseline)
        return self._totals

    @property
    def window(self) -> Cell:
        return self._sums()[0]

    @property
    def baseline(self) -> Cell:
        return self._sums()[1]

    def merge_factor(self, grid: Grid) -> int:
        """Steps per point: the fewest of MERGES that give a point POINT_SPANS spans on
        average in the window (a share of 3 spans is noise, not a level)."""
        window_steps = max(len(range(grid.window_from, grid.steps_total)), 1)
        per_step = self.window.count / window_steps
        chosen = 1
        for merge in MERGES:
            if window_steps // merge < MIN_POINTS * 2:
                break
            chosen = merge
            if per_step * merge >= POINT_SPANS:
                break
        return chosen

    def _merged(self, grid: Grid, merge: int) -> dict[int, Cell]:
        """Cells of ``merge`` steps each, aligned to the window's start."""
        if merge == 1:
            return self.steps
        out: dict[int, Cell] = {}
        for step, cell in self.steps.items():
            point = grid.window_from + ((step - grid.window_from) // merge) * merge
            into = out.get(point)
            if into is None:
                into = out[point] = Cell()
            into.merge(cell)
        return out

    def _series(
        self, grid: Grid, measure: str, cells: dict[int, Cell]
    ) -> list[tuple[float, float]]:
        points: list[tuple[float, float]] = []
        for step in sorted(cells):
            cell = cells[step]
            if measure == "errors":
                value = cell.error_share()
            else:
                value = cell.quantile(measure, 0.5)
                value = value / 1000 if value is not None else None  # ms
            if value is not None:
                points.append((grid.time_of(step), value))
        return points

    def shifts(self, grid: Grid) -> dict[str, Shift]:
        """Each measure's change, window against baseline (the query_metrics statistic)."""
        out: dict[str, Shift] = {}
        window_t = grid.window_ns / 1e9
        cells = self._merged(grid, self.merge_factor(grid))
        for measure in MEASURES:
            points = self._series(grid, measure, cells)
            before = [(t, v) for t, v in points if t < window_t]
            within = [(t, v) for t, v in points if t >= window_t]
            if not before or not within:
                continue
            out[measure] = shift_measure(
                baseline=[v for _, v in before],
                window=within,
                before=before,
                upper=1.0 if measure == "errors" else None,
            )
        return out
