"""How near its capacity a resource's use came, and what a series measures.

Physical: a resource slows or fails the work it serves only near its capacity. Requests
queue for a CPU as its utilisation nears one, an allocation fails or the collector thrashes
near the memory limit, a disk fails writes when full. Below that, a use that rose is more
work done (a batch job, more traffic), not a fault. The kind of a root cause
(``kinds``) and a service's own evidence (``analysis.Suspect.own_metrics``) both read it
from here, so the ranking and the kind never disagree on what is a fault.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from diagnosis.evidence import families, vocab

if TYPE_CHECKING:
    from .analysis import MetricSignal

# CPU use from which requests queue for it: an M/M/1 server at utilisation 0.8 makes a
# request wait four times its service time (rho / (1 - rho)), and the wait grows without
# bound above; below it, more CPU use is mostly more work done.
SATURATED = 0.8


def metric_family(signal: MetricSignal) -> str:
    """What a series measures (``families.series_family``), with what the reading adds: a
    histogram's counts read as a latency (``analysis.histogram_tails``), and a gauge in
    seconds that no family names is a latency."""
    kind, _ = vocab.metric_kind(signal.metric, signal.labels)
    if kind == "traffic" and signal.kind == "latency":
        return "latency"
    family = families.series_family(signal.metric, signal.labels)
    if not family and kind == "other" and signal.unit == "seconds" and not signal.rate:
        return "latency"
    return family


def finite_number(value: object) -> float | None:
    """A tool summary's figure as a finite float; None for anything else (a flag, a missing
    value, text, an infinity): summaries are data, never trusted."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _level(signal: MetricSignal) -> float | None:
    """Where the series stood in the window: the tools' shift level, else its peak."""
    level = finite_number(signal.window_level)
    return level if level is not None else finite_number(signal.window_max)


def _mode_share(signal: MetricSignal, metrics: list[MetricSignal]) -> float | None:
    """The busy share of a CPU counted per mode (node exporter's ``node_cpu_seconds_total``
    by ``mode``): the modes of one counter add up to the CPUs there are, so its use is one
    minus the idle modes' share of their sum. None where no mode's sibling is observed."""
    if not any(k in signal.labels for k in vocab.MODE_LABELS):
        return None
    siblings = [m for m in metrics if m.metric == signal.metric]
    levels = [(m, _level(m)) for m in siblings]
    total = sum(level for _m, level in levels if level is not None and level > 0)
    idle = sum(
        level
        for m, level in levels
        if level is not None and level > 0 and vocab.is_free_metric(m.metric, m.labels)
    )
    if total <= 0 or len(siblings) < 2 or idle == total:
        return None
    return 1.0 - idle / total


def cpu_share(signal: MetricSignal, metrics: list[MetricSignal]) -> float | None:
    """The share of its capacity a CPU use reached: 1 at its limit or throttled; else its
    level over its range (a share), over its smallest limit series or over the CPUs its
    per-mode counter counts. None where no capacity is observed."""
    name = signal.metric.lower()
    if signal.at_limit or "throttl" in name:
        return 1.0
    share = _mode_share(signal, metrics)
    if share is not None:
        return share
    level = _level(signal)
    if level is None:
        return None
    if vocab.is_ratio_metric(name) or signal.unit in {"percent", "ratio"}:
        base = finite_number(signal.baseline_median) or finite_number(signal.baseline_mean) or 0.0
        return level / (100.0 if max(level, base) > 1.0 else 1.0)
    limits = [
        cap
        for m in metrics
        if m is not signal and vocab.is_limit_metric(m.metric) and metric_family(m) == "cpu"
        if (cap := finite_number(m.window_max)) is not None and cap > 0
    ]
    return level / min(limits) if limits else None


def cpu_saturated(signal: MetricSignal, metrics: list[MetricSignal]) -> bool:
    """CPU use at SATURATED of its capacity or more (``cpu_share``). Unknown capacity: not
    shown to be saturated."""
    share = cpu_share(signal, metrics)
    return share is not None and share >= SATURATED


def near_capacity(signal: MetricSignal, family: str, metrics: list[MetricSignal]) -> bool | None:
    """Whether a memory or disk use came within SATURATED of its capacity, where a limit
    series of the same family and unit is observed (None: no capacity known).

    Physical: memory fails (an allocation, the OOM killer) or slows (a collector's work per
    allocated byte grows as 1 / (1 - occupancy): at 0.8 full it collects five times as often
    as at empty) only near its limit, and a disk fails writes only when full; far from its
    limit a use that grew by half (a small heap holding more requests in flight) is load,
    not a fault, however large its relative change. The use is judged at its peak (an
    allocation fails at the peak, not on average); free capacity by its low point."""
    if not vocab.is_level_metric(signal.metric):
        return None
    caps = [
        cap
        for m in metrics
        if m is not signal
        and vocab.is_limit_metric(m.metric)
        and metric_family(m) == family
        and m.unit == signal.unit
        and (cap := finite_number(m.window_max)) is not None
        and cap > 0
    ]
    if not caps:
        return None
    if vocab.is_free_metric(signal.metric, signal.labels):
        low = finite_number(signal.window_min)
        return low is not None and any(low <= (1.0 - SATURATED) * cap for cap in caps)
    peak = finite_number(signal.window_max)
    return peak is not None and any(peak >= SATURATED * cap for cap in caps)


def spare(signal: MetricSignal, metrics: list[MetricSignal], *, requests_harmed: bool) -> bool:
    """A use of CPU, memory or disk that rose but stayed short of SATURATED of a capacity
    that is observed (``metrics``: the service's series, its limits among them) while the
    service's own requests stayed as fast and as good as before (``requests_harmed``
    False): load.

    Physical and causal: below SATURATED of its capacity a resource serves what is asked
    of it, and a rise that left the service's own requests unharmed did nothing to them,
    so nothing through them to the services that call it: it is more work done (a batch
    job, more traffic), the way work in flight below capacity is
    (``analysis.in_flight_load``), and evidence of no fault. Where the service's own
    requests did slow or fail, the rise may be their mechanism (the wait for a CPU grows
    smoothly with its use; SATURATED is only where it grows steep) and it counts. At its
    limit, throttled, or with no capacity observed it is not spare: an unknown capacity
    proves nothing either way."""
    if requests_harmed:
        return False
    if signal.kind != "resource" or signal.at_limit or not signal.bad_direction:
        return False
    if vocab.is_limit_metric(signal.metric):
        return False
    family = metric_family(signal)
    if family == "cpu":
        share = cpu_share(signal, metrics)
        return share is not None and share < SATURATED
    if family in {"memory", "disk"}:
        return near_capacity(signal, family, metrics) is False
    return False
