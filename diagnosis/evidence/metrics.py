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
- ``baseline_median``, ``baseline_mean``, ``baseline_points``; ``sparse_baseline`` (fewer
  than SPARSE_BASELINE_POINTS baseline points: said in the line, score scaled down);
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
  ANOMALY_CAP, damped for a sparse baseline (0 without baseline);
- ``change_point``: when the shift began (it may lie in the baseline when the window
  starts shifted), ``shift_end``: its last point when it ended inside the window,
  ``sustained_points``: the window points of the shift (0 when flat);
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
from bisect import bisect_right
from collections.abc import Iterable
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
from diagnosis.evidence.formats import openmetrics_line_parse
from diagnosis.evidence.timeutil import duration_format, unix_format

LOOKBACK_SECONDS = 300.0  # Prometheus' default lookback delta
DEFAULT_STEP_SECONDS = 60
MAX_GRID_POINTS = 1500
MAX_SERIES_SHOWN = 12
MAX_SERIES_READ = 2000
TREND_POINTS = 12
ANOMALY_THRESHOLD = 3.0  # robust-scale units a level must move to count as a shift
ANOMALY_CAP = 1000.0
SUSTAIN_POINTS = 3  # consecutive window points a shift must hold (2 in windows under 12 points)
SPARSE_BASELINE_POINTS = 8  # fewer baseline points: said in the line, score scaled down
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
    def for_window(cls, window: QueryWindow, step: timedelta | None) -> Grid:
        span = (window.end - window.baseline_start).total_seconds()
        seconds = step.total_seconds() if step else float(DEFAULT_STEP_SECONDS)
        # A step longer than the window would leave it without points to compare.
        seconds = min(seconds, max((window.end - window.start).total_seconds(), 1.0))
        if span / seconds > MAX_GRID_POINTS:
            # Coarsen to whole minutes so long ranges stay within Prometheus' point limit.
            seconds = math.ceil(span / MAX_GRID_POINTS / 60) * 60
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
    stamps = [t for t, _ in samples]
    points: list[tuple[float, float]] = []
    for t in grid.times():
        index = bisect_right(stamps, t) - 1
        if index >= 0 and stamps[index] >= t - LOOKBACK_SECONDS:
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


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _median(values: list[float]) -> float:
    return _quantile(values, 0.5)


def _robust_scale(values: list[float], median: float) -> float:
    """Spread of ``values`` (MAD or IQR, as a standard deviation), never below 1 % of the level."""
    iqr = _quantile(values, 0.75) - _quantile(values, 0.25)
    mad = _median([abs(v - median) for v in values])
    return max(iqr / 1.349, 1.4826 * mad, RELATIVE_SCALE_FLOOR * abs(median), 1e-9)


