"""Reading tool results into signals, and ranking services as root-cause suspects.

Ranking follows the spirit of BARO-style metric RCA: each service is judged
against its own baseline (the tools' robust anomaly score), and then the
cascade is taken into account. A service whose anomaly starts earliest, that
shows a resource signal of its own and logs saying it ran out, outranks the
services whose errors merely report timeouts while calling it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar

from diagnosis.evidence import vocab
from diagnosis.evidence.tools.query_logs.render import template_excess

from . import capacity
from .common import attr, time_parse

# Three robust scales: the tools' own threshold (ANOMALY_THRESHOLD in query_metrics'
# statistics), so a series the tool calls shifted is abnormal here too; under a normal
# baseline fewer than 3 samples in 1,000 lie that far.
ANOMALY_MIN = 3.0
# A log template at three times its usual rate (the same threshold as for metrics; the
# tool has tested already that the rise is beyond its counting noise).
SURGE_MIN = 3.0
# One minute, the finest usual scrape interval: an onset earlier by less is not told apart.
EARLY_MARGIN_S = 60
# Ten robust scales: whatever the baseline's distribution, at most one sample in 100 lies
# that far (Chebyshev), about one of a two-hour baseline; a resource shift that large is
# beyond anything its baseline shows, not load it swings through.
RESOURCE_MIN = 10.0
ONSET_MIN = 10.0  # the same bound: only series beyond their baseline's reach date a start
# A deploy or configuration change counts as the cause of new errors that begin within
# 20 minutes of it: a rollout plus the warm-up that exposes its faults (a hand choice).
CHANGE_LEAD_S = 20 * 60
# A window mean that carries at least this share of its peak deviation is a shift of the
# window, not one stray sample (one sample of a 30-point window carries 1/30 ≈ 0.03; a
# shift over the last 5 of 30 points carries about 0.17). A hand choice between the two.
SUSTAINED_MIN = 0.15
# A shift of at least half again (or a third less) is one an SRE calls real; a robust
# score alone flags a few percent on a flat series (a hand choice, for wording only).
STRONG_FACTOR = 1.5
# Subkinds whose series count work in flight (busy threads, goroutines, connections in use).
IN_FLIGHT_SUBKINDS = frozenset({"threads", "pool"})
_WAITING = re.compile(r"pending|queued|waiting|rejected|timeout")


def in_flight_load(signal: MetricSignal) -> bool:
    """A count of work in flight (threads, goroutines, connections in use) that reached no
    capacity: load, not a resource running out.

    Physical (Little's law): the work in flight is its arrival rate times its time in the
    system, so at the same traffic slower requests alone raise it (a slow callee holds its
    caller's threads and connections longer): what a slowdown shows, wherever it began, not
    a pool running out. A waiting line (``pending``, ``queued``, ``waiting``), refusals or
    acquire timeouts are the exception: work waits or is refused only when every unit is
    busy. No constant: at its limit (``at_limit``) the count is exhaustion whatever it is."""
    return (
        signal.subkind in IN_FLIGHT_SUBKINDS
        and not signal.at_limit
        and not _WAITING.search(signal.metric.lower())
    )


def demand(signal: MetricSignal) -> bool:
    """A count of the requests arriving (a request rate, a histogram's ``_count`` or
    ``_bucket``): an input of the service, not a fault of its own.

    Causal: how many requests reach a service is decided by its callers and their users,
    not by the service; more of them (a surge, a retry storm) or fewer (callers failing
    before they call) harm it only through what they do to it: a resource they saturate,
    the latency or errors they produce, each of which is its own evidence and scores as
    such. A request rate that moved while the service's latency, errors and resources did
    not is the service doing its job under another load. So it gives no own-shift points
    and dates no onset, as work in flight below capacity does not (``in_flight_load``).
    No constant."""
    return signal.kind == "traffic"


@dataclass
class Call:
    """One tool call and its result, normalised from a ToolResult-like object."""

    tool_name: str
    arguments: dict[str, Any]
    invocation_id: int | None
    trace_ref: str
    status: str
    output: str
    summary: dict[str, Any]

    @classmethod
    def from_result(cls, tool_name: str, arguments: dict[str, Any], result: Any) -> Call:
        summary = attr(result, "summary", None)
        invocation_id = attr(result, "invocation_id", None)
        try:
            invocation_id = int(invocation_id) if invocation_id is not None else None
        except (TypeError, ValueError):
            invocation_id = None
        return cls(
            tool_name=str(attr(result, "tool_name", None) or tool_name),
            arguments=dict(arguments),
            invocation_id=invocation_id,
            trace_ref=str(attr(result, "trace_ref", "") or ""),
            status=str(attr(result, "status", "error") or "error"),
            output=str(attr(result, "output", "") or ""),
            summary=summary if isinstance(summary, dict) else {},
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.trace_ref)

    def contains(self, text: str) -> bool:
        return bool(text) and text in self.output


@dataclass
class MetricSignal:
    call: Call
    service: str
    metric: str
    labels: dict[str, str]
    line: str
    baseline_mean: Any
    window_max: Any
    window_max_at: str
    window_min: Any
    window_mean: Any
    change_point: str
    direction: str
    anomaly: float
    ratio: float | None
    kind: str
    subkind: str
    at_limit: bool = False
    limit_value: Any = None
    # the tools' robust statistic, when they report it (metrics.py: shift_measure)
    baseline_median: Any = None
    window_level: Any = None
    sustained_points: int | None = None
    sparse_baseline: bool = False
    # the shift's own extreme from its onset on (statistics.shift_peak), when reported
    shift_peak: Any = None
    shift_peak_at: str = ""
    unit: str = ""  # the unit the tool read from the name or a unit label (seconds, bytes)
    rate: bool = False  # shown as a per-second rate of a counter
    # how finely its onset is known, in seconds (``resolution_seconds``)
    resolution_s: float = 60.0
    # seconds before its onset that no sample covered: the change may lie that much earlier
    onset_unseen_s: float = 0.0
    # a resource use short of its observed capacity on a service whose own requests
    # stayed unharmed (``capacity.spare``): load
    spare: bool = False

    @property
    def abnormal(self) -> bool:
        return self.direction in {"up", "down"} and self.anomaly >= ANOMALY_MIN and self.sustained

    @property
    def sustained(self) -> bool:
        """A shift of the window's mean, not one stray sample (robust scores love those)."""
        if self.sustained_points is not None:
            return self.sustained_points >= 2
        mean, base = _float(self.window_mean), _float(self.baseline_mean)
        extreme = _float(self.window_min if self.direction == "down" else self.window_max)
        if mean is None or base is None or extreme is None or extreme == base:
            return True
        return (mean - base) / (extreme - base) >= SUSTAINED_MIN

    @property
    def factor(self) -> float:
        """How many times the window mean differs from the baseline mean (>= 1; inf from zero)."""
        ratio = self.ratio
        if ratio is None:
            mean, base = _float(self.window_mean), _float(self.baseline_mean)
            if mean is None or base is None:
                return 1.0
            if base == 0:
                return math.inf if mean != 0 else 1.0
            ratio = mean / base
        ratio = abs(ratio)
        if ratio == 0:
            return math.inf
        return max(ratio, 1 / ratio)

    @property
    def strong(self) -> bool:
        """Abnormal and a real shift, not a few percent a robust score happens to flag."""
        return self.at_limit or (self.abnormal and self.factor >= STRONG_FACTOR)

    @property
    def harm_direction(self) -> str:
        """The direction in which this series shows harm, where what it measures fixes one:
        up for failures and latency, down for a health share (availability, success rate),
        up for the network's failures, losses and delays (retransmits, drops, resets: the
        series ``families.series_family`` reads as ``network``); "" for the rest (resources
        read by ``bad_direction``, traffic, other measures).

        Definitional: more failed requests or slower answers are a service doing worse, a
        success share falls only as failures rise, and every retransmit or drop is a failure
        of the service's network path; so their other direction is the service doing
        better, or starting to serve (a share from no traffic, 0 %, to 100 %)."""
        if self.kind == "errors":
            return "down" if self.subkind == "health" else "up"
        if self.kind == "latency" or capacity.metric_family(self) == "network":
            return "up"
        return ""

    @property
    def eases(self) -> bool:
        """An abnormal shift against its ``harm_direction``: fewer failures, more success, faster
        answers. A change, but no fault: never evidence that the service is a cause, nor of
        what kind of fault it has."""
        harm = self.harm_direction
        return bool(harm) and self.abnormal and self.direction != harm

    @property
    def bad_direction(self) -> bool:
        """For resources: usage up, or free/idle capacity down."""
        if vocab.is_free_metric(self.metric, self.labels):
            return self.direction == "down"
        return self.direction == "up"

    @property
    def onset(self) -> datetime | None:
        return time_parse(self.change_point) or time_parse(self.window_max_at)


@dataclass
class LogSignal:
    call: Call
    service: str
    template: str
    level: str
    count_window: int
    count_baseline: int
    first_seen: str
    last_seen: str
    is_new: bool
    surge: float
    line: str
    samples: list[str]
    kind: str
    subkind: str
    mentions: list[str]
    injected: bool

    @property
    def severe(self) -> bool:
        level = self.level.upper()
        return level in vocab.ERROR_LEVELS or level in vocab.WARN_LEVELS

    @property
    def abnormal(self) -> bool:
        if self.count_window <= 0 or self.injected:
            return False
        return self.is_new or self.surge >= SURGE_MIN

    @property
    def onset(self) -> datetime | None:
        return time_parse(self.first_seen)

    @cached_property
    def excess(self) -> float | None:
        """How many standard deviations its window count lies above what its baseline rate
        gives (the log tool's own test, ``template_excess``), over the call's window and
        baseline; None where the call does not say them."""
        share = _window_share(self.call.summary)
        if share is None:
            return None
        return template_excess(
            count_window=self.count_window,
            count_baseline=self.count_baseline,
            window_share=share,
        )


def _window_share(summary: dict[str, Any]) -> float | None:
    """The window's part of the time a log call counted over (window and baseline)."""
    spans = []
    for part in (summary.get("window"), summary.get("baseline")):
        start, end = time_parse(attr(part, "start")), time_parse(attr(part, "end"))
        spans.append((end - start).total_seconds() if start and end else 0.0)
    window, baseline = spans
    return window / (window + baseline) if window > 0 and baseline > 0 else None


@dataclass
class Suspect:
    service: str
    metrics: list[MetricSignal] = field(default_factory=list)
    logs: list[LogSignal] = field(default_factory=list)
    blamed_by: list[str] = field(default_factory=list)
    downstream_of: list[str] = field(default_factory=list)
    has_data: bool = False
    score: float = 0.0
    earliest: bool = False
    victim: bool = False
    kind: str = "other"
    subkind: str = ""
    # set by localisation along the calls (localise.py)
    inherited_from: list[str] = field(default_factory=list)
    explains: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    graph_score: float = 0.0
    # its callees looked at and found without any data, where its symptoms are of a kind a
    # callee can pass on (localise.unobserved_callees): its fault may lie past them
    unobserved_callees: list[str] = field(default_factory=list)
    # callees its client-side latency to rose while their own side stayed flat
    # (localise.client_gaps): the network between them or its client pool, not those callees
    client_gaps: list[str] = field(default_factory=list)
    # set by kinds.kinds_decide: the fault kind its own evidence shows, the series or log
    # template that decided it, and the kind that evidence cannot tell it from ("": none)
    fault_kind: str = ""
    fault_evidence: MetricSignal | LogSignal | None = None
    fault_alternative: str = ""
    fault_alternative_evidence: MetricSignal | LogSignal | None = None
    fault_ambiguity: str = ""  # kinds.Ambiguity's value: why the two cannot be told apart
    mistimed: bool = False  # its own symptoms began at another time than the trouble asked about
    # with no call known: the leading candidate, when its slowdown or failures began before
    # every shift of this one's (localise.without_calls): this one may be its effect
    follows: list[str] = field(default_factory=list)

    @property
    def root_kind(self) -> str:
        """The kind in the answer's vocabulary (docs/scenario-pack.md §2, ``root_cause_kind``):
        what its own evidence shows; else, for a service blamed or seen only through others,
        a dependency; else none ("": no own shift says what kind of fault it is)."""
        if self.fault_kind:
            return self.fault_kind
        if self.kind in {"dependency", "dependency_target"}:
            return "dependency"
        return ""

    @property
    def abnormal_metrics(self) -> list[MetricSignal]:
        return sorted(
            (m for m in self.metrics if m.abnormal),
            key=lambda m: (-m.anomaly, m.metric, m.line),
        )

    @property
    def own_metrics(self) -> list[MetricSignal]:
        """Its abnormal series but those that eased (``MetricSignal.eases``) and the resource
        uses that stayed short of their capacity (``MetricSignal.spare``): the shifts that
        can make it a suspect and say what kind of fault it has."""
        return [m for m in self.abnormal_metrics if not m.eases and not m.spare]

    @property
    def requests_harmed(self) -> bool:
        """Its own requests slowed or failed: a latency or failure series of its own shifted
        the way that hurts, or a severe log template of its own surged."""
        return bool(self.abnormal_logs) or any(
            m.abnormal and m.kind in {"latency", "errors"} and m.direction == m.harm_direction
            for m in self.metrics
        )

    @property
    def abnormal_logs(self) -> list[LogSignal]:
        return sorted(
            (lg for lg in self.logs if lg.abnormal and lg.severe),
            key=lambda lg: (_log_rank(lg), lg.template),
        )

    @property
    def resource_metrics(self) -> list[MetricSignal]:
        strong = [
            m
            for m in self.own_metrics
            if m.kind in {"resource", "restart"}
            and (m.bad_direction or m.kind == "restart")
            and (m.anomaly >= RESOURCE_MIN or m.at_limit)
            # busy CPU is load, not exhaustion, unless it hit its limit or got throttled
            and (m.subkind != "cpu" or m.at_limit or "throttl" in m.metric.lower())
            and not in_flight_load(m)
        ]
        return strong + [m for m in self.metrics if m.at_limit and m not in strong]

    @property
    def changes(self) -> list[tuple[datetime | None, MetricSignal | LogSignal]]:
        """Deploys and configuration changes seen in the window, earliest first."""
        found: list[tuple[datetime | None, MetricSignal | LogSignal]] = []
        for lg in self.logs:
            if lg.kind == "change" and lg.count_window > 0 and lg.is_new and not lg.injected:
                found.append((lg.onset, lg))
        for m in self.metrics:
            if m.kind == "change" and m.line and (m.baseline_mean is None or m.abnormal):
                found.append((m.onset, m))
        return sorted(found, key=lambda item: (item[0] is None, item[0] or _EPOCH, _key(item[1])))

    @property
    def error_onset(self) -> datetime | None:
        times = [lg.onset for lg in self.abnormal_logs if lg.onset and lg.kind != "change"]
        return min(times) if times else None

    @property
    def change_before_errors(self) -> tuple[datetime | None, MetricSignal | LogSignal] | None:
        """The latest change that shortly precedes this service's new errors."""
        errors_at = self.error_onset
        if errors_at is None:
            return None
        fitting = [
            (at, sig)
            for at, sig in self.changes
            if at is not None and 0 <= (errors_at - at).total_seconds() + 60 <= CHANGE_LEAD_S
        ]
        if fitting:
            return fitting[-1]
        undated = [(at, sig) for at, sig in self.changes if at is None]
        return undated[0] if undated else None

    @property
    def resource_logs(self) -> list[LogSignal]:
        return [lg for lg in self.abnormal_logs if lg.kind == "resource"]

    @property
    def onset(self) -> datetime | None:
        times = [
            m.onset
            for m in self.own_metrics
            if m.onset and m.anomaly >= ONSET_MIN and not in_flight_load(m) and not demand(m)
        ]
        times += [lg.onset for lg in self.abnormal_logs if lg.onset]
        return min(times) if times else None

    @property
    def anomalous(self) -> bool:
        return bool(self.own_metrics or self.abnormal_logs)

    @property
    def notable(self) -> bool:
        """Worth an SRE's attention: more than a small drift of a few series."""
        return bool(
            any(m.strong and not m.eases for m in self.metrics)
            or self.abnormal_logs
            or self.resource_metrics
            or self.blamed_by
            or self.downstream_of
            or self.changes
        )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_END = datetime(9999, 1, 1, tzinfo=UTC)  # an undated onset sorts after every dated one


def _key(signal: MetricSignal | LogSignal) -> str:
    return signal.line or getattr(signal, "template", "") or getattr(signal, "metric", "")


def _log_rank(lg: LogSignal) -> tuple[int, float, int]:
    order = {"resource": 0, "change": 1, "code": 2, "other": 3, "dependency": 4}
    level = 0 if lg.level.upper() in vocab.ERROR_LEVELS else 1
    return (
        order.get(lg.kind, 5) * 2 + level,
        -lg.surge if not lg.is_new else -1e9,
        -lg.count_window,
    )


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int:
    number = _float(value)
    return int(number) if number is not None else 0


def step_seconds(summary: dict[str, Any]) -> float | None:
    """The query grid's step the tool reports (``"60s"``, ``"5m"``)."""
    step = summary.get("step")
    if not isinstance(step, str):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", step.strip())
    if not match:
        return None
    return float(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def sample_interval(step: float, item: dict[str, Any]) -> float | None:
    """How far apart a series' raw samples lie, when they are coarser than the query grid
    (the tool counts the baseline's grid points and the raw samples behind them)."""
    points, samples = item.get("baseline_points"), item.get("baseline_samples")
    if not isinstance(points, int) or not isinstance(samples, int) or samples <= 1:
        return None
    return step * math.ceil(points / samples) if points > samples else None


def resolution_seconds(step: float | None, item: dict[str, Any]) -> float:
    """How finely a series dates its change: one grid step when its samples are no
    coarser than the grid, else one sample interval plus one step; and the time before
    the onset that no sample covered, when there was such a gap.

    A change shows at the first sample that carries it, and the grid moves that sample
    to the next grid point: the date is late by less than one sample interval (early by
    as much when a sample is stamped at the start of the period it sums up) plus less
    than one step. Nothing finer can be told apart. Samples missing right before the
    onset (a dropped sample, a missed scrape: ``onset_unseen_s``) leave the change
    anywhere in that gap too: the resolution is the real spacing of the samples around
    the onset, not the nominal one.
    """
    grid = step if step is not None and step > 0 else 60.0
    interval = sample_interval(grid, item)
    unseen = max(_float(item.get("onset_unseen_s")) or 0.0, 0.0)
    return (grid if interval is None else interval + grid) + unseen


def metric_signals(call: Call) -> list[MetricSignal]:
    if not call.ok:
        return []
    signals = []
    step = step_seconds(call.summary)
    for item in call.summary.get("series") or []:
        if not isinstance(item, dict):
            continue
        line = str(item.get("line") or "")
        metric = str(item.get("metric") or "")
        raw_labels = item.get("labels")
        labels = (
            {str(k): str(v) for k, v in (raw_labels or {}).items()}
            if isinstance(raw_labels, dict)
            else {}
        )
        kind, subkind = vocab.metric_kind(metric, labels)
        service = str(item.get("service") or call.arguments.get("service") or "")
        signals.append(
            MetricSignal(
                call=call,
                service=service,
                metric=metric,
                labels=labels,
                line=line if call.contains(line) else "",
                baseline_mean=item.get("baseline_mean"),
                window_max=item.get("window_max"),
                window_max_at=str(item.get("window_max_at") or ""),
                window_min=item.get("window_min"),
                window_mean=item.get("window_mean"),
                baseline_median=item.get("baseline_median"),
                window_level=item.get("window_level"),
                sustained_points=(
                    _int(item["sustained_points"]) if "sustained_points" in item else None
                ),
                sparse_baseline=bool(item.get("sparse_baseline")),
                shift_peak=item.get("shift_peak"),
                shift_peak_at=str(item.get("shift_peak_at") or ""),
                unit=str(item.get("unit") or ""),
                rate=bool(item.get("rate")),
                resolution_s=resolution_seconds(step, item),
                onset_unseen_s=max(_float(item.get("onset_unseen_s")) or 0.0, 0.0),
                change_point=str(item.get("change_point") or ""),
                direction=str(item.get("direction") or "flat"),
                anomaly=abs(_float(item.get("anomaly_score")) or 0.0),
                ratio=_float(item.get("ratio")),
                kind=kind,
                subkind=subkind,
            )
        )
    return histogram_means(signals)


# The share of requests a latency histogram's tail is read above: the baseline's p90 or so,
# the usual latency objective's quantile, where a slowdown shows first and the tail is still
# large enough (a tenth of the requests) to be counted on every scrape.
TAIL_QUANTILE = 0.9


def _labels_but_le(signal: MetricSignal) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in signal.labels.items() if k != "le"))


def _bound(signal: MetricSignal) -> float | None:
    le = _float(signal.labels.get("le"))
    return le if le is not None and math.isfinite(le) else None


def histogram_tails(signals: list[MetricSignal]) -> list[MetricSignal]:
    """A latency histogram's tail share, ``1 - bucket(le) / count``, read as latency where its
    ``_sum`` was read in no answer of the session (a histogram exported without it).

    Definitional: ``_bucket{le}`` counts the requests that took at most ``le`` and ``_count``
    every request, so their quotient is the share done within ``le`` and its complement the
    share slower than ``le``: a latency quantity, whatever the traffic (a surge at the same
    latency raises both alike and leaves it where it was). The bucket read is the lowest
    finite one at or above the baseline's ``TAIL_QUANTILE`` (the tail beyond it held at most
    a tenth of the requests): the latency objective's own bound, the first to be crossed
    when requests slow (``_tail_rank``: else the highest one read). Its significance is the
    bucket's score times the share of the bucket's log-shift the count's does not account
    for (as ``histogram_means`` does for the ``_sum``). The signal keeps the bucket's metric,
    labels and line, the evidence it is read from; its figures are shares (0..1).
    """
    families = {
        (m.service, vocab.histogram_part(m.metric)[0], _labels_but_le(m))
        for m in signals
        if vocab.histogram_part(m.metric)[1] == "_sum" and m.kind == "latency"
    }
    counts = {
        (m.service, vocab.histogram_part(m.metric)[0], _labels_but_le(m)): m
        for m in signals
        if m.subkind == vocab.HISTOGRAM_COUNT
    }
    chosen: dict[tuple[str, str, tuple[tuple[str, str], ...]], MetricSignal] = {}
    for signal in signals:
        key = (signal.service, vocab.histogram_part(signal.metric)[0], _labels_but_le(signal))
        count = counts.get(key)
        if signal.subkind != vocab.HISTOGRAM_BUCKET or key in families or count is None:
            continue
        share, bound = _quotient(_base(signal), _base(count)), _bound(signal)
        if share is None or bound is None:
            continue
        held = chosen.get(key)
        if held is None or _tail_rank(signal, count) < _tail_rank(held, count):
            chosen[key] = signal
    tails = {id(bucket): (bucket, counts[key]) for key, bucket in chosen.items()}
    return [_tail_of(*tails[id(m)]) if id(m) in tails else m for m in signals]


def _tail_rank(bucket: MetricSignal, count: MetricSignal) -> tuple[bool, float]:
    """The bucket to read the tail above: the lowest at or above ``TAIL_QUANTILE`` of the
    baseline's requests; where the answer holds none that high, the highest it holds (the
    nearest to the tail: any bucket's complement is still the share slower than its bound)."""
    share, bound = _quotient(_base(bucket), _base(count)) or 0.0, _bound(bucket) or 0.0
    return (share < TAIL_QUANTILE, bound if share >= TAIL_QUANTILE else -bound)


def _base(signal: MetricSignal) -> Any:
    return signal.baseline_median if signal.baseline_median is not None else signal.baseline_mean


def _tail_of(bucket: MetricSignal, count: MetricSignal) -> MetricSignal:
    def tail(part: Any, whole: Any) -> float | None:
        share = _quotient(part, whole)
        return None if share is None else min(max(1.0 - share, 0.0), 1.0)

    base = tail(_base(bucket), _base(count))
    level = tail(bucket.window_level, count.window_level)
    base_mean = tail(bucket.baseline_mean, count.baseline_mean)
    mean = tail(bucket.window_mean, count.window_mean)
    pair = (base, level) if base is not None and level is not None else (base_mean, mean)
    floor = RESOLVABLE_SHARE
    ratio = (
        max(pair[1], floor) / max(pair[0], floor)
        if pair[0] is not None and pair[1] is not None
        else None
    )
    anomaly = bucket.anomaly
    if count.abnormal and bucket.ratio and bucket.ratio > 0 and count.ratio and count.ratio > 0:
        shift = abs(math.log(bucket.ratio))
        left = abs(math.log(bucket.ratio / count.ratio))
        anomaly = bucket.anomaly * min(left / shift, 1.0) if shift > 0 else 0.0
    direction = "flat"
    if ratio is not None and anomaly >= ANOMALY_MIN:
        direction = "up" if ratio > 1 else "down" if ratio < 1 else "flat"
    usual = _float(count.window_level) or _float(count.window_mean)
    return replace(
        bucket,
        kind="latency",
        subkind="",
        baseline_median=base,
        baseline_mean=base_mean,
        window_level=level,
        window_mean=mean,
        window_max=tail(bucket.window_min, usual),
        window_min=tail(bucket.window_max, usual),
        shift_peak=tail(bucket.shift_peak, usual),
        ratio=ratio,
        anomaly=anomaly,
        direction=direction,
        unit="",
    )


# A share is resolved to a thousandth of its whole (the tools print three digits): a tail
# share of 0 is read as 0.001, so a tail from nothing has a finite, largest-resolvable rise.
RESOLVABLE_SHARE = 1e-3


def histogram_means(signals: list[MetricSignal]) -> list[MetricSignal]:
    """A latency histogram's ``_sum`` read as the mean latency, where its ``_count`` (same
    service and labels) is in the same answer.

    Definitional: the ``_sum``'s rate is seconds of work per second, the ``_count``'s the
    requests per second, and their quotient the mean duration of a request. Each of the
    ``_sum``'s figures (baseline median and mean, level, mean, peak) is divided by the
    ``_count``'s, so a surge of traffic at an unchanged latency, which doubles both, is no
    latency rise, and a latency shift is in seconds, comparable along the calls whatever
    each service's traffic. The quotient's shift is the ``_sum``'s less the ``_count``'s on
    a log scale; its significance is the ``_sum``'s score times the share of the ``_sum``'s
    log-shift left after the traffic's (the part of its departure from baseline that the
    traffic does not account for); with a steady ``_count`` that is the ``_sum``'s own.
    The signal keeps the ``_sum``'s line, the evidence it is read from.
    """
    counts = {
        (m.service, vocab.histogram_part(m.metric)[0], tuple(sorted(m.labels.items()))): m
        for m in signals
        if m.subkind == vocab.HISTOGRAM_COUNT
    }
    out = []
    for signal in signals:
        family, suffix = vocab.histogram_part(signal.metric)
        count = counts.get((signal.service, family, tuple(sorted(signal.labels.items()))))
        if suffix != "_sum" or signal.kind != "latency" or count is None:
            out.append(signal)
            continue
        out.append(_mean_of(signal, count))
    return out


def _quotient(a: Any, b: Any) -> float | None:
    x, y = _float(a), _float(b)
    return x / y if x is not None and y is not None and y > 0 else None


def _mean_of(total: MetricSignal, count: MetricSignal) -> MetricSignal:
    base = _quotient(total.baseline_median, count.baseline_median)
    level = _quotient(total.window_level, count.window_level)
    base_mean = _quotient(total.baseline_mean, count.baseline_mean)
    mean = _quotient(total.window_mean, count.window_mean)
    pair = (base, level) if base and level else (base_mean, mean)
    ratio = pair[1] / pair[0] if pair[0] and pair[1] is not None else None
    anomaly, direction = total.anomaly, total.direction
    if count.abnormal and ratio is not None:
        shift = abs(math.log(total.ratio)) if total.ratio and total.ratio > 0 else 0.0
        left = abs(math.log(ratio)) if ratio > 0 else shift
        anomaly = total.anomaly * min(left / shift, 1.0) if shift > 0 else 0.0
        direction = "up" if ratio > 1 else "down" if ratio < 1 else "flat"
    usual = _float(count.window_level) or _float(count.window_mean)
    return replace(
        total,
        baseline_median=base,
        baseline_mean=base_mean,
        window_level=level,
        window_mean=mean,
        window_max=_quotient(total.window_max, usual),
        window_min=_quotient(total.window_min, usual),
        shift_peak=_quotient(total.shift_peak, usual),
        ratio=ratio,
        anomaly=anomaly,
        direction=direction,  # still read from counters' rates (``_later_rate``)
    )


def _tokens(metric: str) -> set[str]:
    return set(vocab.name_words(metric))


def _mark_limits(signals: list[MetricSignal]) -> None:
    """Usage that reached its limit series in the window (and not in the baseline).

    Free/idle capacity that fell to about nothing counts too, and so does a
    ratio near 1 (or a percentage near 100). Each usage series is compared with
    the limit series most like it: same instance labels, most shared name words.
    """
    limits = [s for s in signals if s.kind == "resource" and vocab.is_limit_metric(s.metric)]
    for signal in signals:
        if signal.kind != "resource" or vocab.is_limit_metric(signal.metric):
            continue
        if not vocab.is_level_metric(signal.metric):
            continue  # rates, counters and waiting queues have no capacity to reach
        peak = _float(signal.window_max)
        base = _float(signal.baseline_mean)
        if peak is None:
            continue
        if vocab.is_free_metric(signal.metric, signal.labels):
            low = _float(signal.window_min)
            if low is not None and base and base > 0 and low <= 0.05 * base:
                signal.at_limit = True
            continue
        candidates = [lim for lim in limits if lim.subkind == signal.subkind]
        if candidates:
            best = max(
                candidates,
                key=lambda lim: (
                    sum(1 for k, v in lim.labels.items() if signal.labels.get(k) == v),
                    len(_tokens(lim.metric) & _tokens(signal.metric)),
                    lim.line,
                ),
            )
            cap = _float(best.window_max)
            if cap is None or cap <= 0:
                continue
            reached = 0.95 * cap <= peak <= 1.05 * cap
            if reached and (base is None or base < 0.9 * cap):
                signal.at_limit = True
                signal.limit_value = best.window_max
        elif vocab.is_ratio_metric(signal.metric):
            if (0.95 <= peak <= 1.0 and (base is None or base < 0.9)) or (
                95 <= peak <= 100 and (base is None or base < 90)
            ):
                signal.at_limit = True


SERVICE_LIKE = re.compile(
    r"(?<![\w.-])([a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:service|svc|api|server|gateway|worker|db))(?![\w-])"
)


def mentioned_services(text: str, known: list[str], own: str) -> list[str]:
    lowered = (text or "").lower()
    found = []
    for name in known:
        if name and name.lower() != own.lower():
            if re.search(rf"(?<![\w.-]){re.escape(name.lower())}(?![\w-])", lowered):
                found.append(name)
    for match in SERVICE_LIKE.finditer(lowered):
        token = match.group(1)
        if token != own.lower() and token not in {k.lower() for k in found}:
            found.append(token)
    return sorted(set(found))


def log_signals(call: Call, known: list[str]) -> list[LogSignal]:
    if not call.ok:
        return []
    signals = []
    for item in call.summary.get("templates") or []:
        if not isinstance(item, dict):
            continue
        template = str(item.get("template") or "")
        service = str(item.get("service") or call.arguments.get("service") or "")
        samples = [str(s) for s in item.get("samples") or [] if isinstance(s, str)]
        samples = [s for s in samples if call.contains(s)]
        line = str(item.get("line") or "")
        text = " ".join([template, *samples])
        mentions = mentioned_services(text, known, service)
        kind, subkind = vocab.log_kind(text, bool(mentions))
        surge = _float(item.get("surge_ratio"))
        level = str(item.get("level") or "")
        if level.upper() not in {*vocab.ERROR_LEVELS, *vocab.WARN_LEVELS}:
            level = vocab.level_in_text(template) or level
        signals.append(
            LogSignal(
                call=call,
                service=service,
                template=template,
                level=level,
                count_window=_int(item.get("count_window")),
                count_baseline=_int(item.get("count_baseline")),
                first_seen=str(item.get("first_seen") or ""),
                last_seen=str(item.get("last_seen") or ""),
                is_new=bool(item.get("is_new")),
                surge=surge if surge is not None else 0.0,
                line=line if call.contains(line) else "",
                samples=samples,
                kind=kind,
                subkind=subkind,
                mentions=mentions,
                injected=vocab.looks_like_instruction(text),
            )
        )
    return signals


_Signal = TypeVar("_Signal")


def _first_per_key(
    signals: Iterable[_Signal], key: Callable[[_Signal], Hashable], seen: set[Hashable]
) -> Iterator[_Signal]:
    """Each signal whose key no earlier one had (``seen`` keeps the keys across calls)."""
    for signal in signals:
        marker = key(signal)
        if marker not in seen:
            seen.add(marker)
            yield signal


def _metric_key(signal: MetricSignal) -> Hashable:
    return (signal.service, f"{signal.metric}{sorted(signal.labels.items())}")


def _later_rate(new: MetricSignal, held: MetricSignal) -> bool:
    """Whether a counter's rate read again, on another grid, takes the place of the reading
    held: of two readings of one counter that date its change differently, the later date.

    Statistical: the fleet view reads every series on a coarser grid than a service's own
    query (2 minutes against 1 on a 30-minute window); each grid's points carry their own
    noise, and a noisy point right before a shift is taken into it, so a change point errs
    early far more than late (a shift is not dated before its first shifted point). Where
    two readings of the same samples disagree, the shift had begun by the later date on
    both: a caller dated a step early on one grid would otherwise look earlier than the
    callee it waits on, which causally cannot explain it. A gauge keeps its first reading
    (its coarse grid samples it, nothing is averaged or re-dated).
    """
    if not (new.rate and held.rate):
        return False
    mine, theirs = new.onset, held.onset
    return mine is not None and theirs is not None and mine > theirs


def _log_key(signal: LogSignal) -> Hashable:
    return (signal.service, signal.template, signal.level)


def suspects_rank(
    calls: list[Call], known: list[str], focus: list[str] | None = None
) -> list[Suspect]:
    """Every service seen, scored and sorted most-suspect first."""
    suspects: dict[str, Suspect] = {}

    def suspect(name: str) -> Suspect:
        return suspects.setdefault(name, Suspect(service=name))

    # one series (or log template), one set of figures per session: the first call that
    # read it (for a counter's rate, the one that dates its change later: ``_later_rate``)
    # gives its ratio, baseline, peak and onset to every section that states them
    readings: dict[Hashable, MetricSignal] = {}
    seen_logs: set[Hashable] = set()
    for call in calls:
        service_arg = str(call.arguments.get("service") or "")
        if call.tool_name == "query_metrics":
            for signal in metric_signals(call):
                held = readings.get(_metric_key(signal))
                if held is None or _later_rate(signal, held):
                    readings[_metric_key(signal)] = signal
            listed = call.summary.get("series")
        elif call.tool_name == "query_logs":
            found = log_signals(call, sorted({*known, *suspects}))
            for log_signal in _first_per_key(found, _log_key, seen_logs):
                if log_signal.service:
                    entry = suspect(log_signal.service)
                    entry.logs.append(log_signal)
                    entry.has_data = True
            listed = call.summary.get("templates")
        else:
            continue
        if service_arg and call.ok and listed:
            suspect(service_arg).has_data = True
    # a histogram's buckets and its count may come from different answers (the fleet view
    # shows the buckets that moved, a service's own answer its count): read across them
    for signal in histogram_tails(list(readings.values())):
        if signal.service:
            entry = suspect(signal.service)
            entry.metrics.append(signal)
            entry.has_data = True

    # Dependency edges: A's error logs name B while reporting a failed call.
    for entry in list(suspects.values()):
        for lg in entry.abnormal_logs:
            if lg.kind == "dependency":
                for target in lg.mentions:
                    blamed = suspect(target)
                    if entry.service not in blamed.blamed_by:
                        blamed.blamed_by.append(entry.service)

    for entry in suspects.values():
        _mark_limits(entry.metrics)
        harmed = entry.requests_harmed
        for signal in entry.metrics:
            signal.spare = capacity.spare(signal, entry.metrics, requests_harmed=harmed)
        _score(entry)
    _earliness(list(suspects.values()))
    _cascade(suspects)
    del focus  # the question's wording orders nothing: equal scores go to the earlier onset
    return sorted(suspects.values(), key=own_evidence_key)


def own_evidence_key(entry: Suspect) -> tuple[float, float, str]:
    """The order of the services' own evidence: score, then the earlier onset; the name
    last, only so that the order is stable (``localise.leaders_tied`` reports such ties)."""
    return (-round(entry.score, 6), (entry.onset or _END).timestamp(), entry.service)


def measure_of(signal: MetricSignal) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a series measures, whichever instance reports it: its name and its other labels."""
    labels = {k: v for k, v in signal.labels.items() if k not in vocab.INSTANCE_LABELS}
    return signal.metric, tuple(sorted(labels.items()))


def replica_of(signal: MetricSignal) -> str:
    """The instance (pod, host) a series comes from, when a label names one."""
    return next((signal.labels[k] for k in vocab.REPLICA_LABELS if signal.labels.get(k)), "")


def instances_shifted(entry: Suspect, signal: MetricSignal) -> tuple[list[str], int] | None:
    """The instances of ``entry`` whose series of ``signal``'s measure shifted the same way,
    and how many instances report that measure; None when only one does."""
    measure = measure_of(signal)
    same = [m for m in entry.metrics if measure_of(m) == measure and replica_of(m)]
    replicas = {replica_of(m) for m in same}
    if len(replicas) < 2:
        return None
    shifted = sorted(
        {replica_of(m) for m in same if m.abnormal and m.direction == signal.direction}
    )
    return shifted, len(replicas)


def _score(entry: Suspect) -> None:
    """Points for each kind of evidence a service shows of its own.

    Hand weights, not derived: a series' own shift counts by its robust score (capped at
    30, a tenth of the tools' cap), each further measure that moved adds a little (one
    measure however many instances report it: three pods showing one shift are one piece
    of evidence), and evidence that a cause leaves and an effect does not (a resource at
    its limit, logs saying it ran out, a change just before new errors, code errors)
    adds more than evidence any victim shows too (errors, failed calls).
    """
    score = 0.0
    # work in flight below capacity and the requests arriving are load (in_flight_load,
    # demand): evidence of nothing on their own; the requests a service with a shift of its
    # own served differently are one more measure of that shift (fewer completed when it
    # slowed), never its strength
    loaded = [m for m in entry.own_metrics if not in_flight_load(m)]
    metrics = [m for m in loaded if not demand(m)]
    if metrics:
        score += min(metrics[0].anomaly, 30.0) / 3.0
        measures = {measure_of(m) for m in loaded}
        score += min(len(measures) - 1, 4) * 0.5
    resources = entry.resource_metrics
    if resources:
        score += 4.0
        if any(m.at_limit for m in resources):
            score += 4.0
    logs = entry.abnormal_logs
    kinds = {lg.kind for lg in logs}
    if "resource" in kinds:
        score += 5.0
    if entry.change_before_errors is not None:
        score += 4.0
    elif entry.changes:
        score += 1.0
    if "code" in kinds:
        score += 3.0
    score += min(sum(1 for lg in logs if lg.kind == "other"), 2) * 1.5
    score += min(sum(1 for lg in logs if lg.kind == "dependency"), 2) * 0.5
    if entry.blamed_by:
        own = 2.0 if entry.anomalous else 1.0
        score += own * min(len(entry.blamed_by), 3)
    # A pure victim: every error it logs is a failed call to someone else, named. A failed
    # connection that names no service of the environment (an address, a timeout on its
    # own socket) blames nobody: it is the service's own network path's failure.
    dependency_only = bool(logs) and kinds == {"dependency"} and all(lg.mentions for lg in logs)
    if dependency_only and not resources and not entry.blamed_by:
        entry.victim = True
        score *= 0.5
    entry.score = score
    entry.kind, entry.subkind = _cause_kind(entry)


def _cascade(suspects: dict[str, Suspect]) -> None:
    """A service failing its calls to an abnormal service that went wrong first is downstream.

    Its own saturation (threads, pools waiting on the slow callee) is then an
    effect: the callee inherits the suspicion.
    """
    for entry in sorted(suspects.values(), key=lambda e: e.service):
        for target_name in sorted(_dependency_targets(entry)):
            target = suspects.get(target_name)
            if target is None or not target.anomalous:
                continue
            own, theirs = entry.onset, target.onset
            if own is not None and theirs is not None and (theirs - own).total_seconds() > 60:
                continue
            entry.downstream_of.append(target_name)
    for entry in suspects.values():
        if entry.downstream_of:
            entry.score *= 0.6
            entry.kind, entry.subkind = _cause_kind(entry)
            for name in entry.downstream_of:
                suspects[name].score += 3.0


def _dependency_targets(entry: Suspect) -> set[str]:
    targets: set[str] = set()
    for lg in entry.abnormal_logs:
        if lg.kind == "dependency":
            targets.update(lg.mentions)
    return targets


def _earliness(entries: list[Suspect]) -> None:
    timed = sorted(
        ((e.onset, e.service, e) for e in entries if e.onset is not None and e.score > 0),
        key=lambda item: (item[0], item[1]),
    )
    if not timed:
        return
    first_time, _, first = timed[0]
    later = [t for t, _, _ in timed[1:]]
    if not later or all((t - first_time).total_seconds() >= EARLY_MARGIN_S for t in later):
        if len(timed) > 1:
            first.earliest = True
            first.score += 3.0


def _cause_kind(entry: Suspect) -> tuple[str, str]:
    """What kind of cause this service would be, from its strongest own evidence."""
    resources = entry.resource_metrics
    resource_logs = entry.resource_logs
    if entry.downstream_of:
        return "dependency", ""
    if entry.change_before_errors is not None and not any(m.at_limit for m in resources):
        return "change", ""
    if resources or resource_logs:
        subs = [lg.subkind for lg in resource_logs if lg.subkind]
        subs += [m.subkind for m in resources if m.subkind and m.at_limit]
        subs += [m.subkind for m in resources if m.subkind]
        return "resource", subs[0] if subs else ""
    kinds = [lg.kind for lg in entry.abnormal_logs]
    metric_kinds = [m.kind for m in entry.own_metrics]
    if "change" in kinds or "change" in metric_kinds:
        return "change", ""
    if "code" in kinds:
        return "code", ""
    if entry.victim:
        return "dependency", ""
    if "latency" in metric_kinds:
        return "latency", ""
    if "errors" in metric_kinds or kinds:
        return "errors", ""
    if entry.blamed_by and not entry.has_data:
        return "dependency_target", ""
    return "other", ""


def root_cause_evidence(entry: Suspect) -> tuple[MetricSignal, LogSignal] | None:
    """The pair that directly shows a resource cause: its own metric and its own log."""
    if entry.downstream_of:
        return None
    metrics = [m for m in entry.resource_metrics if m.line]
    logs = [lg for lg in entry.resource_logs if lg.line or lg.samples]
    if not metrics or not logs:
        return None
    metrics.sort(
        key=lambda m: (not m.at_limit, vocab.is_free_metric(m.metric), -m.anomaly, m.metric)
    )
    log_subs = {lg.subkind for lg in logs}
    matching = [m for m in metrics if m.subkind in log_subs or m.kind == "restart"]
    strong = [m for m in matching if m.at_limit or m.anomaly >= 2 * ANOMALY_MIN]
    if not strong:
        return None
    metric = strong[0]
    same = [lg for lg in logs if lg.subkind == metric.subkind] or logs
    return metric, same[0]
