"""The metric chart: the series' trend with the baseline and the incident window marked."""

from diagnosis.charts import charts_for_lines, metric_chart
from tests.chat.factories import BASELINE, METRIC_LINE, TREND_LINE, WINDOW

SERIES = {
    "service": "payment-service",
    "metric": "db_pool",
    "line": METRIC_LINE,
    "trend_line": TREND_LINE,
}
SUMMARY = {"window": WINDOW, "baseline": BASELINE, "series": [SERIES]}


def test_the_window_is_marked_where_the_incident_starts_on_the_time_axis():
    chart = metric_chart(summary=SUMMARY, series=SERIES)
    assert chart is not None
    # Baseline 2h then a 30 min window: the window band starts four fifths along the plot.
    plot = chart.width - 16
    assert abs((chart.window_x - 8) / plot - 0.8) < 0.01
    assert chart.baseline_w + chart.window_w == plot
    assert len(chart.dots) == 12
    assert (chart.start_label, chart.window_label, chart.end_label) == ("08:20", "10:20", "10:50")
    # The last points (48, 50) are drawn high, the baseline (~12) low.
    assert chart.dots[-1][1] < chart.dots[0][1]


def test_only_the_series_whose_line_holds_the_excerpt_is_charted():
    other = dict(SERIES, line="other-service cpu: window max 1", trend_line="x trend: 1 | 2")
    summary = dict(SUMMARY, series=[other, SERIES])
    [chart] = charts_for_lines(summary=summary, lines=[METRIC_LINE])
    assert chart.title.startswith("payment-service db_pool_active_connections")
    assert charts_for_lines(summary=summary, lines=["no such line"]) == []


def test_a_series_without_values_or_times_draws_nothing():
    assert metric_chart(summary=SUMMARY, series=dict(SERIES, trend_line="t: - | - | -")) is None
    assert metric_chart(summary={"series": [SERIES]}, series=SERIES) is None


def test_a_byte_series_has_its_axis_in_human_units():
    chart = metric_chart(summary=SUMMARY, series=dict(SERIES, unit="bytes"))
    assert chart is not None
    assert chart.y_max_label == "50 B"
    big = dict(SERIES, unit="bytes", trend_line=TREND_LINE.replace("50", "1894381620"))
    label = metric_chart(summary=SUMMARY, series=big).y_max_label
    assert label == "1.76 GiB"


def test_a_series_without_a_unit_keeps_plain_numbers_on_its_axis():
    chart = metric_chart(summary=SUMMARY, series=SERIES)
    assert chart is not None and chart.y_max_label == "50"
