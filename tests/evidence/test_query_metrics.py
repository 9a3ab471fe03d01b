"""query_metrics from OpenMetrics files: window vs baseline, one fact a line."""

from __future__ import annotations

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_metrics import render
from diagnosis.evidence.tools.query_metrics.selector import selector_parse
from diagnosis.models import ToolInvocation

WINDOW = {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}


def _metrics(session, **arguments):
    session.context = {"now": "2026-03-02T10:40:00Z", "window": WINDOW}
    session.save()
    result = tool_invoke(session=session, attempt=1, tool_name="query_metrics", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


def test_it_reports_the_saturated_pool_against_its_baseline(session):
    row = _metrics(session, metric="pool_active")
    (series,) = row.summary["series"]
    assert series["service"] == "pay"
    assert series["labels"] == {"pool": "main", "service": "pay"}
    assert series["window_max"] == 20
    assert series["window_max_at"] == "2026-03-02T10:19:00Z"
    assert series["change_point"] == "2026-03-02T10:19:00Z"
    assert series["baseline_mean"] == 6
    assert series["direction"] == "up"
    assert series["anomaly_score"] > 3
    assert series["baseline_median"] == 6
    assert series["window_level"] == 20
    assert series["ratio"] == 3.33
    assert series["sustained_points"] == 22
    assert (
        'pay pool_active{pool="main"}: up since 2026-03-02T10:19:00Z, level 20 over 22 window '
        "points vs baseline median 6, ratio 3.33x, anomaly score 9.44; window max 20 at "
        "2026-03-02T10:19:00Z, window min 5, window mean 13.51, baseline mean 6 over 120 points"
    ) in row.output
    trend = series["trend_line"]
    assert trend in row.output
    assert len(trend.split(": ", 1)[1].split(" | ")) <= 12


def test_series_are_sorted_most_anomalous_first_and_counters_become_rates(session):
    row = _metrics(session, metric='{service=~"pay|gateway"}')
    names = [(s["metric"], s["direction"]) for s in row.summary["series"]]
    assert names[-1] == ("cpu_usage", "flat")
    scores = [s["anomaly_score"] for s in row.summary["series"]]
    assert scores == sorted(scores, reverse=True)
    counter = next(s for s in row.summary["series"] if s["metric"] == "http_requests_total")
    assert counter["rate"] is True
    # 6 requests a minute before the change, 600 after: 0.1/s and 10/s.
    assert counter["baseline_mean"] == 0.1
    assert counter["window_max"] == 10
    assert 'http_requests_total{status="500"} per-second rate: up since' in row.output


def test_a_service_without_a_metric_returns_all_its_series(session):
    row = _metrics(session, service="pay")
    assert {s["metric"] for s in row.summary["series"]} == {"pool_active", "http_requests_total"}


def test_labels_and_selectors_narrow_the_series(session):
    by_labels = _metrics(session, service="pay", labels={"pool": "other"})
    assert by_labels.status == "no_data"
    by_selector = _metrics(session, metric='pool_active{pool="main"}', service="pay")
    assert [s["metric"] for s in by_selector.summary["series"]] == ["pool_active"]


def test_a_promql_function_needs_a_live_prometheus(session):
    row = _metrics(session, metric="rate(http_requests_total[5m])")
    assert row.status == "error"
    assert "PromQL functions need a live Prometheus" in row.output


def test_the_series_count_is_bounded_with_a_line_saying_how_many_were_omitted(session, monkeypatch):
    monkeypatch.setattr(render, "MAX_SERIES_SHOWN", 1)
    row = _metrics(session, metric='{service=~".+"}')
    assert len(row.summary["series"]) == 1
    assert row.summary["omitted"] == 2
    assert "2 more series omitted (lower anomaly scores)" in row.output


def test_a_coarser_step_changes_the_grid(session):
    row = _metrics(session, metric="pool_active", step="5m")
    assert row.summary["step"] == "5m"
    assert "step 5m" in row.output


def test_selector_parse_accepts_simple_selectors_only():
    parsed = selector_parse('pool_active{pool="main",service!="x"}')
    assert parsed is not None
    assert parsed.render() == 'pool_active{pool="main",service!="x"}'
    assert selector_parse("sum(rate(x[5m]))") is None
