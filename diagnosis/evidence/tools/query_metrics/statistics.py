"""The change statistic of one series: the robust level shift of the window against the
baseline (``shift_measure``) and the facts of a series (``series_analyse``)."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from diagnosis.evidence.common import (
    QueryWindow,
    num_format,
    num_value,
    quantity_format,
)
from diagnosis.evidence.timeutil import duration_format, unix_format
from diagnosis.evidence.tools.query_metrics.series import (
    LOOKBACK_SECONDS,
    RawSeries,
    repeat_length,
    unit_detect,
)

TREND_POINTS = 12
ANOMALY_THRESHOLD = 3.0  # robust-scale units a level must move to count as a shift
ANOMALY_CAP = 1000.0
SUSTAIN_POINTS = 3  # consecutive samples a shift must hold (2 in windows under 12 samples)
SPARSE_BASELINE_POINTS = 8  # fewer baseline samples: said in the line, score scaled down
RELATIVE_SCALE_FLOOR = 0.01  # a flat baseline's noise counts as 1 % of its level
# A share is told apart to a thousandth of its whole (0.1 point of 100 %: three significant
# digits of the whole, as the engine compares figures): a flat share's least shift.
SHARE_RESOLUTION = 1e-3
# Unit words of the naming conventions (OpenMetrics/Prometheus ``_ratio``, ``_percent``) whose
# series are bounded above: a share of something, at most the whole.
_BOUNDED_UNITS = {"ratio": 1.0, "percent": 100.0, "percentage": 100.0, "pct": 100.0}


# The odds that the largest of a fleet's pure-noise scores reaches ``noise_score_bound``: one
# fleet view in a hundred may show one line of noise (worded "no sustained shift"). Ten times
# rarer would raise the bar by about a tenth of a score unit (a fifth of the gap the bar leaves
# below ANOMALY_THRESHOLD at 50,000 series) and hide that much more of the small real shifts.
NOISE_BOUND_ODDS = 0.01


def _t_outside(x: float, dof: int) -> float:
    """P(|T| > x) for Student's t with ``dof`` degrees of freedom, in closed form (Abramowitz
    and Stegun 26.7.3 and 26.7.4: a finite series in cos θ, θ = atan(x / √dof))."""
    theta = math.atan(x / math.sqrt(dof))
    sine, cos2 = math.sin(theta), math.cos(theta) ** 2
    if dof % 2 == 0:
        term = total = 1.0
        for k in range(2, dof - 1, 2):
            term *= cos2 * (k - 1) / k
            total += term
        inside = sine * total
    else:
        total = 0.0
        if dof > 1:
            term = total = math.cos(theta)
            for k in range(3, dof - 1, 2):
                term *= cos2 * (k - 1) / k
                total += term
        inside = 2 / math.pi * (theta + sine * total)
    return max(1.0 - inside, 0.0)


def _t_beyond(odds: float, dof: int) -> float:
    """The x that |T| (Student's t, ``dof`` degrees of freedom) exceeds with probability
    ``odds`` (bisection on ``_t_outside``, which falls as x grows)."""
    low, high = 0.0, 8.0
    while _t_outside(high, dof) > odds:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        if _t_outside(middle, dof) > odds:
            low = middle
        else:
            high = middle
    return high


@functools.lru_cache(maxsize=256)
def noise_score_bound(*, series: int, window_samples: int, baseline_samples: int) -> float:
    """The anomaly score that the largest of ``series`` pure-noise scores reaches with
    probability NOISE_BOUND_ODDS, for series of ``window_samples`` and ``baseline_samples``
    samples.

    What the score of a series without a shift is (``shift_measure``, no run at the threshold):
    |median(window) − median(baseline)| / s, s the baseline's robust spread (the larger of
    IQR/1.349 and 1.4826·MAD, both σ for normal noise). For independent normal noise of
    deviation σ a median of n samples has deviation σ·√(π/2n) (π/2: the median's variance
    over the mean's), so the difference of the two medians is σ·u·Z with
    u = √(π/2 · (1/n_w + 1/n_b)) and Z standard normal; s, estimated from n_b samples, is as
    uncertain as a standard deviation from about n_b/2 (MAD and IQR are each about 37 %
    efficient; the larger of the two does better). Measured on simulated normal noise (10
    million series of 21 window and 60 baseline samples, 4 million of 7 and 20, of 41 and 120):
    the score's tail out to 10⁻⁶ is u times Student's t with n_b/2 degrees of freedom within
    3 %. So a noise score is u·|T|, T Student's t with n_b/2 degrees of freedom.

    The largest of N such scores grows with N (about u·√(2 ln N) for normal noise, more for
    Student's): with 21 and 60 samples about 1.6 at 50,000 series (the largest of a
    10,000-service bench fleet's 50,000 was 1.62). The bound is the score each series reaches
    with probability NOISE_BOUND_ODDS / N (Bonferroni: then the largest of N, independent or
    not, reaches it with probability at most NOISE_BOUND_ODDS): for those samples 1.55 at 300
    series, 1.87 at 5,000, 2.13 at 50,000. Noise whose samples follow each other (a slow
    wander) has fewer independent samples than points and reaches higher: this bound is the
    least a fleet's noise reaches, not the most.
    """
    units = math.sqrt(math.pi / 2 * (1 / max(window_samples, 1) + 1 / max(baseline_samples, 1)))
    dof = max(baseline_samples // 2, 1)
    return units * _t_beyond(NOISE_BOUND_ODDS / max(series, 1), dof)


def _quantile_sorted(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _median(values: list[float]) -> float:
    return _quantile_sorted(sorted(values), 0.5)


def _spread(values: list[float], median: float) -> float:
    """Spread of ``values`` (MAD or IQR, as a standard deviation); 0 when noise-free."""
    ordered = sorted(values)
    iqr = _quantile_sorted(ordered, 0.75) - _quantile_sorted(ordered, 0.25)
    mad = _median([abs(v - median) for v in values])
    return max(iqr / 1.349, 1.4826 * mad)


def upper_bound(name: str, labels: dict[str, str], values: list[float]) -> float | None:
    """The upper end of a share's range (1 for a ratio, 100 for a percentage), when its unit
    says it is one and every value lies in that range; None for unbounded series."""
    words = [*name.lower().split("_"), labels.get("unit", "").strip().lower()]
    bounds = [_BOUNDED_UNITS[w] for w in words if w in _BOUNDED_UNITS]
    if not bounds or not values:
        return None
    bound = bounds[-1]
    return bound if 0.0 <= min(values) and max(values) <= bound else None


def _magnitude(value: float, upper: float | None) -> float:
    """How far ``value`` is from the nearer end of its range (0, or ``upper`` for a share).

    A share at its upper end (availability at 100 %) is as exact as a count at zero: what
    it can lose is its distance to that end (the failure share), not a fraction of itself.
    """
    if upper is None:
        return abs(value)
    return min(abs(value), abs(upper - value))


def _flat_share_spread(median: float, level: float, upper: float) -> float:
    """The noise a share is read against when its baseline shows none (``upper``: the top
    of its range).

    Resolution: a baseline exactly at 100 % (or 0 %) has an unknown spread, not a zero one
    (no failure was counted, not none can be). What is known is how finely a share is
    told apart: ``SHARE_RESOLUTION`` of its whole. A move of one such unit is the least
    shift it can show, so the scale is that unit over ``ANOMALY_THRESHOLD`` and a dip from
    a flat 100 % scores by its size: 99.99 % 0.3 (no shift), 99.9 % 3, 99 % 30, 98 % 60.
    As for any series without measured noise, the scale is at least 1 % of the change
    (``RELATIVE_SCALE_FLOOR``), so a change from a constant scores at most 100 (a share
    from one end of its range to the other as a count from zero).
    """
    unit = upper * SHARE_RESOLUTION / ANOMALY_THRESHOLD
    return max(unit, RELATIVE_SCALE_FLOOR * abs(level - median))


def _flat_spread(median: float, level: float, upper: float | None) -> float:
    """The floor of a baseline without measured noise: 1 % of the shifted level for an
    unbounded series, the resolution of a share (``_flat_share_spread``) for a share."""
    if upper is None:
        return RELATIVE_SCALE_FLOOR * abs(level)
    return _flat_share_spread(median, level, upper)


def _sustain_length(window_points: int, repeat: int) -> int:
    """Consecutive window points a shift must hold: 3 samples (2 in short windows).

    Counted in samples, not grid points, so one coarse sample repeated over the grid is
    still one sample.
    """
    samples = min(SUSTAIN_POINTS, max(2, window_points // repeat // 4))
    return max(min(samples * repeat, window_points), 1)


def _strongest_run(deviations: list[float | None], length: int) -> tuple[float, int, int]:
    """(strength, sign, start) of the run of ``length`` points farthest from the baseline.

    A run's strength is its least extreme observed point, so one spike cannot make a run
    strong. A missing point (None: no sample within the lookback) is no evidence either
    way: it neither breaks a run nor makes one, and a run needs at least half its points
    observed (``_observed_enough``), so a gap cannot stand in for the samples.
    """
    n = len(deviations)
    observed = [0] * (n + 1)
    for i, d in enumerate(deviations):
        observed[i + 1] = observed[i] + (d is not None)
    ups = [math.inf if d is None else d for d in deviations]
    downs = [-math.inf if d is None else d for d in deviations]
    starts = range(max(n - length + 1, 1))
    lows = [
        min(ups[i : i + length]) if _observed_enough(observed, i, length) else -math.inf
        for i in starts
    ]
    highs = [
        max(downs[i : i + length]) if _observed_enough(observed, i, length) else math.inf
        for i in starts
    ]
    up_at = max(range(len(lows)), key=lows.__getitem__)
    down_at = min(range(len(highs)), key=highs.__getitem__)
    if lows[up_at] >= -highs[down_at]:
        return lows[up_at], 1, up_at
    return -highs[down_at], -1, down_at


def _observed_enough(observed: list[int], start: int, length: int) -> bool:
    """At least half of the run's points hold a sample (and at least one does)."""
    count = observed[min(start + length, len(observed) - 1)] - observed[start]
    return count >= max(1, math.ceil(length / 2))


def _gridded(window: list[tuple[float, float]]) -> list[tuple[float, float] | None]:
    """The window's points with None at the grid times no sample covered.

    The grid step is the shortest spacing of the window's points; a longer spacing is a
    gap (a sample dropped, a scrape missed) of that many steps less one.
    """
    steps = [b[0] - a[0] for a, b in itertools.pairwise(window) if b[0] > a[0]]
    if not steps:
        return list(window)
    step = min(steps)
    out: list[tuple[float, float] | None] = [window[0]]
    for before, point in itertools.pairwise(window):
        missing = round((point[0] - before[0]) / step) - 1
        out.extend([None] * max(missing, 0))
        out.append(point)
    return out


def _sample_values(points: list[tuple[float, float] | None], repeat: int) -> list[float]:
    """The values of the samples behind gridded ``points``: each counted once.

    The grid repeats a sample at every grid time of its lookback, and how many that is
    depends on where the grid falls and on the samples after it (a sample followed by a
    missing one is repeated up to its lookback's edge, one grid time more than its
    neighbours). A run of equal values between changes or gaps (None) holds at most
    ``len // repeat`` samples (each covers at least ``repeat`` points), at least one; a
    median over grid points would weigh each sample by how the grid fell, not by what
    was measured.
    """
    out: list[float] = []
    for value, run in itertools.groupby(points, key=lambda p: None if p is None else p[1]):
        if value is not None:
            out.extend([value] * max(sum(1 for _ in run) // repeat, 1))
    return out


def _unseen_before(full: list[tuple[float, float] | None], index: int, repeat: int) -> float:
    """Seconds before ``full[index]`` that no new sample covered (0 when the point before
    was a sample of its own).

    A grid time without a sample means the last one was more than a lookback old: the
    change began somewhere after the last sample seen, so its onset is known only to
    within that gap (and the step at its edge), not to within one sample interval. A
    lookback also holds the last sample over grid times whose own sample is missing: in
    a series whose samples differ from one to the next, a value held for a whole sample
    interval more than its samples last (``2 * repeat`` points or more) is one sample seen
    again, not a new one, so those points are unseen too (at most a lookback: beyond it,
    equal values are new samples). Where equal values are usual (a share at 100 %, a count
    at zero) a repeat says nothing and counts for nothing.
    """
    seen = [p for p in full if p is not None]
    steps = [b[0] - a[0] for a, b in itertools.pairwise(seen)]
    step = min((s for s in steps if s > 0), default=0.0)
    missing = 0
    while index - missing - 1 >= 0 and full[index - missing - 1] is None:
        missing += 1
    if missing:
        return (missing + 1) * step
    before = full[index - 1] if index > 0 else None
    held = 0
    while before is not None and index - held - 1 >= 0:
        point = full[index - held - 1]
        if point is None or point[1] != before[1]:
            break
        held += 1
    changes = sum(a[1] != b[1] for a, b in itertools.pairwise(seen))
    varies = changes * repeat * 2 >= len(seen)  # the values change at most samples
    if not varies or held < 2 * repeat:
        return 0.0
    return min((held - repeat) * step, LOOKBACK_SECONDS)


@dataclass
class SeriesFacts:
    service: str
    metric: str
    labels: dict[str, str]
    is_rate: bool
    unit: str
    unit_scale: float
    baseline_mean: float | None
    baseline_median: float | None
    window_mean: float | None
    window_level: float | None
    window_max: float | None
    window_max_at: float | None
    window_min: float | None
    ratio: float | None
    change_point: float | None
    shift_end: float | None
    direction: str
    new: bool
    anomaly_score: float
    sustained_points: int
    baseline_points: int
    baseline_samples: int
    window_points: int
    last_seen: float | None
    trend: list[float | None]
    trend_step: float
    trend_start: float
    # the extreme of the shift itself, from its onset to its end (the maximum of an upward
    # shift, the minimum of a downward one): the window's extreme may come before the change
    shift_peak: float | None = None
    shift_peak_at: float | None = None
    # seconds before the change point no sample covered (Shift.onset_unseen)
    onset_unseen: float = 0.0
    # the raw samples behind the window's points (each counted once, as baseline_samples)
    window_samples: int = 0

    @property
    def sparse_baseline(self) -> bool:
        return 0 < self.baseline_samples < SPARSE_BASELINE_POINTS

    @property
    def anomalous(self) -> bool:
        return self.direction in {"up", "down"}

    @property
    def relative_change(self) -> float:
        """|window level − baseline median| relative to the baseline: orders equal scores.

        A change from zero is infinite, whatever its magnitude (units are not comparable).
        """
        if self.window_level is None or self.baseline_median is None:
            return 0.0
        change = abs(self.window_level - self.baseline_median)
        if self.baseline_median == 0:
            return math.inf if change else 0.0
        return change / abs(self.baseline_median)

    @property
    def identity(self) -> str:
        shown = {k: v for k, v in sorted(self.labels.items()) if k != "service"}
        inner = ",".join(f'{k}="{v}"' for k, v in shown.items())
        name = f"{self.metric}{{{inner}}}" if inner else self.metric
        prefix = f"{self.service} " if self.service else ""
        return prefix + name + (" per-second rate" if self.is_rate else "")

    def _value(self, value: float | None) -> str:
        """The raw value (quoted verbatim), with its human form when the unit is known."""
        text = num_format(value)
        human = self._human(value)
        return f"{text} ({human})" if human else text

    def _human(self, value: float | None) -> str:
        if value is None or not self.unit:
            return ""
        return quantity_format(value * self.unit_scale, self.unit)

    def _means_agree(self) -> bool:
        """The means point the same way as the level shift (or there is no shift)."""
        if self.window_mean is None or self.baseline_mean is None or not self.anomalous:
            return True
        sign = 1 if self.direction == "up" else -1
        shown = num_value(self.window_mean), num_value(self.baseline_mean)
        return shown[0] is not None and shown[1] is not None and sign * (shown[0] - shown[1]) > 0

    def line(self) -> str:
        if self.window_points == 0:
            seen = unix_format(self.last_seen) if self.last_seen else "n/a"
            return (
                f"{self.identity}: no samples in the window, baseline median "
                f"{self._value(self.baseline_median)} over {self.baseline_points} points, "
                f"last seen {seen}"
            )
        parts: list[str] = []
        if not self.baseline_points:
            parts.append("new series (no baseline samples)")
        elif self.new:
            parts.append("new (zero baseline)")
        if self.anomalous:
            since = (
                f" since {unix_format(self.change_point)}" if self.change_point is not None else ""
            )
            if self.shift_end is not None:
                since += f" until {unix_format(self.shift_end)}"
            parts.append(
                f"{self.direction}{since}, level {self._value(self.window_level)} over "
                f"{self.sustained_points} window points"
            )
        else:
            parts.append(f"no sustained shift, level {self._value(self.window_level)}")
        if self.baseline_points:
            parts[-1] += f" vs baseline median {self._value(self.baseline_median)}"
            parts.append(
                f"ratio {num_format(self.ratio)}x" if self.ratio is not None else "ratio n/a"
            )
        if self.sparse_baseline:
            parts.append(f"sparse baseline ({self.baseline_samples} samples, score damped)")
        parts.append(f"anomaly score {num_format(self.anomaly_score)}")
        details = [
            f"window max {self._value(self.window_max)} at {unix_format(self.window_max_at or 0)}",
            f"window min {self._value(self.window_min)}",
        ]
        details += self._peak_details()
        if self._means_agree():
            details.append(f"window mean {self._value(self.window_mean)}")
            if self.baseline_points:
                details.append(
                    f"baseline mean {self._value(self.baseline_mean)} "
                    f"over {self.baseline_points} points"
                )
        return f"{self.identity}: " + ", ".join(parts) + "; " + ", ".join(details)

    def _peak_details(self) -> list[str]:
        """The shift's own extreme, when the window's came before the onset or is not it."""
        if self.shift_peak is None or self.shift_peak_at is None or not self.anomalous:
            return []
        extreme = self.window_max if self.direction == "up" else self.window_min
        if self.shift_peak == extreme and (
            self.direction == "down" or self.shift_peak_at == self.window_max_at
        ):
            return []
        word = "max" if self.direction == "up" else "min"
        return [
            f"{word} since the change {self._value(self.shift_peak)} "
            f"at {unix_format(self.shift_peak_at)}"
        ]

    def trend_line(self) -> str:
        values = " | ".join(num_format(v) if v is not None else "-" for v in self.trend)
        step = duration_format(timedelta(seconds=self.trend_step))
        return (
            f"{self.identity} trend, mean per {step} from {unix_format(self.trend_start)}: {values}"
        )

    def summary(self) -> dict[str, Any]:
        human = {
            key: self._human(value)
            for key, value in (
                ("baseline_median", self.baseline_median),
                ("window_level", self.window_level),
                ("window_max", self.window_max),
                ("window_min", self.window_min),
                ("shift_peak", self.shift_peak),
            )
            if self._human(value)
        }
        return {
            "service": self.service,
            "metric": self.metric,
            "labels": dict(sorted(self.labels.items())),
            "rate": self.is_rate,
            "unit": self.unit,
            "baseline_mean": num_value(self.baseline_mean),
            "baseline_median": num_value(self.baseline_median),
            "baseline_points": self.baseline_points,
            "baseline_samples": self.baseline_samples,
            "sparse_baseline": self.sparse_baseline,
            "window_mean": num_value(self.window_mean),
            "window_level": num_value(self.window_level),
            "window_max": num_value(self.window_max),
            "window_max_at": unix_format(self.window_max_at) if self.window_max_at else None,
            "window_min": num_value(self.window_min),
            "shift_peak": num_value(self.shift_peak),
            "shift_peak_at": unix_format(self.shift_peak_at) if self.shift_peak_at else None,
            "window_points": self.window_points,
            "ratio": num_value(self.ratio),
            "new": self.new,
            "change_point": unix_format(self.change_point) if self.change_point else None,
            "shift_end": unix_format(self.shift_end) if self.shift_end else None,
            "onset_unseen_s": self.onset_unseen,
            "sustained_points": self.sustained_points,
            "direction": self.direction,
            "anomaly_score": num_value(self.anomaly_score) or 0.0,
            "human": human,
            "line": self.line(),
            "trend_line": self.trend_line(),
        }


def _trend(
    points: list[tuple[float, float]], start: float, end: float, step: float
) -> tuple[list[float | None], float]:
    """Bucket means, at most TREND_POINTS buckets, each a whole number of steps wide."""
    width = max(math.ceil((end - start) / TREND_POINTS / step), 1) * step
    buckets = max(min(math.ceil((end - start) / width), TREND_POINTS), 1)
    sums = [0.0] * buckets
    counts = [0] * buckets
    top = buckets - 1
    for t, v in points:
        if t < start or v != v:  # v != v: NaN
            continue
        index = int((t - start) // width)
        if index > top:
            index = top
        sums[index] += v
        counts[index] += 1
    return [s / c if c else None for s, c in zip(sums, counts, strict=True)], width


def _ratio(level: float, median: float) -> float | None:
    """level / median, only where it reads as a ratio (a positive baseline, a level ≥ 0)."""
    if median <= 0 or level < 0:
        return None
    return level / median


@dataclass(frozen=True)
class Shift:
    """The one comparison every figure of a series comes from."""

    level: float  # median of the window points of the shift (the whole window when none)
    score: float  # |level − baseline median| / robust scale, damped when the baseline is sparse
    direction: str  # up | down | flat
    change_point: float | None
    sustained_points: int
    shift_end: float | None = None  # the last shifted point, when the shift ended in the window
    # seconds before the onset no sample covered (``_unseen_before``): how much later than
    # the change the onset may be dated
    onset_unseen: float = 0.0


def _held_from_baseline(
    full: list[tuple[float, float] | None], before: list[tuple[float, float]], repeat: int
) -> int:
    """How many of the window's first grid points hold the baseline's last sample where a
    sample after it is missing (0: none, or the sample only lasting its own interval).

    A lookback carries the last sample over grid times whose own sample is missing. Over
    the rest of its own interval, followed by the next sample, that is the sample as usual,
    and the walk back into the baseline reads it. Followed by grid times no sample covered,
    or held for a whole interval (``repeat`` points) or more, a sample was dropped after it:
    those points are the baseline's sample seen again, not a window one, and a shift never
    extends back onto them: a baseline point half the threshold out is noise about once in
    fifteen (a normal tail), so the onset would move before the change on noise alone,
    earlier than the full series dates it.
    """
    if not before:
        return 0
    last = before[-1][1]
    held = 0
    for point in full:
        if point is None or point[1] != last:
            break
        held += 1
    gap_after = held < len(full) and full[held] is None
    return held if held and (gap_after or held >= max(repeat, 1)) else 0


def _beyond(deviation: float | None, sign: int) -> bool:
    """An observed point at least half the threshold away on the shift's side."""
    return deviation is not None and sign * deviation >= ANOMALY_THRESHOLD / 2


def baseline_samples(points: int, repeat: int) -> int:
    """The raw samples behind ``points`` baseline grid points."""
    return math.ceil(points / repeat) if points else 0


def shift_measure(
    *,
    baseline: list[float],
    window: list[tuple[float, float]],
    before: list[tuple[float, float]],
    upper: float | None = None,
    repeat: int | None = None,
) -> Shift:
    """Robust level shift of ``window`` against ``baseline``.

    The strongest run of consecutive window points away from the baseline median (in
    robust-scale units, its strength the least extreme of its points) locates the shift;
    it is extended both ways while points stay at least half the threshold away. The
    shift's level is the median of those points; score, direction, ratio and change point
    all follow from that one level against the baseline median, so they cannot disagree.
    ``upper`` is the top of a share's range: its relative floor counts from the nearer end.
    ``repeat`` is ``repeat_length(baseline + window values)`` when the caller has it already.

    How long a shift holds is counted over the samples that exist: a grid time no sample
    covered (a dropped sample, a missed scrape) is unknown, not a return to the baseline, so
    it neither breaks a run nor counts for it; a run needs at least half its points seen
    (``_observed_enough``): no more of it assumed than observed, so one raised 5-minute
    sample beside a missing one holds, one beside two missing ones does not.
    """
    values = [v for _, v in window]
    median = _median(baseline)
    noise = _spread(baseline, median)
    if repeat is None:
        repeat = repeat_length(baseline + values)
    samples = baseline_samples(len(baseline), repeat)
    if samples < SPARSE_BASELINE_POINTS:
        # A few baseline samples say little about its noise: let the data's own spread count.
        everything = baseline + values
        noise = max(noise, 1.4826 * _median([abs(v - _median(everything)) for v in everything]))
    noisy = noise > 0
    scale = max(noise, RELATIVE_SCALE_FLOOR * _magnitude(median, upper), 1e-9)
    damping = min(1.0, samples / SPARSE_BASELINE_POINTS)
    full = _gridded(window)
    deviations = [None if p is None else (p[1] - median) / scale for p in full]
    length = _sustain_length(len(full), repeat)
    strength, sign, start = _strongest_run(deviations, length)
    segment = _sample_values(full, repeat)
    first, last = 0, len(window) - 1
    unseen = 0.0
    if strength >= ANOMALY_THRESHOLD:
        low, high = start, min(start + length, len(full))
        held = _held_from_baseline(full, before, repeat)
        while low > held and _beyond(deviations[low - 1], sign):
            low -= 1
        while high < len(full) and _beyond(deviations[high], sign):
            high += 1
        kept = [p for p in full[low:high] if p is not None]
        segment = _sample_values(full[low:high], repeat)
        first = window.index(kept[0])
        last = first + len(kept) - 1
        unseen = _unseen_before(full, full.index(kept[0]), repeat)
    level = _median(segment)
    # A noise-free baseline (constant, or mostly zero) has no noise to measure against: its
    # floor is 1 % of the larger of the two levels, so a change from a constant scores by
    # how far it moved relative to itself (at most 100, e.g. from zero) rather than without
    # bound; a shift against measured noise can score higher. A share's floor is its
    # resolution (``_flat_share_spread``): a dip from exactly 100 % scores by its size.
    spread = scale if noisy else max(scale, _flat_spread(median, level, upper))
    # Rounded as shown, so that the shown score and the direction agree at the threshold.
    score = num_value(min(abs(level - median) / spread, ANOMALY_CAP) * damping) or 0.0
    if score < ANOMALY_THRESHOLD or level == median:
        return Shift(level, score, "flat", None, 0)
    up = level > median
    onset = window[first][0]
    if first == 0:
        # The change may have begun before the window: walk back while the baseline's last
        # points stay away from its median.
        for t, v in reversed(before):
            if (1 if up else -1) * (v - median) / scale < ANOMALY_THRESHOLD / 2:
                break
            onset = t
    ended = window[last][0] if last < len(window) - 1 else None
    if onset != window[first][0]:
        unseen = 0.0  # dated in the baseline's points, which have no gaps marked
    return Shift(level, score, "up" if up else "down", onset, last - first + 1, ended, unseen)


def shift_peak(
    window: list[tuple[float, float]], shift: Shift
) -> tuple[float | None, float | None]:
    """(value, time) of the shift's extreme in its own direction, between its onset and its
    end: the peak a line states with the onset is the change's, never one from before it.

    The onset is the change statistic's own (``shift.change_point``; it may lie before the
    window, then the shift's points start with the window). The first of equal extremes.
    """
    if shift.change_point is None or shift.direction not in {"up", "down"}:
        return None, None
    end = shift.shift_end if shift.shift_end is not None else math.inf
    points = [(t, v) for t, v in window if shift.change_point <= t <= end]
    if not points:
        return None, None
    pick = max if shift.direction == "up" else min
    value = pick(v for _, v in points)
    return value, next(t for t, v in points if v == value)


def series_analyse(series: RawSeries, window: QueryWindow, step: float) -> SeriesFacts:
    ws, we = window.start.timestamp(), window.end.timestamp()
    bs = window.baseline_start.timestamp()
    usable = [(t, v) for t, v in series.points if t >= bs and t <= we and math.isfinite(v)]
    before = [(t, v) for t, v in usable if t < ws]
    baseline = [v for _, v in before]
    in_window = [(t, v) for t, v in usable if t >= ws]
    values = [v for _, v in in_window]
    baseline_median = _median(baseline) if baseline else None
    window_max = max(values) if values else None
    shift: Shift | None = None
    level = _median(values) if values else None
    score, direction = 0.0, "flat"
    repeat = repeat_length(baseline + values)
    if baseline and values:
        upper = upper_bound(series.name, series.labels, baseline + values)
        shift = shift_measure(
            baseline=baseline, window=in_window, before=before, upper=upper, repeat=repeat
        )
        level, score, direction = shift.level, shift.score, shift.direction
    elif baseline:
        # A series that stopped reporting is worth a look, but ranks below clear excursions.
        score, direction = ANOMALY_THRESHOLD, "down"
    new = bool(values) and (not baseline or (baseline_median == 0 and direction != "flat"))
    ratio = None
    if shift is not None and baseline_median is not None and not new:
        ratio = _ratio(shift.level, baseline_median)
    peak, peak_at = shift_peak(in_window, shift) if shift is not None else (None, None)
    trend, width = _trend(usable, bs, we, step)
    unit, unit_scale = unit_detect(series.name, series.labels, rate=series.is_rate)
    return SeriesFacts(
        service=series.labels.get("service", ""),
        metric=series.name,
        labels=series.labels,
        is_rate=series.is_rate,
        unit=unit,
        unit_scale=unit_scale,
        baseline_mean=sum(baseline) / len(baseline) if baseline else None,
        baseline_median=baseline_median,
        window_mean=sum(values) / len(values) if values else None,
        window_level=level,
        window_max=window_max,
        window_max_at=next(t for t, v in in_window if v == window_max) if values else None,
        window_min=min(values) if values else None,
        ratio=ratio,
        change_point=shift.change_point if shift else None,
        shift_end=shift.shift_end if shift else None,
        direction=direction,
        new=new,
        anomaly_score=score,
        sustained_points=shift.sustained_points if shift else 0,
        baseline_points=len(baseline),
        baseline_samples=baseline_samples(len(baseline), repeat),
        window_points=len(values),
        last_seen=usable[-1][0] if usable else None,
        trend=trend,
        trend_step=width,
        trend_start=bs,
        shift_peak=peak,
        shift_peak_at=peak_at,
        onset_unseen=shift.onset_unseen if shift is not None else 0.0,
        window_samples=baseline_samples(len(values), repeat),
    )
