"""The query_metrics output and summary: series ranked by anomaly, and the fleet view
(services ranked, at most a few series each) of a query without a service."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from diagnosis.evidence.common import (
    BackendOutput,
    QueryWindow,
    num_format,
    num_value,
)
from diagnosis.evidence.timeutil import duration_format
from diagnosis.evidence.tools.query_metrics.selector import EXPORTED_SERVICE_LABEL
from diagnosis.evidence.tools.query_metrics.series import (
    REPLICA_LABELS,
    Grid,
    RawSeries,
    collection_paused,
)
from diagnosis.evidence.tools.query_metrics.statistics import (
    ANOMALY_THRESHOLD,
    SeriesFacts,
    noise_score_bound,
    series_analyse,
)

MAX_SERIES_SHOWN = 12
MAX_SERIES_PER_SERVICE = 3  # in the fleet view, so that one service cannot fill the list
MAX_SERVICES_SHOWN = 10
# In the fleet view of a large fleet (``large_fleet_series`` series or more) a flat series is
# shown only when it came at least half-way to a shift, the same half-threshold that extends a
# shift (statistics.shift_measure), and beyond what the fleet's noise reaches (``near_miss``).
NEAR_MISS_SCORE = ANOMALY_THRESHOLD / 2


def noise_bar(fact: SeriesFacts, series: int) -> float:
    """The score the largest of ``series`` pure-noise scores reaches (at NOISE_BOUND_ODDS),
    for the samples ``fact``'s score compares with the baseline: the one bar the fleet view
    holds both a shift and a near miss to (``shown_as_shift``, ``near_miss``).

    A score is |level − median(baseline)| over the baseline's spread, and the level is the
    median of some of the window's samples: a flat series' whole window, a shift's own run
    (``sustained_points``, as raw samples). Its noise bound is ``statistics.noise_score_bound``
    for those samples: the fewer, the higher (a median of 3 samples moves about 2.6 times as
    far as one of 21). A shift is the strongest run of a series' window, so among N series the
    largest noise shift is a short run (3 points, SUSTAIN_POINTS): measured on pure normal
    noise, 3.26 and 3.58 at 10,000 series, 3.67 at 30,000, all of 3 points, against a bar of
    4.6 and 4.8 for 3 samples (2.1 for the whole window: the flat bar never reaches the
    threshold below 10⁸ series). The median of 3 samples counts a run as beyond once two of
    them are; a shift needs all three beyond the threshold, so the bar is safe without a
    further factor for the run's positions in the window."""
    samples = fact.window_samples
    if fact.anomalous and fact.window_points and fact.sustained_points:
        samples = math.ceil(fact.sustained_points * fact.window_samples / fact.window_points)
    return noise_score_bound(
        series=series, window_samples=samples, baseline_samples=fact.baseline_samples
    )


def shown_as_shift(fact: SeriesFacts, series: int) -> bool:
    """Whether the fleet view of ``series`` series shows ``fact`` as a shift (up or down): its
    score at least ANOMALY_THRESHOLD and beyond ``noise_bar``. A series that stopped (no window
    samples) is not a level's score and always counts; a call for one service (few series)
    holds a shift to the threshold alone."""
    if not fact.anomalous or not fact.window_points:
        return fact.anomalous
    return fact.anomaly_score >= noise_bar(fact, series)


def near_miss(fact: SeriesFacts, series: int) -> bool:
    """Whether a flat series is a near miss among ``series`` series ranked: its score at least
    NEAR_MISS_SCORE and beyond what the largest of that many pure-noise scores reaches
    (``noise_bar``, for its own window and baseline samples).

    Below that bar, which of thousands of noisy series scores highest is the noise's draw: it
    says nothing of the incident, and the engine's screen (``engine``, which ranks by the
    window's mean) does not reproduce a statistic's draw, so two engines would disagree about
    it. The bar grows with the number of series (about as √(2 ln N)), never with the services'
    names or the backend: the files, Prometheus and VictoriaMetrics give it the same N, the
    series the ranking chose among (the engine's count of the fleet when it screened, not the
    candidates read)."""
    return not fact.anomalous and fact.anomaly_score >= max(
        NEAR_MISS_SCORE, noise_bar(fact, series)
    )


