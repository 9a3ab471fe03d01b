"""A counter reads at its real rate whatever its sample interval against the grid.

A sample coarser than the grid is held at every grid time of its lookback, so the increase
between consecutive grid points is nothing, then the whole interval's: the rate is taken
over one sample interval instead (``series.counter_to_rate``), as Prometheus' ``rate``
reads it. Properties over random rates, sample intervals and offsets, and through the tool
on a pack whose counters are sampled every 5 minutes.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_metrics.series import Grid, counter_to_rate, grid_evaluate
from diagnosis.models import ToolInvocation

STEP = 60.0


def _gridded(rate: float, every: int, offset: float, points: int) -> list[tuple[float, float]]:
    """A counter growing at ``rate`` per second, sampled every ``every`` grid steps (starting
    ``offset`` seconds into the first), read on a 1-minute grid as an instant vector."""
    samples = [
        (offset + i * every * STEP, rate * (offset + i * every * STEP))
        for i in range(points // every + 2)
    ]
    grid = Grid(start=STEP * every, end=STEP * points, step=STEP)
    return grid_evaluate(samples, grid)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(min_value=0.01, max_value=5000.0),
    every=st.integers(min_value=1, max_value=6),
    offset=st.floats(min_value=0.0, max_value=59.0),
)
def test_a_counter_reads_at_its_rate_at_every_grid_point_whatever_its_interval(rate, every, offset):
    rates = [value for _, value in counter_to_rate(_gridded(rate, every, offset, 120))]
    assert rates
    assert all(abs(value - rate) <= 1e-6 * rate for value in rates)


def test_one_sample_per_grid_point_is_read_between_consecutive_points():
    points = [(0.0, 0.0), (60.0, 60.0), (120.0, 180.0), (180.0, 180.0), (240.0, 30.0)]
    # an idle minute reads zero; a reset counts from zero
    assert counter_to_rate(points) == [(60.0, 1.0), (120.0, 2.0), (180.0, 0.0), (240.0, 0.5)]


def test_a_coarse_counters_step_in_rate_is_read_as_one(session, pack_dir: Path):
    # requests every 5 minutes: 20 per second, then 60 from 10:20
    start, change, end = 1772442000, 1772446800, 1772448000  # 09:00, 10:20, 10:40 UTC
    lines, total = ["# TYPE coarse_requests counter"], 0.0
    for t in range(start, end + 1, 300):
        lines.append(f'coarse_requests_total{{service="pay"}} {total:.0f} {t}')
        total += (60.0 if t >= change else 20.0) * 300
    lines.append("# EOF")
    (pack_dir / "metrics" / "coarse.om").write_text("\n".join(lines) + "\n", encoding="utf-8")
    session.context = {
        "now": "2026-03-02T10:40:00Z",
        "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
    }
    session.save()
    result = tool_invoke(
        session=session, attempt=1, tool_name="query_metrics",
        arguments={"metric": "coarse_requests_total"},
    )  # fmt: skip
    (series,) = ToolInvocation.objects.get(pk=result.invocation_id).summary["series"]
    assert series["direction"] == "up"
    assert series["baseline_median"] == 20
    assert series["window_level"] == 60
    # the first sample that holds the faster interval's requests is 10:25's: a rate is known
    # at the end of its interval, within one sample interval of the change
    assert series["change_point"] == "2026-03-02T10:25:00Z"
