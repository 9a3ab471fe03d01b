"""The fleet view of a large fleet shows a flat series as a near miss only beyond what the
fleet's noise reaches: a bar that grows with the number of series ranked, the same on every
backend (``render.near_miss``, ``statistics.noise_score_bound``)."""

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


def _shown(series: list[RawSeries]) -> list[dict]:
    out = render.metrics_render(
        series=series,
        window=WINDOW,
        grid=GRID,
        description="(all services)",
        fleet=True,
        large_fleet_series=1,
    )
    return out.summary["series"]


@pytest.mark.parametrize(("services", "seed"), [(10_000, 13), (10_000, 17), (30_000, 3)])
def test_pure_noise_services_never_become_near_misses_however_large_the_fleet(services, seed):
    # (the anomaly threshold is per series: at 30,000 one noise series may cross it, seed 3)
    assert [s for s in _shown(_fleet(services, seed=seed)) if s["direction"] == "flat"] == []


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
