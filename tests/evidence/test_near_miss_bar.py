"""The fleet view of a large fleet shows a flat series as a near miss, and any fleet view a
shift, only beyond what the fleet's noise reaches: one bar that grows with the number of series
ranked, the same on every backend (``render.noise_bar``, ``statistics.noise_score_bound``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from diagnosis.evidence.common import QueryWindow
from diagnosis.evidence.tools.query_metrics import render
from diagnosis.evidence.tools.query_metrics.query import _grid
from diagnosis.evidence.tools.query_metrics.series import RawSeries
from diagnosis.evidence.tools.query_metrics.statistics import noise_score_bound

WINDOW = QueryWindow.around(
    start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
)
GRID = _grid(window=WINDOW, step=None, sweep=True, clamps=None)


def _fleet(services: int, *, seed: int, shifted: dict[int, float] | None = None) -> list[RawSeries]:
    """``services`` services with one gauge each: normal noise (deviation 1) about a level of
    their own; a service in ``shifted`` moves by that many deviations over the whole window."""
    rng = random.Random(seed)
    start = WINDOW.start.timestamp()
    fleet = []
    for index in range(services):
        level = rng.uniform(20, 60)  # its 1 % floor below the noise
        move = (shifted or {}).get(index, 0.0)
        points = [
            (t, level + rng.gauss(0, 1) + (move if t >= start else 0.0)) for t in GRID.times()
        ]
        fleet.append(RawSeries(f"queue_{seed}", {"service": f"s{index:05d}"}, points))
    return fleet


def _rendered(series: list[RawSeries], *, fleet: bool = True) -> dict:
    out = render.metrics_render(
        series=series,
        window=WINDOW,
        grid=GRID,
        description="(all services)",
        fleet=fleet,
        large_fleet_series=1,
    )
    return out.summary


def _shown(series: list[RawSeries], *, fleet: bool = True) -> list[dict]:
    return _rendered(series, fleet=fleet)["series"]


@pytest.mark.parametrize(("services", "seed"), [(10_000, 13), (10_000, 17), (30_000, 3)])
def test_pure_noise_services_never_become_near_misses_however_large_the_fleet(services, seed):
    assert [s for s in _shown(_fleet(services, seed=seed)) if s["direction"] == "flat"] == []


@pytest.mark.parametrize(("services", "seed"), [(10_000, 13), (30_000, 3)])
def test_pure_noise_services_never_become_shifts_in_the_fleet_view(services, seed):
    # Each fleet has noise series whose strongest 3-point run scores past the threshold (3.26
    # and 3.58 at 10,000, 3.67 at 30,000): within what the largest of that many noise runs
    # reaches, so no "up" or "down" line and no service ranked.
    summary = _rendered(_fleet(services, seed=seed))
    assert summary["series"] == []
    assert summary["fleet"]["anomalous"] == 0
    assert summary["fleet"]["services_ranked"] == []


def test_a_real_shift_is_still_shown_as_one_in_a_large_noise_fleet():
    shown = _shown(_fleet(10_000, seed=13, shifted={4_000: 4.0}))
    assert [(s["service"], s["direction"]) for s in shown] == [("s04000", "up")]


def test_a_call_for_one_service_still_holds_a_shift_to_the_threshold_alone():
    # The noise run that the 10,000-service fleet view reads as flat is a shift when that
    # service's own series are asked for (a few series: no fleet's noise to clear).
    alone = [s for s in _fleet(10_000, seed=13) if s.labels["service"] == "s05517"]
    assert [s["direction"] for s in _shown(alone, fleet=False)] == ["up"]


@pytest.mark.parametrize(("services", "seed"), [(1_000, 4), (10_000, 17)])
def test_a_real_shift_below_the_threshold_stays_the_one_near_miss_of_a_large_fleet(services, seed):
    planted = services // 3
    shown = _shown(_fleet(services, seed=seed, shifted={planted: 2.6}))
    assert [s["service"] for s in shown] == [f"s{planted:05d}"]


def test_the_bar_grows_with_the_series_ranked_and_falls_with_the_samples():
    bars = [
        noise_score_bound(series=n, window_samples=21, baseline_samples=60)
        for n in (10, 10**3, 10**5)
    ]
    assert bars == sorted(bars) and bars[0] < render.NEAR_MISS_SCORE < bars[1]
    assert noise_score_bound(series=10**4, window_samples=41, baseline_samples=120) < bars[2]
