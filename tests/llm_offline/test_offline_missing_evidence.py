"""Ranking with part of the evidence missing: a root seen only by its latency, a family gone.

Properties over generated call graphs (random trees, random names, random sizes of shift):

- a root whose only changed series is its latency stays first, with the kind ``latency``,
  however deep the failure-share dip its callers show (their timeouts on it): a failure
  share and a latency have no common unit, so only their significance compares;
- when the series that would show the named service's trouble are missing, whatever else
  that service shows (an earlier blip) does not make the root, which began at the time the
  question reports, "another event": what is not observed is a gap, not a date.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from diagnosis.llm.base import ExecutorRequest
from diagnosis.offline.analysis import Suspect
from diagnosis.offline.gather import suspects_localise

from .fakes import call_tree, metrics_evidence, summary_series

NOW = "2026-03-02T10:40:00Z"
ONSET = "2026-03-02T10:20:00Z"
EARLY = "2026-03-02T10:05:00Z"


def _item(service: str, metric: str, labels: dict[str, str], **figures: Any) -> dict[str, Any]:
    change = figures.get("change")
    return summary_series(
        service, metric, base=figures["base"], level=figures["level"], change=change,
        score=figures.get("score", 0 if change is None else 40), labels=labels,
        baseline_points=120, now=NOW,
    )  # fmt: skip


def _latency(service: str, base: float, level: float, change: str | None, score: float = 40):
    return _item(
        service, "latency_seconds", {"quantile": "0.99"}, base=base, level=level, change=change,
        score=score,
    )  # fmt: skip


def _availability(service: str, level: float, change: str | None) -> dict[str, Any]:
    return _item(service, "availability_percent", {}, base=100.0, level=level, change=change)


def _ranked(
    series: list[dict[str, Any]], edges: list[tuple[str, str]], named: str
) -> list[Suspect]:
    services = sorted({s["service"] for s in series} | {s for e in edges for s in e})
    evidence = metrics_evidence(series, edges)
    request = ExecutorRequest(
        question=f"{named} 在 2026-03-02 10:20 (UTC) 左右出问题，请帮我定位根因服务。",
        language="zh-CN",
        now=NOW,
        window={"start": "2026-03-02T10:00:00Z", "end": NOW},
        plan={"services": [named]},
        services=services,
        attempt=1,
        call_edges=tuple(edges),
    )
    return suspects_localise(request, evidence, [named])


@pytest.mark.parametrize("seed", range(8))
def test_a_root_seen_only_by_its_latency_explains_its_callers_failures(seed):
    rng = random.Random(seed)
    names, edges, root, callers = call_tree(rng)
    base = rng.uniform(0.02, 0.3)
    factor = rng.uniform(1.5, 3.0)  # slower by half to three times
    dip = rng.uniform(2.0, 60.0)  # the callers' failure share, in points of 100 %
    series = [_latency(root, base, base * factor, ONSET, score=rng.uniform(12, 40))]
    for name in names:
        if name in callers:
            series.append(_availability(name, 100.0 - dip, ONSET))  # timeouts on the root
        elif name != root:
            series.append(_availability(name, 100.0, None))
        if name != root:
            series.append(_latency(name, 0.1, 0.1, None))
    ranked = _ranked(series, edges, named=names[0])
    assert ranked[0].service == root
    assert ranked[0].root_kind == "latency"
    by_name = {s.service: s for s in ranked}
    assert all(by_name[name].inherited_from for name in callers)


@pytest.mark.parametrize("seed", range(6))
def test_a_missing_trouble_series_does_not_date_the_trouble_by_another_blip(seed):
    # The named entry's failure series is missing (its family was not collected); all it
    # shows is a small latency blip well before the trouble. An unrelated service shifted at
    # the time of that blip; the root, a callee of the entry, at the time the question gives.
    rng = random.Random(seed)
    names, edges, root, callers = call_tree(rng)
    entry = names[0]
    others = [n for n in names if n != root and n not in callers]
    if not others:
        pytest.skip("every service is on the root's path")
    unrelated = rng.choice(others)
    series = [
        _latency(entry, 0.1, 0.104, EARLY, score=4),
        _latency(root, 0.05, 0.05 * rng.uniform(1.5, 3.0), ONSET, score=rng.uniform(12, 40)),
        _latency(unrelated, 0.05, 0.05 * rng.uniform(1.5, 3.0), EARLY, score=rng.uniform(12, 40)),
    ]
    series += [_latency(n, 0.1, 0.1, None) for n in names if n not in {entry, root, unrelated}]
    ranked = _ranked(series, edges, named=entry)
    by_name = {s.service: s for s in ranked}
    assert not by_name[root].mistimed
    assert ranked[0].service in {root, unrelated}  # a service that shifted, and in time
