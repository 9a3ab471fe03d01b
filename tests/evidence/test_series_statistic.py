"""One change statistic per series: direction, ratio, score and change point agree."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.evidence.common import QueryWindow, num_format, quantity_format
from diagnosis.evidence.tools.query_metrics.render import metrics_render
from diagnosis.evidence.tools.query_metrics.series import (
    Grid,
    RawSeries,
    grid_evaluate,
    unit_detect,
)
from diagnosis.evidence.tools.query_metrics.statistics import (
    ANOMALY_THRESHOLD,
    repeat_length,
    series_analyse,
    upper_bound,
)

START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
WINDOW = QueryWindow.around(start=START, end=START + timedelta(minutes=30))
STEP = 60.0


def _series(baseline: list[float], window: list[float], name: str = "queue_depth", **labels):
    """Baseline points end right before the window; window points start at its start."""
    ws = WINDOW.start.timestamp()
    points = [(ws - STEP * (len(baseline) - i), v) for i, v in enumerate(baseline)]
    points += [(ws + STEP * i, v) for i, v in enumerate(window)]
    return RawSeries(name=name, labels={"service": "svc", **labels}, points=points)


def _facts(baseline, window, **kwargs):
    return series_analyse(_series(baseline, window, **kwargs), WINDOW, STEP).summary()


def test_a_single_high_spike_does_not_make_a_falling_series_rise():
    # The extreme point (50) is far above the baseline median, but the level fell to ~2.
    baseline = [10.0, 11.0, 9.0, 10.0, 10.5]
    window = [10.0, 2.0, 2.1, 50.0, 1.9, 2.0, 2.2, 1.8, 2.0, 2.1, 1.9, 2.0]
    facts = _facts(baseline, window)
    assert facts["window_max"] == 50
    assert facts["window_mean"] < facts["baseline_mean"]
    assert facts["direction"] == "down"
    assert facts["ratio"] < 1
    assert " up " not in facts["line"] and "down since" in facts["line"]


def test_one_extreme_sample_is_not_a_shift():
    baseline = [5.0, 6.0, 7.0] * 10
    window = [6.0] * 10 + [500.0] + [6.0] * 10
    facts = _facts(baseline, window)
    assert facts["direction"] == "flat"
    assert facts["anomaly_score"] < ANOMALY_THRESHOLD
    assert facts["change_point"] is None
    assert "no sustained shift" in facts["line"]


def test_a_sustained_rise_names_its_onset_and_how_long_it_held():
    baseline = [5.0, 6.0, 7.0] * 10
    window = [6.0] * 19 + [20.0] * 11
    facts = _facts(baseline, window)
    assert facts["direction"] == "up"
    assert facts["window_level"] == 20
    assert facts["baseline_median"] == 6
    assert facts["ratio"] == 3.33
    assert facts["sustained_points"] == 11
    assert facts["change_point"] == "2026-03-02T10:19:00Z"
    assert "up since 2026-03-02T10:19:00Z, level 20 over 11 window points" in facts["line"]
    assert "ratio 3.33x" in facts["line"]


def test_a_shift_that_ended_inside_the_window_says_until_when():
    facts = _facts([5.0, 6.0, 7.0] * 10, [6.0] * 5 + [30.0] * 6 + [6.0] * 10)
    assert facts["direction"] == "up"
    assert facts["shift_end"] == "2026-03-02T10:10:00Z"
    assert "since 2026-03-02T10:05:00Z until 2026-03-02T10:10:00Z" in facts["line"]


def _coarse(window_samples: list[float]) -> dict:
    """Five-minute samples (2 h of noisy baseline) seen on the 1-minute grid, as Prometheus
    would: each sample repeats over the grid points of its lookback."""
    ws = WINDOW.start.timestamp()
    baseline = [(ws - 300 * (24 - i), 100.0 + (i % 4)) for i in range(24)]
    window = [(ws + 300 * i, v) for i, v in enumerate(window_samples)]
    grid = Grid.for_window(WINDOW, timedelta(minutes=1))
    points = grid_evaluate(baseline + window, grid)
    series = RawSeries(name="latency_ms", labels={"service": "svc"}, points=points)
    return series_analyse(series, WINDOW, grid.step).summary()


def test_one_coarse_sample_repeated_over_the_grid_is_not_a_shift():
    facts = _coarse([101.0, 102.0, 500.0, 101.0, 103.0, 100.0])
    assert facts["window_max"] == 500
    assert facts["direction"] == "flat"
    assert facts["baseline_samples"] == 24


def test_two_coarse_samples_in_a_row_are_a_shift():
    facts = _coarse([101.0, 102.0, 500.0, 510.0, 101.0, 100.0])
    assert facts["direction"] == "up"
    assert facts["change_point"] == "2026-03-02T10:10:00Z"
    assert facts["ratio"] > 1


def _gapped(window: list[float | None], baseline: list[float] | None = None):
    """A 1-minute series whose window misses the grid points given as None."""
    ws = WINDOW.start.timestamp()
    base = baseline or [10.0, 11.0, 9.0, 10.0, 10.5, 9.5] * 5
    points = [(ws - STEP * (len(base) - i), v) for i, v in enumerate(base)]
    points += [(ws + STEP * i, v) for i, v in enumerate(window) if v is not None]
    series = RawSeries(name="queue_depth", labels={"service": "svc"}, points=points)
    return series_analyse(series, WINDOW, STEP).summary()


@given(
    level=st.floats(min_value=30.0, max_value=1e4),
    at=st.integers(min_value=0, max_value=8),
    gap_first=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_a_dropped_sample_neither_breaks_a_shift_nor_makes_one(level, at, gap_first):
    # A 3-point shift with one of its points missing still holds over the samples that
    # exist; the same gap beside one raised point of a shorter excursion does not.
    window: list[float | None] = [10.0] * 12
    window[at : at + 3] = [level] * 3
    window[at + (0 if gap_first else 2)] = None
    assert _gapped(window)["direction"] == "up"
    spike: list[float | None] = [10.0] * 12
    spike[at] = level
    spike[at + 1] = None
    spike[at + 2] = None
    spike[at + 3] = None
    assert _gapped(spike)["direction"] == "flat"


def test_the_repeat_of_a_sample_is_read_from_inner_runs_only():
    assert repeat_length([1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0]) == 3
    assert repeat_length([1.0, 2.0, 3.0, 3.0, 4.0]) == 1
    assert repeat_length([0.0] * 10 + [5.0] * 10) == 1


def test_a_zero_baseline_is_new_and_has_no_ratio():
    facts = _facts([0.0] * 30, [0.0] * 10 + [3.0] * 20, name="errors_total")
    assert facts["direction"] == "up"
    assert facts["new"] is True
    assert facts["ratio"] is None
    assert "new (zero baseline)" in facts["line"]
    assert "ratio n/a" in facts["line"]


def test_a_series_without_baseline_samples_is_new_and_scores_nothing():
    facts = _facts([], [4.0] * 10)
    assert facts["new"] is True
    assert facts["direction"] == "flat"
    assert facts["anomaly_score"] == 0
    assert "new series (no baseline samples)" in facts["line"]


def test_a_sparse_baseline_is_said_and_damps_the_score():
    window = [6.0] * 10 + [20.0] * 20
    dense = _facts([5.0, 6.0, 7.0] * 10, window)
    sparse = _facts([5.0, 6.0, 7.0], window)
    assert sparse["sparse_baseline"] is True and dense["sparse_baseline"] is False
    assert sparse["anomaly_score"] < dense["anomaly_score"]
    assert "sparse baseline (3 samples, score damped)" in sparse["line"]
    assert "sparse" not in dense["line"]


def test_a_negative_baseline_gives_a_direction_but_no_ratio():
    facts = _facts([-10.0, -11.0, -9.0] * 10, [-10.0] * 10 + [-2.0] * 20)
    assert facts["direction"] == "up"
    assert facts["ratio"] is None


def test_byte_and_second_values_are_shown_in_human_units_beside_the_raw_value():
    gib = 1024**3
    facts = _facts(
        [1.0 * gib] * 30, [1.0 * gib] * 10 + [1.95 * gib] * 20, name="container_memory_bytes"
    )
    assert facts["unit"] == "bytes"
    assert facts["human"]["window_level"] == "1.95 GiB"
    assert "level 2093796557 (1.95 GiB)" in facts["line"]
    latency = _facts([0.05] * 30, [0.05] * 10 + [0.23] * 20, name="http_latency_seconds")
    assert "level 0.23 (230 ms)" in latency["line"]
    millis = _facts([40.0] * 30, [40.0] * 10 + [1500.0] * 20, name="rt_ms_p99")
    assert "level 1500 (1.5 s)" in millis["line"]
    by_label = _facts([100.0] * 30, [100.0] * 10 + [4096.0] * 20, name="usage", unit="bytes")
    assert "(4 KiB)" in by_label["line"]


def test_units_come_from_naming_conventions_not_metric_names():
    assert unit_detect("node_network_receive_bytes_total", {}, rate=True) == ("bytes/s", 1.0)
    assert unit_detect("process_cpu_seconds_total", {}, rate=True) == ("", 1.0)
    assert unit_detect("process_start_time_seconds", {}, rate=False) == ("", 1.0)
    assert unit_detect("request_duration_seconds_count", {}, rate=True) == ("", 1.0)
    assert unit_detect("jvm_heap_used_mb", {}, rate=False) == ("bytes", 1024.0**2)
    assert unit_detect("cpu_utilisation", {}, rate=False) == ("", 1.0)
    assert quantity_format(0.000_25, "seconds") == "250 µs"
    assert quantity_format(5400, "seconds") == "1.5 h"
    assert quantity_format(0, "bytes") == ""


_VALUES = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 5.0, 100.0]),
)


@settings(max_examples=400, deadline=None)
@given(
    baseline=st.lists(_VALUES, min_size=0, max_size=40),
    window=st.lists(_VALUES, min_size=1, max_size=30),
)
def test_direction_ratio_and_score_never_disagree(baseline, window):
    facts = _facts(baseline, window)
    direction, ratio, score = facts["direction"], facts["ratio"], facts["anomaly_score"]
    line = facts["line"]
    if direction == "up":
        assert ratio is None or ratio > 1
        assert facts["window_level"] > facts["baseline_median"]
        assert score >= ANOMALY_THRESHOLD
        assert "up since" in line and "down since" not in line
    elif direction == "down":
        assert ratio is None or ratio < 1
        assert facts["window_level"] < facts["baseline_median"]
        assert score >= ANOMALY_THRESHOLD
        assert "down since" in line and "up since" not in line
    else:
        assert score < ANOMALY_THRESHOLD
        assert facts["change_point"] is None
        assert "up since" not in line and "down since" not in line
    if ratio is not None:
        assert f"ratio {num_format(ratio)}x" in line
    if direction != "flat" and "window mean" in line and "baseline mean" in line:
        sign = 1 if direction == "up" else -1
        assert sign * (facts["window_mean"] - facts["baseline_mean"]) > 0


def test_a_noise_free_baseline_scores_by_relative_change_at_most_100():
    from_zero = _facts([0.0] * 30, [0.0] * 10 + [7.0] * 20, name="errors")
    doubled = _facts([10.0] * 30, [10.0] * 10 + [20.0] * 20, name="replicas")
    assert from_zero["anomaly_score"] == 100
    assert doubled["anomaly_score"] == 50
    noisy = _facts([0.9, 1.0, 1.1] * 10, [1.0] * 10 + [20.0] * 20, name="latency")
    assert noisy["anomaly_score"] > 100, "a shift against measured noise can score higher"


def test_among_equally_strong_changes_the_earlier_onset_ranks_first():
    late = _series([0.0] * 30, [0.0] * 20 + [5.0] * 10, name="a_late")
    early = _series([0.0] * 30, [0.0] * 5 + [5.0] * 25, name="z_early")
    grid = Grid.for_window(WINDOW, timedelta(minutes=1))
    out = metrics_render(series=[late, early], window=WINDOW, grid=grid, description="x")
    assert [s["metric"] for s in out.summary["series"]] == ["z_early", "a_late"]


def test_a_share_at_its_upper_end_is_judged_by_its_distance_to_that_end() -> None:
    # Availability at exactly 100 % that drops to ~98 %: 2 % of requests now fail where
    # none did, as exact as a failure count leaving zero; not 2 % of its own level.
    baseline = [100.0] * 30
    window = [100.0] * 5 + [97.9] * 10 + [98.9] * 10
    facts = _facts(baseline, window, name="availability_percent")
    assert facts["direction"] == "down"
    assert facts["anomaly_score"] >= ANOMALY_THRESHOLD
    assert facts["ratio"] < 1


@given(
    small=st.floats(min_value=0.001, max_value=5.0),
    larger=st.floats(min_value=0.001, max_value=5.0),
    upper=st.sampled_from([1.0, 100.0]),
)
@settings(max_examples=40, deadline=None)
def test_a_dip_from_a_flat_share_at_its_end_scores_by_its_size(small, larger, upper) -> None:
    # A baseline exactly at 100 % has an unknown spread, not a zero one: a dip scores by
    # its size against the share's resolution, never every dip alike at the maximum.
    small, larger = sorted((small, larger))
    name = "availability_ratio" if upper == 1.0 else "availability_percent"
    scores = [
        _facts([upper] * 30, [upper] * 5 + [upper * (1 - d / 100)] * 25, name=name)
        for d in (small, larger)
    ]
    assert scores[0]["anomaly_score"] <= scores[1]["anomaly_score"]
    if larger >= 2 * small and scores[0]["anomaly_score"] < 100:
        assert scores[0]["anomaly_score"] < scores[1]["anomaly_score"]


def test_a_dip_to_99_99_from_a_flat_100_is_below_one_to_98() -> None:
    tiny = _facts([100.0] * 30, [100.0] * 5 + [99.99] * 25, name="availability_percent")
    real = _facts([100.0] * 30, [100.0] * 5 + [98.0] * 25, name="availability_percent")
    assert tiny["direction"] == "flat"  # within the share's resolution
    assert real["direction"] == "down"
    assert tiny["anomaly_score"] < ANOMALY_THRESHOLD <= real["anomaly_score"]


def test_an_unbounded_series_keeps_its_relative_floor() -> None:
    # The same numbers without a share's unit: a 2 % dip of a constant is within its floor.
    baseline = [100.0] * 30
    window = [100.0] * 5 + [97.9] * 10 + [98.9] * 10
    facts = _facts(baseline, window, name="queue_depth")
    assert facts["direction"] == "flat"


def test_a_share_outside_its_range_is_not_bounded() -> None:
    # "percent" in the name but values above 100 (CPU percent over many cores): unbounded.
    assert upper_bound("cpu_percent", {}, [150.0, 320.0]) is None
    assert upper_bound("cache_hit_ratio", {}, [0.9, 0.99]) == 1.0
    assert upper_bound("availability", {"unit": "percent"}, [99.0, 100.0]) == 100.0


@given(pods=st.integers(min_value=2, max_value=6), measures=st.integers(min_value=2, max_value=14))
@settings(max_examples=25, deadline=None)
def test_replicas_of_one_measure_do_not_push_out_other_measures(pods, measures):
    # Every pod of a service shifts on one measure (strongest first); the service's other
    # measures, weaker, still make the list before the second replica of the first.
    replicas = [
        _series([1.0, 1.1, 0.9] * 10, [1.0] * 5 + [50.0 + i] * 25, name="cpu_usage", pod=f"p{i}")
        for i in range(pods)
    ]
    others = [
        _series([1.0, 1.1, 0.9] * 10, [1.0] * 5 + [20.0] * 25, name=f"m{i:02d}_depth")
        for i in range(measures)
    ]
    grid = Grid.for_window(WINDOW, timedelta(minutes=1))
    out = metrics_render(series=replicas + others, window=WINDOW, grid=grid, description="x")
    names = [s["metric"] for s in out.summary["series"]]
    distinct = min(measures + 1, 12)
    assert len(set(names[:distinct])) == distinct, names
    assert names[0] == "cpu_usage"
    assert names.count("cpu_usage") == min(pods, 12 - distinct + 1)


def test_a_spike_before_the_change_is_not_the_peak_stated_with_it():
    # the window opens with a spike (9 at 10:01) and the level then shifts to ~4 at 10:12
    baseline = [1.0, 1.1, 0.9] * 10
    window = [1.0, 9.0] + [1.0] * 10 + [4.0, 4.2, 4.5, 4.1] * 4 + [1.0] * 2
    facts = _facts(baseline, window)
    assert facts["direction"] == "up"
    assert facts["window_max"] == 9 and facts["window_max_at"] == "2026-03-02T10:01:00Z"
    assert facts["change_point"] == "2026-03-02T10:12:00Z"
    assert facts["shift_peak"] == 4.5
    assert facts["shift_peak_at"] == "2026-03-02T10:14:00Z"
    assert "max since the change 4.5 at 2026-03-02T10:14:00Z" in facts["line"]


@settings(max_examples=300, deadline=None)
@given(
    baseline=st.lists(_VALUES, min_size=1, max_size=40),
    window=st.lists(_VALUES, min_size=1, max_size=30),
    shift=st.integers(min_value=0, max_value=300),
)
def test_the_shifts_own_peak_lies_between_its_onset_and_its_end(baseline, window, shift):
    """For any series (a window shifted in time too): the peak stated with the change is
    never from before its onset, and it is the extreme of the shift's own points."""
    ws = WINDOW.start.timestamp() + shift
    points = [(ws - STEP * (len(baseline) - i), v) for i, v in enumerate(baseline)]
    points += [(ws + STEP * i, v) for i, v in enumerate(window)]
    series = RawSeries(name="queue_depth", labels={"service": "svc"}, points=points)
    fact = series_analyse(series, WINDOW, STEP)
    if not fact.anomalous or fact.change_point is None:
        assert fact.shift_peak is None
        return
    assert fact.shift_peak is not None and fact.shift_peak_at is not None
    end = fact.shift_end if fact.shift_end is not None else math.inf
    assert fact.change_point <= fact.shift_peak_at <= end
    ws, we = WINDOW.start.timestamp(), WINDOW.end.timestamp()
    inside = [v for t, v in points if fact.change_point <= t <= end and ws <= t <= we]
    wanted = max(inside) if fact.direction == "up" else min(inside)
    assert fact.shift_peak == wanted
    if fact.window_max_at is not None and fact.window_max_at < fact.change_point:
        if fact.direction == "up":
            assert "max since the change" in fact.line()
