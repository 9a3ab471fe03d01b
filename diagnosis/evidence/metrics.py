"""query_metrics: series from OpenMetrics files or Prometheus, compared window vs baseline.

Both backends produce the same thing: each series evaluated on one time grid
(``step`` apart, aligned to multiples of ``step``, each point the latest sample no
older than Prometheus' 5-minute lookback), so the file backend and a Prometheus
loaded with the same data report the same facts.

One change statistic per series (``shift_measure``): the robust level shift of the
window against the baseline. The strongest run of consecutive window points away from
the baseline median (in units of the baseline's robust scale, MAD or IQR) locates the
shift; its level is the median of the shifted points. Direction, ratio, score and
change point all come from that one level against the baseline median, so "up" never
comes with a ratio below 1.

Each entry of ``summary["series"]``:

- ``service``, ``metric``, ``labels`` (with ``service``), ``rate`` (a counter shown as a
  per-second rate), ``unit`` (``bytes``, ``seconds``, ``bytes/s`` or "", read from the
  name's conventional suffix or a ``unit`` label);
- ``baseline_median``, ``baseline_mean``, ``baseline_points`` (grid points),
  ``baseline_samples`` (raw samples behind them: a sample coarser than the grid fills
  several grid points); ``sparse_baseline`` (fewer than SPARSE_BASELINE_POINTS baseline
  samples: said in the line, score scaled down);
- ``window_level``: the median of the shifted window points (of the whole window when
  there is no shift); ``window_mean``, ``window_max``, ``window_max_at``, ``window_min``,
  ``window_points``: plain descriptions of the window;
- ``direction``: ``up``/``down`` when ``anomaly_score`` >= ANOMALY_THRESHOLD (then
  ``window_level`` is above/below ``baseline_median``), else ``flat``; a series with a
  baseline and no window samples is ``down`` with score ANOMALY_THRESHOLD;
- ``ratio``: ``window_level / baseline_median`` (> 1 for up, < 1 for down), None when the
  baseline median is not positive, the level negative, or the series is new;
- ``new``: no baseline samples, or a zero baseline median that the window left;
- ``anomaly_score``: |window_level − baseline_median| / robust scale, capped at
  ANOMALY_CAP, damped for a sparse baseline (0 without baseline); a noise-free baseline
  (constant or mostly zero) scores at most 100 (100 × the relative change, 100 from zero).
  Series rank by score, then relative change, then the earlier change point;
- ``change_point``: when the shift began (it may lie in the baseline when the window
  starts shifted), ``shift_end``: its last point when it ended inside the window,
  ``sustained_points``: the window grid points of the shift (0 when flat); a shift must
  hold over SUSTAIN_POINTS consecutive samples (2 in short windows), counted in raw
  samples, so one coarse sample repeated over the grid is never a shift;
- ``human``: the human form (``1.95 GiB``, ``230 ms``) of ``baseline_median``,
  ``window_level``, ``window_max``, ``window_min`` when the unit is known;
- ``line``: the excerptable fact line (raw values, each followed by its human form in
  brackets; the means only when they point the same way as the shift), and
  ``trend_line``: bucket means over baseline and window.

Every number in the summary equals its rendering in the line.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from diagnosis.evidence.common import (
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    ToolTimeout,
    clamp_record,
    num_format,
    num_value,
    quantity_format,
)
from diagnosis.evidence.formats import Labels, openmetrics_line_parse
from diagnosis.evidence.timeutil import duration_format, unix_format

LOOKBACK_SECONDS = 300.0  # Prometheus' default lookback delta
DEFAULT_STEP_SECONDS = 60
MAX_GRID_POINTS = 1500
SWEEP_MAX_POINTS = 80  # grid points over baseline and window for the whole-fleet sweep
MAX_SERIES_SHOWN = 12
MAX_SERIES_PER_SERVICE = 3  # in the fleet view, so that one service cannot fill the list
MAX_SERVICES_SHOWN = 10
MAX_SERIES_READ = 50_000
TREND_POINTS = 12
ANOMALY_THRESHOLD = 3.0  # robust-scale units a level must move to count as a shift
ANOMALY_CAP = 1000.0
SUSTAIN_POINTS = 3  # consecutive samples a shift must hold (2 in windows under 12 samples)
SPARSE_BASELINE_POINTS = 8  # fewer baseline samples: said in the line, score scaled down
RELATIVE_SCALE_FLOOR = 0.01  # a flat baseline's noise counts as 1 % of its level
# Names that OpenMetrics reserves for monotonic counters: these are compared as per-second rates.
COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")

_SELECTOR = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(\{.*\})?\s*$", re.DOTALL)
_MATCHER = re.compile(
    r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)', re.DOTALL
)


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op == "=~" else not found

    def render(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op}"{escaped}"'


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[Matcher, ...]

    def render(self) -> str:
        inner = ",".join(m.render() for m in self.matchers)
        return f"{self.name or ''}{{{inner}}}" if inner or not self.name else self.name

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        if self.name and name != self.name:
            return False
        with_name = {**labels, "__name__": name}
        return all(m.matches(with_name) for m in self.matchers)


def selector_parse(text: str) -> Selector | None:
    """Parse ``name``, ``name{l="v",…}`` or ``{l=~"v"}``; None when it is not a plain selector."""
    match = _SELECTOR.match(text)
    if not match or not (match.group(1) or match.group(2)):
        return None
    matchers: list[Matcher] = []
    body = (match.group(2) or "{}")[1:-1].strip()
    position = 0
    while position < len(body):
        item = _MATCHER.match(body, position)
        if not item:
            return None
        value = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), item.group(3))
        if item.group(2) in {"=~", "!~"}:
            try:
                re.compile(value)
            except re.error:
                return None
        matchers.append(Matcher(item.group(1), item.group(2), value))
        position = item.end()
    return Selector(name=match.group(1), matchers=tuple(matchers))


def selector_build(
    *, metric: str | None, service: str | None, labels: dict[str, str]
) -> Selector | None:
    """The selector for these arguments, or None when ``metric`` is a PromQL expression."""
    base = selector_parse(metric) if metric else Selector(name=None, matchers=())
    if base is None:
        return None
    extra = [Matcher("service", "=", service)] if service else []
    extra += [Matcher(k, "=", v) for k, v in sorted(labels.items())]
    existing = {(m.name, m.op) for m in base.matchers}
    merged = list(base.matchers) + [m for m in extra if (m.name, m.op) not in existing]
    return Selector(name=base.name, matchers=tuple(merged))


# --- the time grid ----------------------------------------------------------


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


def is_counter_name(name: str) -> bool:
    return name.endswith(COUNTER_SUFFIXES)


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


def counter_to_rate(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Per-second increase between consecutive grid points, resets counted from zero."""
    rates: list[tuple[float, float]] = []
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t1 <= t0:
            continue
        increase = v1 - v0 if v1 >= v0 else v1
        rates.append((t1, increase / (t1 - t0)))
    return rates