def _sustain_length(window_points: int) -> int:
    """How many consecutive window points a shift must hold: 3, or 2 in short windows."""
    return min(SUSTAIN_POINTS, max(2, window_points // 4), window_points)


def _strongest_run(deviations: list[float], length: int) -> tuple[float, int, int]:
    """(strength, sign, start) of the run of ``length`` points farthest from the baseline.

    A run's strength is its least extreme point, so one spike cannot make a run strong.
    """
    best = (-math.inf, 1, 0)
    for sign in (1, -1):
        for start in range(len(deviations) - length + 1):
            strength = min(sign * d for d in deviations[start : start + length])
            if strength > best[0]:
                best = (strength, sign, start)
    return best


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
    window_points: int
    last_seen: float | None
    trend: list[float | None]
    trend_step: float
    trend_start: float

    @property
    def sparse_baseline(self) -> bool:
        return 0 < self.baseline_points < SPARSE_BASELINE_POINTS

    @property
    def anomalous(self) -> bool:
        return self.direction in {"up", "down"}

    @property
    def relative_change(self) -> float:
        """|window level − baseline median| relative to the baseline: orders capped scores."""
        if self.window_level is None or self.baseline_median is None:
            return 0.0
        return abs(self.window_level - self.baseline_median) / max(abs(self.baseline_median), 1e-9)

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
            parts.append(f"sparse baseline ({self.baseline_points} points, score damped)")
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
    for t, v in points:
        if t < start or math.isnan(v):
            continue
        index = min(int((t - start) // width), buckets - 1)
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
    scale = _robust_scale(baseline, median)
    if len(baseline) < SPARSE_BASELINE_POINTS:
        # A few baseline points say little about its noise: let the data's own spread count.
        everything = baseline + values
        scale = max(scale, 1.4826 * _median([abs(v - _median(everything)) for v in everything]))
    damping = min(1.0, len(baseline) / SPARSE_BASELINE_POINTS)
    deviations = [(v - median) / scale for v in values]
    length = _sustain_length(len(values))
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
    # Rounded as shown, so that the shown score and the direction agree at the threshold.
    score = num_value(min(abs(level - median) / scale, ANOMALY_CAP) * damping) or 0.0
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
        window_points=len(values),
        last_seen=usable[-1][0] if usable else None,
        trend=trend,
        trend_step=width,
        trend_start=bs,
    )


def metrics_render(
    *,
    series: list[RawSeries],
    window: QueryWindow,
    grid: Grid,
    description: str,
    notes: Iterable[str] = (),
) -> BackendOutput:
    facts = [series_analyse(s, window, grid.step) for s in series]
    facts = [f for f in facts if f.window_points or f.baseline_points]
    facts.sort(
        key=lambda f: (
            -f.anomaly_score,
            -f.relative_change,
            f.service,
            f.metric,
            sorted(f.labels.items()),
        )
    )
    shown = facts[:MAX_SERIES_SHOWN]
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
    lines.append(f"{len(facts)} series matched, most anomalous first:")
    for fact in shown:
        lines.append(fact.line())
        lines.append(fact.trend_line())
        summary["series"].append(fact.summary())
    if omitted:
        lines.append(f"{omitted} more series omitted (lower anomaly scores)")
    return BackendOutput(status="ok", output="\n".join(lines), summary=summary)


# --- file backend -----------------------------------------------------------


def metrics_from_files(
    *,
    files: Iterable[Path],
    selector: Selector,
    grid: Grid,
    deadline: Deadline,
) -> tuple[list[RawSeries], list[str]]:
    """Read OpenMetrics files as a stream; keep only samples of matching series in range."""
    earliest = grid.start - LOOKBACK_SECONDS
    collected: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
    notes: list[str] = []
    too_many = False
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if number % 20_000 == 0:
                    deadline.check()
                try:
                    sample = openmetrics_line_parse(line)
                except ValueError:
                    continue
                if sample is None or sample.timestamp is None:
                    continue
                if sample.timestamp < earliest or sample.timestamp > grid.end:
                    continue
                labels = dict(sample.labels)
                if not selector.matches(sample.name, labels):
                    continue
                key = (sample.name, sample.labels)
                bucket = collected.get(key)
                if bucket is None:
                    if len(collected) >= MAX_SERIES_READ:
                        too_many = True
                        continue
                    bucket = collected[key] = []
                bucket.append((sample.timestamp, sample.value))
    if too_many:
        notes.append(f"more than {MAX_SERIES_READ} series matched; narrow the selector")
    series = []
    for (name, label_pairs), samples in sorted(collected.items()):
        points = grid_evaluate(samples, grid)
        if not points:
            continue
        series.append(RawSeries(name=name, labels=dict(label_pairs), points=points))
    return series, notes


def rates_apply(series: list[RawSeries]) -> list[RawSeries]:
    out = []
    for item in series:
        if is_counter_name(item.name):
            out.append(
                RawSeries(item.name, item.labels, counter_to_rate(item.points), is_rate=True)
            )
        else:
            out.append(item)
    return out


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
) -> list[RawSeries]:
    """One ``/api/v1/query_range`` call on the grid; the series as Prometheus evaluated them."""
    url = base_url.rstrip("/") + "/api/v1/query_range"
    params = {
        "query": query,
        "start": f"{grid.start:.3f}",
        "end": f"{grid.end:.3f}",
        "step": f"{grid.step:g}",
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
    return series


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

    A ``step`` the grid cannot use (longer than the window, or too fine for the range) is
    clamped and recorded in ``clamps``.
    """
    if not metric and not service:
        raise ToolFailure("give a service, a metric, or both (for example service=payment-service)")
    grid = Grid.for_window(window, step)
    if step is not None and clamps is not None and grid.step != step.total_seconds():
        clamp_record(
            clamps,
            "step",
            given=duration_format(step),
            used=duration_format(timedelta(seconds=grid.step)),
            why=f"at most the window and at most {MAX_GRID_POINTS} points over the range",
        )
    selector = selector_build(metric=metric, service=service, labels=labels)
    described = " ".join(f"{k}={v}" for k, v in (("service", service), ("metric", metric)) if v)
    if labels:
        described += " labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    notes: list[str] = []
    if prometheus_url:
        if selector is not None:
            series = metrics_from_prometheus(
                base_url=prometheus_url,
                token_env=prometheus_token_env,
                query=selector.render(),
                grid=grid,
                deadline=deadline,
            )
            series = rates_apply(series)
        else:
            # A PromQL expression is evaluated as written; service/labels filter its result.
            series = metrics_from_prometheus(
                base_url=prometheus_url,
                token_env=prometheus_token_env,
                query=metric or "",
                grid=grid,
                deadline=deadline,
            )
            wanted = {**labels, **({"service": service} if service else {})}
            series = [s for s in series if all(s.labels.get(k) == v for k, v in wanted.items())]
    else:
        if selector is None:
            raise ToolFailure(
                f"metric {metric!r} is not a metric name or selector such as "
                'hikaricp_connections_active{pool="main"}; PromQL functions need a live Prometheus'
            )
        series, notes = metrics_from_files(
            files=files or (), selector=selector, grid=grid, deadline=deadline
        )
        series = rates_apply(series)
    return metrics_render(
        series=series, window=window, grid=grid, description=described, notes=notes
    )
