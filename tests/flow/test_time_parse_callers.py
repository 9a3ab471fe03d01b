"""One time parser (diagnosis.evidence.timeutil.time_parse); each caller's strictness and zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from diagnosis.charts import metric_chart
from diagnosis.evidence.timeutil import TimeFormatError, time_parse
from diagnosis.flow.planner import effective_window
from diagnosis.flow.planner import time_parse as planner_time_parse
from tests.chat.test_charts import SERIES, SUMMARY

PLUS_8 = timezone(timedelta(hours=8))


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-03-02T10:20:00Z", datetime(2026, 3, 2, 10, 20, tzinfo=UTC)),
        ("2026-03-02t10:20:00z", datetime(2026, 3, 2, 10, 20, tzinfo=UTC)),
        (" 2026-03-02 10:20:00.5 ", datetime(2026, 3, 2, 10, 20, 0, 500000, tzinfo=UTC)),
        ("2026-03-02T18:20:00+08:00", datetime(2026, 3, 2, 10, 20, tzinfo=UTC)),
        ("2026-03-02T18:20:00+0800", datetime(2026, 3, 2, 10, 20, tzinfo=UTC)),
    ],
)
def test_the_strict_parser_reads_rfc_3339_as_utc(text, moment):
    parsed = time_parse(text)
    assert parsed == moment and parsed.tzinfo == UTC


@pytest.mark.parametrize("text", ["2026-03-02", "2026-03-02T10:20Z", "yesterday", "", 1700000000])
def test_the_strict_parser_refuses_anything_else(text):
    with pytest.raises(TimeFormatError):
        time_parse(text)


def test_the_strict_parser_takes_a_datetime_naive_as_utc():
    assert time_parse(datetime(2026, 3, 2, 10, 20)) == datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
    eight = datetime(2026, 3, 2, 18, 20, tzinfo=PLUS_8)
    assert time_parse(eight).tzinfo == UTC


def test_the_planner_reads_any_iso_text_in_the_zone_it_names_and_nothing_else():
    eight = planner_time_parse("2026-03-02T18:20:00+08:00")
    assert eight == datetime(2026, 3, 2, 10, 20, tzinfo=UTC) and eight.utcoffset() == timedelta(
        hours=8
    )
    assert planner_time_parse("2026-03-02") == datetime(2026, 3, 2, tzinfo=UTC)
    assert planner_time_parse("2026-03-02T10:20Z") == datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
    for unreadable in ("yesterday", "", None, 1700000000, datetime(2026, 3, 2, tzinfo=UTC)):
        assert planner_time_parse(unreadable) is None
    now = datetime(2026, 3, 2, 11, tzinfo=UTC)
    window = effective_window(
        plan=None, hint={"start": "2026-03-02T18:00:00+08:00", "end": "2026-03-02T10:40Z"}, now=now
    )
    assert window == {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}


def test_the_chart_reads_its_summary_times_in_utc_and_skips_an_unreadable_window():
    summary = {
        **SUMMARY,
        "baseline": {"start": "2026-03-02T16:20:00+08:00"},  # 08:20 UTC
        "window": {"start": "2026-03-02T10:20Z", "end": "2026-03-02T10:50:00Z"},
    }
    chart = metric_chart(summary=summary, series=SERIES)
    assert chart is not None
    assert (chart.start_label, chart.window_label, chart.end_label) == ("08:20", "10:20", "10:50")
    unreadable = {**summary, "window": {"start": "soon", "end": "2026-03-02T10:50:00Z"}}
    assert metric_chart(summary=unreadable, series=SERIES) is None