# --- analysis ---------------------------------------------------------------


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


def _robust_scale(values: list[float], median: float) -> float:
    """The spread, never below 1 % of the level (nor zero)."""
    return max(_spread(values, median), RELATIVE_SCALE_FLOOR * abs(median), 1e-9)


def repeat_length(values: list[float]) -> int:
    """Grid points per raw sample: the shortest run of equal values inside the series.

    A sample coarser than the grid is repeated at every grid time of its lookback (a
    5-minute sample fills five 1-minute points); a series that changes at every point
    gives 1. Runs touching either end may be cut, so only inner runs count.
    """
    runs: list[int] = []
    length = 1
    for previous, current in itertools.pairwise(values):
        if current == previous:
            length += 1
        else:
            runs.append(length)
            length = 1
    inner = runs[1:]  # the first run may be cut by the range start; the last is never added
    return min(inner) if inner else 1


def _sustain_length(window_points: int, repeat: int) -> int:
    """Consecutive window points a shift must hold: 3 samples (2 in short windows).

    Counted in samples, not grid points, so one coarse sample repeated over the grid is
    still one sample.
    """
    samples = min(SUSTAIN_POINTS, max(2, window_points // repeat // 4))
    return max(min(samples * repeat, window_points), 1)


def _strongest_run(deviations: list[float], length: int) -> tuple[float, int, int]:
    """(strength, sign, start) of the run of ``length`` points farthest from the baseline.

    A run's strength is its least extreme point, so one spike cannot make a run strong.
    """
    shifted = [deviations[i:] for i in range(length)]
    lows = [min(run) for run in zip(*shifted, strict=False)]
    highs = [max(run) for run in zip(*shifted, strict=False)]
    up_at = max(range(len(lows)), key=lows.__getitem__)
    down_at = min(range(len(highs)), key=highs.__getitem__)
    if lows[up_at] >= -highs[down_at]:
        return lows[up_at], 1, up_at
    return -highs[down_at], -1, down_at


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
        if self._means_agree():
            details.append(f"window mean {self._value(self.window_mean)}")
            if self.baseline_points:
                details.append(
                    f"baseline mean {self._value(self.baseline_mean)} "
                    f"over {self.baseline_points} points"
                )
        return f"{self.identity}: " + ", ".join(parts) + "; " + ", ".join(details)

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
            "window_points": self.window_points,
            "ratio": num_value(self.ratio),
            "new": self.new,
            "change_point": unix_format(self.change_point) if self.change_point else None,
            "shift_end": unix_format(self.shift_end) if self.shift_end else None,
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


def baseline_samples(points: int, repeat: int) -> int:
    """The raw samples behind ``points`` baseline grid points."""
    return math.ceil(points / repeat) if points else 0


def shift_measure(
    *, baseline: list[float], window: list[tuple[float, float]], before: list[tuple[float, float]]
) -> Shift:
    """Robust level shift of ``window`` against ``baseline``.

    The strongest run of consecutive window points away from the baseline median (in
    robust-scale units, its strength the least extreme of its points) locates the shift;
    it is extended both ways while points stay at least half the threshold away. The
    shift's level is the median of those points; score, direction, ratio and change point
    all follow from that one level against the baseline median, so they cannot disagree.
    """
    values = [v for _, v in window]
    median = _median(baseline)
    noise = _spread(baseline, median)
    repeat = repeat_length(baseline + values)
    samples = baseline_samples(len(baseline), repeat)
    if samples < SPARSE_BASELINE_POINTS:
        # A few baseline samples say little about its noise: let the data's own spread count.
        everything = baseline + values
        noise = max(noise, 1.4826 * _median([abs(v - _median(everything)) for v in everything]))
    noisy = noise > 0
    scale = max(noise, RELATIVE_SCALE_FLOOR * abs(median), 1e-9)
    damping = min(1.0, samples / SPARSE_BASELINE_POINTS)
    deviations = [(v - median) / scale for v in values]
    length = _sustain_length(len(values), repeat)
    strength, sign, start = _strongest_run(deviations, length)
    segment = values
    first = 0
    if strength >= ANOMALY_THRESHOLD:
        low, high = start, start + length
        while low > 0 and sign * deviations[low - 1] >= ANOMALY_THRESHOLD / 2:
            low -= 1
        while high < len(values) and sign * deviations[high] >= ANOMALY_THRESHOLD / 2:
            high += 1
        segment = values[low:high]
        first = low
    level = _median(segment)
    # A noise-free baseline (constant, or mostly zero) has no noise to measure against: its
    # floor is 1 % of the larger of the two levels, so a change from a constant scores by
    # how far it moved relative to itself (at most 100, e.g. from zero) rather than without
    # bound; a shift against measured noise can score higher.
    spread = scale if noisy else max(scale, RELATIVE_SCALE_FLOOR * abs(level))
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
    last = first + len(segment) - 1
    ended = window[last][0] if last < len(window) - 1 else None
    return Shift(level, score, "up" if up else "down", onset, len(segment), ended)


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
    if baseline and values:
        shift = shift_measure(baseline=baseline, window=in_window, before=before)
        level, score, direction = shift.level, shift.score, shift.direction
    elif baseline:
        # A series that stopped reporting is worth a look, but ranks below clear excursions.
        score, direction = ANOMALY_THRESHOLD, "down"
    new = bool(values) and (not baseline or (baseline_median == 0 and direction != "flat"))
    ratio = None
    if shift is not None and baseline_median is not None and not new:
        ratio = _ratio(shift.level, baseline_median)
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
        baseline_samples=baseline_samples(len(baseline), repeat_length(baseline + values)),
        window_points=len(values),
        last_seen=usable[-1][0] if usable else None,
        trend=trend,
        trend_step=width,
        trend_start=bs,
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _ranking_key(fact: SeriesFacts) -> tuple[Any, ...]:
    """Strongest shift first; among equal ones the larger relative change, then the earlier
    onset (a change that came first is likelier the cause than one that followed)."""
    return (
        -fact.anomaly_score,
        -fact.relative_change,
        fact.change_point if fact.change_point is not None else math.inf,
        fact.service,
        fact.metric,
        sorted(fact.labels.items()),
    )


@dataclass
class ServiceRank:
    service: str
    series: int = 0
    anomalous: int = 0
    top: SeriesFacts | None = None

    def line(self) -> str:
        top = self.top
        assert top is not None
        return (
            f"service {self.service}: {self.anomalous} of {self.series} series anomalous, "
            f"top {top.metric} {top.direction} anomaly score {num_format(top.anomaly_score)}"
        )

    def summary(self) -> dict[str, Any]:
        top = self.top
        assert top is not None
        return {
            "service": self.service,
            "series": self.series,
            "anomalous": self.anomalous,
            "top_metric": top.metric,
            "top_direction": top.direction,
            "top_score": num_value(top.anomaly_score) or 0.0,
            "line": self.line(),
        }


def _fleet_rank(facts: list[SeriesFacts]) -> list[ServiceRank]:
    """Services with an anomalous series, most anomalous first (facts are ranked already)."""
    ranks: dict[str, ServiceRank] = {}
    for fact in facts:
        rank = ranks.setdefault(fact.service, ServiceRank(fact.service))
        rank.series += 1
        if fact.anomalous:
            rank.anomalous += 1
            if rank.top is None:
                rank.top = fact
    anomalous = [r for r in ranks.values() if r.top is not None]

    def order(rank: ServiceRank) -> tuple[Any, ...]:
        assert rank.top is not None
        return (*_ranking_key(rank.top)[:2], -rank.anomalous, rank.service)

    anomalous.sort(key=order)
    return anomalous


def _shown(facts: list[SeriesFacts], *, per_service: int | None) -> list[SeriesFacts]:
    """The top MAX_SERIES_SHOWN, at most ``per_service`` of one service (so more are seen)."""
    if per_service is None:
        return facts[:MAX_SERIES_SHOWN]
    taken: dict[str, int] = {}
    shown: list[SeriesFacts] = []
    for fact in facts:
        if len(shown) == MAX_SERIES_SHOWN:
            break
        if taken.get(fact.service, 0) < per_service:
            taken[fact.service] = taken.get(fact.service, 0) + 1
            shown.append(fact)
    return shown


def metrics_render(
    *,
    series: Iterable[RawSeries],
    window: QueryWindow,
    grid: Grid,
    description: str,
    notes: Iterable[str] = (),
    fleet: bool = False,
) -> BackendOutput:
    """Rank the series (most anomalous first) into bounded, excerptable lines.

    ``fleet`` (no service asked for): totals over every series of every service, the
    most anomalous services, and the top series with at most MAX_SERIES_PER_SERVICE of
    one service, so one noisy service cannot hide the others.
    """
    # Analysed one at a time: the points of a series are dropped once its facts are known.
    facts = [series_analyse(s, window, grid.step) for s in series]
    facts = [f for f in facts if f.window_points or f.baseline_points]
    facts.sort(key=_ranking_key)
    shown = _shown(facts, per_service=MAX_SERIES_PER_SERVICE if fleet else None)
    omitted = len(facts) - len(shown)
    step = duration_format(timedelta(seconds=grid.step))
    lines = [f"query_metrics {description}", f"{window.describe()}; step {step}"]
    lines.extend(notes)
    summary: dict[str, Any] = {
        "window": window.as_dict(),
        "baseline": window.baseline_dict(),
        "step": step,
        "series": [],
        "omitted": omitted,
    }
    if not facts:
        lines.append("no data: no series matched in this time range")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    if fleet:
        ranked = _fleet_rank(facts)
        services = len({f.service for f in facts})
        anomalous = sum(1 for f in facts if f.anomalous)
        totals = (
            f"fleet totals: {_count(services, 'service')}, {len(facts)} series, "
            f"{anomalous} anomalous (in {_count(len(ranked), 'service')})"
        )
        lines.append(totals)
        top = ranked[:MAX_SERVICES_SHOWN]
        if top:
            lines.append("most anomalous services:")
            lines.extend(r.line() for r in top)
        if len(ranked) > len(top):
            lines.append(f"{len(ranked) - len(top)} more services with anomalous series omitted")
        summary["fleet"] = {
            "services": services,
            "series": len(facts),
            "anomalous": anomalous,
            "anomalous_services": len(ranked),
            "line": totals,
            "services_ranked": [r.summary() for r in top],
            "services_omitted": len(ranked) - len(top),
        }
        lines.append(f"most anomalous series (at most {MAX_SERIES_PER_SERVICE} per service):")
    else:
        lines.append(f"{len(facts)} series matched, most anomalous first:")
    for fact in shown:
        lines.append(fact.line())
        lines.append(fact.trend_line())
        summary["series"].append(fact.summary())
    if omitted:
        lines.append(f"{omitted} more series omitted (lower anomaly scores)")
    return BackendOutput(status="ok", output="\n".join(lines), summary=summary)


# --- file backend -----------------------------------------------------------


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
) -> tuple[Iterator[RawSeries], list[str]]:
    """Read OpenMetrics files in one pass; keep only samples of matching series in range.

    Samples are kept compactly (two float arrays per series) and each series is put on
    the grid only when it is consumed, so a whole fleet fits in memory.
    """
    earliest = grid.start - LOOKBACK_SECONDS
    collected: dict[tuple[str, Labels], tuple[array[float], array[float]]] = {}
    # head text -> the series key, or None when the series does not match the selector
    heads: dict[str, tuple[str, Labels] | None] = {}
    notes: list[str] = []
    too_many = False
    latest = grid.end
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if number % 50_000 == 0:
                    deadline.check()
                if line[:1] == "#":
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
    if too_many:
        notes.append(f"more than {MAX_SERIES_READ} series matched; narrow the selector")

    def evaluated() -> Iterator[RawSeries]:
        for name, label_pairs in sorted(collected):
            times, values = collected.pop((name, label_pairs))
            points = grid_evaluate(list(zip(times, values, strict=True)), grid)
            if points:
                yield RawSeries(name=name, labels=dict(label_pairs), points=points)

    return evaluated(), notes


def rates_apply(series: Iterable[RawSeries]) -> Iterator[RawSeries]:
    for item in series:
        if is_counter_name(item.name):
            yield RawSeries(item.name, item.labels, counter_to_rate(item.points), is_rate=True)
        else:
            yield item


# --- Prometheus backend -----------------------------------------------------


def _auth_headers(token_env: str) -> dict[str, str]:
    if token_env:
        token = os.environ.get(token_env, "")
        if not token:
            raise ToolFailure(
                f"the environment variable {token_env} (the Prometheus token) is empty"
            )
        return {"Authorization": f"Bearer {token}"}
    return {}


def metrics_from_prometheus(
    *,
    base_url: str,
    token_env: str,
    query: str,
    grid: Grid,
    deadline: Deadline,
) -> tuple[list[RawSeries], list[str]]:
    """One ``/api/v1/query_range`` call on the grid; the series as Prometheus evaluated them.

    ``limit`` asks Prometheus (3.x; older versions ignore it) for at most one series more
    than MAX_SERIES_READ, so a fleet-wide selector cannot return the whole TSDB.
    """
    url = base_url.rstrip("/") + "/api/v1/query_range"
    params = {
        "query": query,
        "start": f"{grid.start:.3f}",
        "end": f"{grid.end:.3f}",
        "step": f"{grid.step:g}",
        "limit": str(MAX_SERIES_READ + 1),
        # Prometheus durations take no fractions: whole milliseconds.
        "timeout": f"{max(int(deadline.remaining() * 1000), 100)}ms",
    }
    timeout = max(deadline.remaining(), 0.05)
    try:
        response = httpx.get(url, params=params, headers=_auth_headers(token_env), timeout=timeout)
    except httpx.TimeoutException as exc:
        raise ToolTimeout(
            f"Prometheus at {base_url} did not answer within {deadline.seconds:g}s"
        ) from exc
    except httpx.HTTPError as exc:
        raise ToolFailure(f"cannot reach Prometheus at {base_url}: {exc}") from exc
    try:
        body = response.json()
    except ValueError:
        raise ToolFailure(
            f"Prometheus at {base_url} answered HTTP {response.status_code} without JSON"
        ) from None
    if response.status_code != 200 or body.get("status") != "success":
        detail = body.get("error") if isinstance(body, dict) else None
        raise ToolFailure(
            f"Prometheus rejected the query {query!r} "
            f"(HTTP {response.status_code}): {detail or 'no detail'}"
        )
    data = body.get("data") or {}
    if data.get("resultType") != "matrix":
        raise ToolFailure(
            f"Prometheus returned {data.get('resultType')!r}, expected a range matrix"
        )
    series = []
    for item in data.get("result") or []:
        labels = dict(item.get("metric") or {})
        name = labels.pop("__name__", "") or query
        points = [(float(t), float(v)) for t, v in item.get("values") or []]
        series.append(RawSeries(name=name, labels=labels, points=points))
    series.sort(key=lambda s: (s.name, sorted(s.labels.items())))
    notes = []
    if len(series) > MAX_SERIES_READ:
        series = series[:MAX_SERIES_READ]
        notes.append(f"more than {MAX_SERIES_READ} series matched; narrow the selector")
    return series, notes


# Every series that names its service: the whole fleet, in one query.
FLEET_SELECTOR = Selector(name=None, matchers=(Matcher("service", "!=", ""),))


def metrics_query(
    *,
    service: str | None,
    metric: str | None,
    labels: dict[str, str],
    window: QueryWindow,
    step: timedelta | None,
    deadline: Deadline,
    files: tuple[Path, ...] | None = None,
    prometheus_url: str | None = None,
    prometheus_token_env: str = "",
    clamps: dict[str, dict[str, Any]] | None = None,
) -> BackendOutput:
    """Run query_metrics against files (``files``) or Prometheus (``prometheus_url``).

    Without ``service`` the call ranks across the whole environment (fleet view): with
    no ``metric`` either, every series that has a ``service`` label. Either way it is one
    pass over the files or one range query, whatever the number of services.

    A ``step`` the grid cannot use (longer than the window, or too fine for the range) is
    clamped and recorded in ``clamps``.
    """
    sweep = not service and not metric
    # The whole-environment sweep runs on a coarser grid (unless a step is asked for): its
    # cost is every series of the fleet; a drill-down into one service gets full resolution.
    grid = Grid.for_window(
        window, step, SWEEP_MAX_POINTS if sweep and step is None else MAX_GRID_POINTS
    )
    if step is not None and clamps is not None and grid.step != step.total_seconds():
        clamp_record(
            clamps,
            "step",
            given=duration_format(step),
            used=duration_format(timedelta(seconds=grid.step)),
            why=f"at most the window and at most {MAX_GRID_POINTS} points over the range",
        )
    fleet = not service
    if metric:
        selector = selector_build(metric=metric, service=service, labels=labels)
    else:
        base = FLEET_SELECTOR if fleet else Selector(name=None, matchers=())
        selector = selector_build(metric=base.render(), service=service, labels=labels)
    described = " ".join(f"{k}={v}" for k, v in (("service", service), ("metric", metric)) if v)
    if labels:
        described += " labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    if fleet:
        described = (described + " (all services)").strip()
    notes: list[str] = []
    series: Iterable[RawSeries]
    if prometheus_url:
        if selector is not None:
            fetched, notes = metrics_from_prometheus(
                base_url=prometheus_url,
                token_env=prometheus_token_env,
                query=selector.render(),
                grid=grid,
                deadline=deadline,
            )
            series = rates_apply(fetched)
        else:
            # A PromQL expression is evaluated as written; service/labels filter its result.
            fetched, notes = metrics_from_prometheus(
                base_url=prometheus_url,
                token_env=prometheus_token_env,
                query=metric or "",
                grid=grid,
                deadline=deadline,
            )
            wanted = {**labels, **({"service": service} if service else {})}
            series = [s for s in fetched if all(s.labels.get(k) == v for k, v in wanted.items())]
    else:
        if selector is None:
            raise ToolFailure(
                f"metric {metric!r} is not a metric name or selector such as "
                'hikaricp_connections_active{pool="main"}; PromQL functions need a live Prometheus'
            )
        read, notes = metrics_from_files(
            files=files or (), selector=selector, grid=grid, deadline=deadline
        )
        series = rates_apply(read)
    return metrics_render(
        series=series, window=window, grid=grid, description=described, notes=notes, fleet=fleet
    )
