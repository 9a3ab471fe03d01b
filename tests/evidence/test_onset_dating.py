"""When a shift began, and how precisely that is known, over generated noisy series.

A shift's onset is not moved back over a sample of baseline noise, and its confidence (the
seconds before the dated onset the change may already have begun, ``onset_unseen_s``)
depends on the shift's size against the noise: a small shift's onset is dated less
precisely than a large one's.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.evidence.common import QueryWindow
from diagnosis.evidence.tools.query_metrics.series import RawSeries
from diagnosis.evidence.tools.query_metrics.statistics import (
    ANOMALY_THRESHOLD,
    _median,
    _spread,
    series_analyse,
)
from diagnosis.offline.analysis import resolution_seconds

START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
WINDOW = QueryWindow.around(start=START, end=START + timedelta(minutes=30))
STEP = 60.0
BUDGET = ANOMALY_THRESHOLD**2


def _noisy_series(
    *, seed: int, onset: int, size: float, before: float, sign: int
) -> tuple[dict, float]:
    """A gauge with Gaussian baseline noise; from window point ``onset`` on it holds ``size``
    robust scales away (with a little noise of its own), and the point right before the
    onset lies ``before`` scales away. Returns the summary and the onset's time."""
    rng = random.Random(seed)
    baseline = [100.0 + rng.gauss(0.0, 5.0) for _ in range(60)]
    median, scale = _median(baseline), _spread(baseline, _median(baseline))
    window = [median + rng.gauss(0.0, 0.5) * scale for _ in range(30)]
    window[onset - 2] = median - sign * scale  # plainly the baseline's
    window[onset - 1] = median + sign * before * scale
    for i in range(onset, 30):
        window[i] = median + sign * (size + rng.uniform(-0.1, 0.1)) * scale
    ws = WINDOW.start.timestamp()
    points = [(ws - STEP * (len(baseline) - i), v) for i, v in enumerate(baseline)]
    points += [(ws + STEP * i, v) for i, v in enumerate(window)]
    series = RawSeries(name="queue_depth", labels={"service": "svc"}, points=points)
    return series_analyse(series, WINDOW, STEP).summary(), ws + STEP * onset


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@given(
    seed=st.integers(0, 10_000),
    onset=st.integers(4, 20),
    size=st.floats(20.0, 200.0),
    noise=st.floats(ANOMALY_THRESHOLD / 2 + 0.05, ANOMALY_THRESHOLD - 0.05),
    sign=st.sampled_from([1, -1]),
)
@settings(max_examples=60, deadline=None)
def test_a_noise_sample_next_to_a_large_shift_does_not_date_it_early(
    seed, onset, size, noise, sign
):
    # within the baseline's reach, and far nearer the baseline's level than the shift's
    size = min(size, 19.0) if sign < 0 else size  # a fall from 100 stays above 0
    facts, began = _noisy_series(seed=seed, onset=onset, size=size, before=noise, sign=sign)
    assert facts["direction"] == ("up" if sign > 0 else "down")
    assert facts["change_point"] == _stamp(began)
    assert facts["onset_unseen_s"] == 0.0


@given(
    seed=st.integers(0, 10_000),
    onset=st.integers(4, 20),
    size=st.floats(3.6, 4.4),
    sign=st.sampled_from([1, -1]),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_a_small_shift_may_have_begun_a_sample_before_its_dated_onset(
    seed, onset, size, sign, data
):
    # a point the shift may already hold: assigning it to the shift costs less than the
    # evidence one point needs (threshold²), though it is too near the baseline to join
    # (the shifted points carry ±0.1 scale of noise: the run's own size may be that larger)
    top = size + 0.1
    low = (top * top - BUDGET) / (2 * top) + 0.05
    before = data.draw(st.floats(low, ANOMALY_THRESHOLD / 2 - 0.05))
    facts, began = _noisy_series(seed=seed, onset=onset, size=size, before=before, sign=sign)
    assert facts["change_point"] == _stamp(began)
    assert facts["onset_unseen_s"] == STEP
    # so "callee no later than caller" is judged within it: one grid step more
    assert resolution_seconds(STEP, facts) == STEP + STEP


@given(
    seed=st.integers(0, 10_000),
    onset=st.integers(4, 20),
    size=st.floats(12.0, 19.0),
    before=st.floats(-1.0, ANOMALY_THRESHOLD / 2 - 0.05),
    sign=st.sampled_from([1, -1]),
)
@settings(max_examples=60, deadline=None)
def test_a_large_shift_is_dated_to_its_sample(seed, onset, size, before, sign):
    facts, began = _noisy_series(seed=seed, onset=onset, size=size, before=before, sign=sign)
    assert facts["change_point"] == _stamp(began)
    assert facts["onset_unseen_s"] == 0.0
    assert resolution_seconds(STEP, facts) == STEP


@given(
    seed=st.integers(0, 10_000),
    onset=st.integers(4, 20),
    size=st.floats(4.0, 5.6),
    sign=st.sampled_from([1, -1]),
    data=st.data(),
)
@settings(max_examples=40, deadline=None)
def test_a_point_nearer_a_small_shifts_level_still_joins_it(seed, onset, size, sign, data):
    before = data.draw(st.floats(size / 2 + 0.1, ANOMALY_THRESHOLD - 0.05))
    facts, began = _noisy_series(seed=seed, onset=onset, size=size, before=before, sign=sign)
    assert facts["change_point"] == _stamp(began - STEP)
