"""The change statistic on a series that lost samples: what it says stays true of the full one.

Dropped samples (a missed scrape, a sparse export) take information away; they must not
change what happened. The level of a shift is the median of the samples it holds, each
once, however the grid's lookback repeats them beside a gap; and the onset of a series
that lost samples is known less finely, never more: the times it allows for the change
include every time the full series allows.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from diagnosis.evidence.common import QueryWindow
from diagnosis.evidence.timeutil import time_parse
from diagnosis.evidence.tools.query_metrics.series import Grid, RawSeries, grid_evaluate
from diagnosis.evidence.tools.query_metrics.statistics import series_analyse
from diagnosis.offline.analysis import resolution_seconds

START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
WINDOW = QueryWindow.around(start=START, end=START + timedelta(minutes=30))
INTERVAL = 300  # five-minute samples, as exports that sum up periods write them


def _samples(
    window: list[float | None], seed: int = 0, interval: int = INTERVAL, jitter: float = 0.0
) -> list[tuple[float, float]]:
    """Two hours of noisy baseline samples, then ``window``'s (None: dropped), each off by
    up to ``jitter``."""
    noise = random.Random(seed)
    ws = WINDOW.start.timestamp()
    count = 7200 // interval
    baseline = [
        (ws - interval * (count - i), 10.0 + noise.uniform(-0.5, 0.5)) for i in range(count)
    ]
    kept = [
        (ws + interval * i, v + noise.uniform(-jitter, jitter))
        for i, v in enumerate(window)
        if v is not None
    ]
    return baseline + kept


def _facts(samples: list[tuple[float, float]], step_s: int) -> tuple[dict, float]:
    """The summary of the series seen on a ``step_s`` grid, and the step."""
    grid = Grid.for_window(WINDOW, timedelta(seconds=step_s))
    points = grid_evaluate(list(samples), grid)
    series = RawSeries(name="latency_ms", labels={"service": "svc"}, points=points)
    return series_analyse(series, WINDOW, grid.step).summary(), grid.step


def test_a_shift_level_counts_each_sample_once_beside_a_gap():
    # 50 then 90 with the sample between them dropped: the 1-minute grid repeats 50 up to
    # its lookback's edge (six points) and 90 over five; the shift's samples are 50 and 90.
    facts, _ = _facts(_samples([10.0, 10.0, 50.0, None, 90.0, 10.0]), 60)
    assert facts["direction"] == "up"
    assert facts["window_level"] == 70.0
    full, _ = _facts(_samples([10.0, 10.0, 50.0, 70.0, 90.0, 10.0]), 60)
    assert full["window_level"] == 70.0


def _widened_never_moved(full: dict, sparse: dict, step: float) -> None:
    full_at = time_parse(full["change_point"]).timestamp()
    sparse_at = time_parse(sparse["change_point"]).timestamp()
    # the earliest time each allows for the change: the sparse series allows no less
    assert sparse_at - resolution_seconds(step, sparse) <= full_at - resolution_seconds(step, full)
    assert sparse_at >= full_at  # a sample it lacks cannot make it show the change sooner


@given(
    start=st.integers(min_value=1, max_value=3),
    length=st.integers(min_value=2, max_value=4),
    dropped=st.sets(st.integers(min_value=0, max_value=5), max_size=3),
    step_s=st.sampled_from([60, 120]),
    seed=st.integers(min_value=0, max_value=1000),
)
# the window's first sample dropped: the grid holds the baseline's last (noisy) one there
@example(start=1, length=2, dropped={0}, step_s=60, seed=8)
@settings(max_examples=60, deadline=None)
def test_dropped_samples_widen_the_onset_never_move_it_out(start, length, dropped, step_s, seed):
    window: list[float | None] = [10.0] * 6
    for i in range(start, min(start + length, 6)):
        window[i] = 40.0
    full, step = _facts(_samples(window, seed), step_s)
    thinned = [None if i in dropped else v for i, v in enumerate(window)]
    sparse, _ = _facts(_samples(thinned, seed), step_s)
    if full["direction"] != "up" or sparse["direction"] != "up":
        return  # a shift the samples left can no longer show is lost, not moved
    _widened_never_moved(full, sparse, step)


@given(
    onset=st.integers(min_value=5, max_value=20),
    before=st.integers(min_value=0, max_value=2),
    lost=st.integers(min_value=1, max_value=4),
    seed=st.integers(min_value=0, max_value=1000),
)
@settings(max_examples=60, deadline=None)
def test_minute_samples_held_by_the_lookback_widen_the_onset(onset, before, lost, seed):
    # one-minute samples on a one-minute grid: the lookback holds the last one over the
    # grid times whose own samples were lost, so the grid shows the old value there, not
    # a gap. (On a grid coarser than the samples a lost sample leaves no trace at all: the
    # grid time shows the sample before it, a value of its own.)
    # the window's samples vary less than the baseline's (0.2 against 0.5), so none before
    # the shift is half a threshold off and the onset is the shift's, not a noise sample's
    window: list[float | None] = [10.0] * onset + [40.0] * (30 - onset)
    full, step = _facts(_samples(window, seed, interval=60, jitter=0.2), 60)
    thinned = list(window)
    thinned[onset - before : onset - before + lost] = [None] * lost
    sparse, _ = _facts(_samples(thinned, seed, interval=60, jitter=0.2), 60)
    assert full["direction"] == sparse["direction"] == "up"
    _widened_never_moved(full, sparse, step)
