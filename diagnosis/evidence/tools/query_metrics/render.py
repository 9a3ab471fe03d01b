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
from diagnosis.evidence.tools.query_metrics.statistics import SeriesFacts, series_analyse

MAX_SERIES_SHOWN = 12
MAX_SERIES_PER_SERVICE = 3  # in the fleet view, so that one service cannot fill the list
MAX_SERVICES_SHOWN = 10


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
    with collection_paused():
        facts = [series_analyse(s, window, grid.step) for s in series]
    facts = [f for f in facts if f.window_points or f.baseline_points]
    facts.sort(key=_ranking_key)
    shown = _shown(facts, per_service=MAX_SERIES_PER_SERVICE if fleet else None)
    omitted = len(facts) - len(shown)
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
