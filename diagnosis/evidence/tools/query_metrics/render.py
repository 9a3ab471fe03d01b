"""The query_metrics output and summary: series ranked by anomaly, and the fleet view
(services ranked, at most a few series each) of a query without a service."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
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
from diagnosis.evidence.tools.query_metrics.series import Grid, RawSeries, collection_paused
from diagnosis.evidence.tools.query_metrics.statistics import (
    ANOMALY_THRESHOLD,
    SeriesFacts,
    series_analyse,
)

MAX_SERIES_SHOWN = 12
MAX_SERIES_PER_SERVICE = 3  # in the fleet view, so that one service cannot fill the list
MAX_SERVICES_SHOWN = 10
# In the fleet view of a large fleet (``large_fleet_series`` series or more) a flat series is
# shown only when it came at least half-way to a shift, the same half-threshold that extends a
# shift (statistics.shift_measure): below it, which of thousands of noisy series scores
# highest is the noise's draw, says nothing of the incident, and the engine's screen
# (``engine``) cannot rank it; above it, the screen finds the series.
NEAR_MISS_SCORE = ANOMALY_THRESHOLD / 2


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


def _fleet_rank(facts: list[SeriesFacts]) -> list[ServiceRank]:
    """Services with an anomalous series, most anomalous first (facts are ranked already,
    so a service's first anomalous fact is its top)."""
    series = Counter(fact.service for fact in facts)
    anomalous = Counter(fact.service for fact in facts if fact.anomalous)
    tops: dict[str, SeriesFacts] = {}
    for fact in facts:
        if fact.anomalous:
            tops.setdefault(fact.service, fact)
    ranks = [
        ServiceRank(service=service, series=series[service], anomalous=anomalous[service], top=top)
        for service, top in tops.items()
    ]
    ranks.sort(key=ServiceRank.order)
    return ranks


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


def _clash_note(facts: list[SeriesFacts]) -> list[str]:
    """What ``service`` means for series that also carry ``exported_service``."""
    clashing = sum(1 for fact in facts if EXPORTED_SERVICE_LABEL in fact.labels)
    if not clashing:
        return []
    return [
        f"{clashing} of {len(facts)} series also carry {EXPORTED_SERVICE_LABEL} (a service "
        f"label of their own, renamed where it clashed): each is ranked under service, the "
        f"label this environment names services with; {EXPORTED_SERVICE_LABEL} is an "
        f"ordinary label to filter on"
    ]


@dataclass(frozen=True)
class FleetTotals:
    """The whole fleet's size when only some of its series were read (ranked in the engine)."""

    services: int
    series: int


def _fleet_view(
    facts: list[SeriesFacts], counted: int, totals: FleetTotals | None
) -> tuple[list[str], dict[str, Any]]:
    """The fleet view's lines (totals, the most anomalous services) and its summary."""
    ranked = _fleet_rank(facts)
    services = len({f.service for f in facts})
    if totals:
        services = max(services, totals.services)
    anomalous = sum(1 for f in facts if f.anomalous)
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
) -> BackendOutput:
    """Rank the series (most anomalous first) into bounded, excerptable lines.

    ``fleet`` (no service asked for): totals over every series of every service, the
    most anomalous services, and the top series with at most MAX_SERIES_PER_SERVICE of
    one service, so one noisy service cannot hide the others. ``totals``: the fleet's size
    when ``series`` are only its candidates (the rest counted, not read). A fleet of at least
    ``large_fleet_series`` series (0: none is large) shows its anomalous series and near misses
    only (NEAR_MISS_SCORE).
    """
    # Analysed one at a time: the points of a series are dropped once its facts are known.
    with collection_paused():
        facts = [series_analyse(s, window, grid.step) for s in series]
    facts = [f for f in facts if f.window_points or f.baseline_points]
    facts.sort(key=_ranking_key)
    counted = max(totals.series, len(facts)) if totals else len(facts)
    showable = facts
    if fleet and 0 < large_fleet_series <= counted:
        showable = [f for f in facts if f.anomalous or f.anomaly_score >= NEAR_MISS_SCORE]
    shown = _shown(showable, per_service=MAX_SERIES_PER_SERVICE if fleet else None)
    omitted = counted - len(shown)
    step = duration_format(timedelta(seconds=grid.step))
    lines = [f"query_metrics {description}", f"{window.describe()}; step {step}"]
    lines.extend(notes)
    lines.extend(_clash_note(facts))
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
        fleet_lines, summary["fleet"] = _fleet_view(facts, counted, totals)
        lines.extend(fleet_lines)
    else:
        lines.append(f"{len(facts)} series matched, most anomalous first:")
    for fact in shown:
        lines.append(fact.line())
        lines.append(fact.trend_line())
        summary["series"].append(fact.summary())
    if omitted:
        lines.append(f"{omitted} more series omitted (lower anomaly scores)")
    return BackendOutput(status="ok", output="\n".join(lines), summary=summary)