def _as_flat(fact: SeriesFacts) -> SeriesFacts:
    """``fact`` read as no sustained shift (its run did not clear the fleet's noise bar): its
    score and level as measured, no onset, end or peak."""
    return dataclasses.replace(
        fact,
        direction="flat",
        change_point=None,
        shift_end=None,
        sustained_points=0,
        shift_peak=None,
        shift_peak_at=None,
        onset_unseen=0.0,
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


@dataclass(frozen=True)
class ServiceRank:
    """A service with an anomalous series; ``top`` is its most anomalous one."""

    service: str
    series: int
    anomalous: int
    top: SeriesFacts

    def line(self) -> str:
        top = self.top
        return (
            f"service {self.service}: {self.anomalous} of {self.series} series anomalous, "
            f"top {top.metric} {top.direction} anomaly score {num_format(top.anomaly_score)}"
        )

    def summary(self) -> dict[str, Any]:
        top = self.top
        return {
            "service": self.service,
            "series": self.series,
            "anomalous": self.anomalous,
            "top_metric": top.metric,
            "top_direction": top.direction,
            "top_score": num_value(top.anomaly_score) or 0.0,
            "line": self.line(),
        }

    def order(self) -> tuple[Any, ...]:
        return (*_ranking_key(self.top)[:2], -self.anomalous, self.service)


def _measure(fact: SeriesFacts) -> tuple[Any, ...]:
    """What a series measures, whichever replica (pod, instance, host) reports it."""
    labels = tuple(sorted((k, v) for k, v in fact.labels.items() if k not in REPLICA_LABELS))
    return fact.metric, fact.is_rate, labels


def _measures_first(ranked: list[SeriesFacts]) -> list[SeriesFacts]:
    """``ranked`` with each measure's strongest replica first and the other replicas after
    every measure's strongest, each part in rank order.

    Replicas of one measure are one piece of evidence told several times: three pods of a
    service must not take the places of its other measures (a caller's request rate, its
    errors) in a list cut at a few series. Where there is room the other replicas follow,
    so "1 of 3 pods" can still be read. Nothing moves up as more facts arrive (a measure's
    strongest replica can only be displaced by a stronger one), so ``_Top`` may still drop
    what falls below its cut.
    """
    seen: set[tuple[Any, ...]] = set()
    first: list[SeriesFacts] = []
    rest: list[SeriesFacts] = []
    for fact in ranked:
        key = _measure(fact)
        (rest if key in seen else first).append(fact)
        seen.add(key)
    return first + rest


class _Top:
    """The MAX_SERIES_SHOWN best facts, at most ``per_service`` of one service, of facts given
    one at a time: it holds a few times MAX_SERIES_SHOWN facts, whatever their number. A fact
    below the capped top is dropped for good: every later fact that could be shown ranks above
    it, so it never counts against a service's cap."""

    def __init__(self, per_service: int | None) -> None:
        self.per_service = per_service
        self.facts: list[SeriesFacts] = []

    def add(self, fact: SeriesFacts) -> None:
        self.facts.append(fact)
        if len(self.facts) >= 4 * MAX_SERIES_SHOWN:
            self.facts = self.shown()

    def shown(self) -> list[SeriesFacts]:
        self.facts.sort(key=_ranking_key)
        ordered = _measures_first(self.facts)
        if self.per_service is None:
            return ordered[:MAX_SERIES_SHOWN]
        taken: Counter[str] = Counter()
        shown: list[SeriesFacts] = []
        for fact in ordered:
            if len(shown) == MAX_SERIES_SHOWN:
                break
            if taken[fact.service] < self.per_service:
                taken[fact.service] += 1
                shown.append(fact)
        return shown


class _Ranking:
    """Every series' facts folded one at a time into what the output says: counts, each
    service's top anomalous fact, and the facts shown (``_Top``), so memory grows with the
    services, never with the series or their samples."""

    def __init__(self, *, per_service: int | None, among: int, fleet: bool = False) -> None:
        self.among = among  # the series ranked, for the fleet's noise bar (``noise_bar``)
        self.fleet = fleet  # a fleet view: a shift must clear the noise bar (``shown_as_shift``)
        self.count = 0
        self.clashing = 0  # facts that also carry exported_service
        self.series: Counter[str] = Counter()
        self.anomalous: Counter[str] = Counter()
        self.tops: dict[str, SeriesFacts] = {}
        self.top = _Top(per_service)
        self.top_notable = _Top(per_service)  # anomalous series and near misses only

    def add(self, fact: SeriesFacts) -> None:
        notable = fact.anomalous or near_miss(fact, self.among)
        if self.fleet and fact.anomalous and not shown_as_shift(fact, self.among):
            # A shift within the fleet's noise: flat, and not a near miss either (its score
            # is below the bar of its own samples, the one bar a near miss must clear too).
            fact, notable = _as_flat(fact), False
        self.count += 1
        self.clashing += EXPORTED_SERVICE_LABEL in fact.labels
        self.series[fact.service] += 1
        self.top.add(fact)
        if notable:
            self.top_notable.add(fact)
        if fact.anomalous:
            self.anomalous[fact.service] += 1
            held = self.tops.get(fact.service)
            if held is None or _ranking_key(fact) < _ranking_key(held):
                self.tops[fact.service] = fact

    def services_ranked(self) -> list[ServiceRank]:
        """Services with an anomalous series, most anomalous first."""
        ranks = [
            ServiceRank(
                service=service,
                series=self.series[service],
                anomalous=self.anomalous[service],
                top=top,
            )
            for service, top in self.tops.items()
        ]
        ranks.sort(key=ServiceRank.order)
        return ranks

    def clash_note(self) -> list[str]:
        """What ``service`` means for series that also carry ``exported_service``."""
        if not self.clashing:
            return []
        return [
            f"{self.clashing} of {self.count} series also carry {EXPORTED_SERVICE_LABEL} (a "
            f"service label of their own, renamed where it clashed): each is ranked under "
            f"service, the label this environment names services with; "
            f"{EXPORTED_SERVICE_LABEL} is an ordinary label to filter on"
        ]


@dataclass(frozen=True)
class FleetTotals:
    """The whole fleet's size when only some of its series were read (ranked in the engine)."""

    services: int
    series: int


def _fleet_view(
    ranking: _Ranking, counted: int, totals: FleetTotals | None
) -> tuple[list[str], dict[str, Any]]:
    """The fleet view's lines (totals, the most anomalous services) and its summary."""
    ranked = ranking.services_ranked()
    services = len(ranking.series)
    if totals:
        services = max(services, totals.services)
    anomalous = sum(ranking.anomalous.values())
    totals_line = (
        f"fleet totals: {_count(services, 'service')}, {counted} series, "
        f"{anomalous} anomalous (in {_count(len(ranked), 'service')})"
    )
    lines = [totals_line]
    top = ranked[:MAX_SERVICES_SHOWN]
    if top:
        lines.append("most anomalous services:")
        lines.extend(r.line() for r in top)
    if len(ranked) > len(top):
        lines.append(f"{len(ranked) - len(top)} more services with anomalous series omitted")
    lines.append(f"most anomalous series (at most {MAX_SERIES_PER_SERVICE} per service):")
    summary = {
        "services": services,
        "series": counted,
        "anomalous": anomalous,
        "anomalous_services": len(ranked),
        "line": totals_line,
        "services_ranked": [r.summary() for r in top],
        "services_omitted": len(ranked) - len(top),
    }
    return lines, summary


def metrics_render(
    *,
    series: Iterable[RawSeries],
    window: QueryWindow,
    grid: Grid,
    description: str,
    notes: Iterable[str] = (),
    fleet: bool = False,
    totals: FleetTotals | None = None,
    large_fleet_series: int = 0,
    series_count: int | None = None,
) -> BackendOutput:
    """Rank the series (most anomalous first) into bounded, excerptable lines.

    ``fleet`` (no service asked for): totals over every series of every service, the
    most anomalous services, and the top series with at most MAX_SERIES_PER_SERVICE of
    one service, so one noisy service cannot hide the others. ``totals``: the fleet's size
    when ``series`` are only its candidates (the rest counted, not read). A fleet of at least
    ``large_fleet_series`` series (0: none is large) shows its anomalous series and near misses
    only (``near_miss``) among ``series_count`` series: the number the ranking chooses among,
    known before they are read (the series the files or the engine matched, the fleet the
    engine screened); None for ``len(series)``.
    """
    # Analysed one at a time: the points of a series are dropped once its facts are known,
    # and its facts once they are counted, unless they are among those shown.
    if series_count is None:
        series_count = len(series) if isinstance(series, Sized) else 0
    if totals:
        series_count = max(series_count, totals.series)
    ranking = _Ranking(
        per_service=MAX_SERIES_PER_SERVICE if fleet else None, among=series_count, fleet=fleet
    )
    with collection_paused():
        for item in series:
            fact = series_analyse(item, window, grid.step)
            if fact.window_points or fact.baseline_points:
                ranking.add(fact)
    counted = max(totals.series, ranking.count) if totals else ranking.count
    large = fleet and 0 < large_fleet_series <= counted
    shown = (ranking.top_notable if large else ranking.top).shown()
    omitted = counted - len(shown)
    step = duration_format(timedelta(seconds=grid.step))
    lines = [f"query_metrics {description}", f"{window.describe()}; step {step}"]
    lines.extend(notes)
    lines.extend(ranking.clash_note())
    summary: dict[str, Any] = {
        "window": window.as_dict(),
        "baseline": window.baseline_dict(),
        "step": step,
        "series": [],
        "omitted": omitted,
    }
    if not ranking.count:
        lines.append("no data: no series matched in this time range")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    if fleet:
        fleet_lines, summary["fleet"] = _fleet_view(ranking, counted, totals)
        lines.extend(fleet_lines)
    else:
        lines.append(f"{ranking.count} series matched, most anomalous first:")
    for fact in shown:
        lines.append(fact.line())
        lines.append(fact.trend_line())
        summary["series"].append(fact.summary())
    if omitted:
        lines.append(f"{omitted} more series omitted (lower anomaly scores)")
    return BackendOutput(status="ok", output="\n".join(lines), summary=summary)
