"""A series is compared as a per-second rate when it counts up: by the type its OpenMetrics
file declares (``# TYPE``), and only where none is declared by its name's suffix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from diagnosis.evidence.common import Deadline, QueryWindow, ToolFailure, ToolTimeout
from diagnosis.evidence.tools.query_metrics import prometheus
from diagnosis.evidence.tools.query_metrics.files import metrics_from_files, rates_apply
from diagnosis.evidence.tools.query_metrics.query import metrics_query
from diagnosis.evidence.tools.query_metrics.selector import selector_parse
from diagnosis.evidence.tools.query_metrics.series import Grid

START = 1_772_445_600  # 2026-03-02T10:00:00Z


def _samples(name: str, step: int = 60, count: int = 20) -> list[str]:
    # rises by 5 every minute: a counter's rate is 5/60 a second, a gauge stays the value
    return [f'{name}{{service="pay"}} {100 + 5 * i} {START + step * i}' for i in range(count)]


def _read(tmp_path: Path, text: str, name: str) -> dict[str, bool]:
    path = tmp_path / "pay.om"
    path.write_text(text + "\n# EOF\n", encoding="utf-8")
    grid = Grid(start=START + 300, end=START + 1140, step=60)
    selector = selector_parse(name)
    assert selector is not None
    read, _notes = metrics_from_files(
        files=[path], selector=selector, grid=grid, deadline=Deadline.after(10)
    )
    series = list(rates_apply(read))
    assert series
    return {s.name: s.is_rate for s in series}


@pytest.mark.parametrize(
    ("declaration", "sample", "rated"),
    [
        # declared types win over the name
        ("# TYPE requests_count gauge", "requests_count", False),
        ("# TYPE pg_stat_activity_count gauge", "pg_stat_activity_count", False),
        ("# TYPE jobs_done counter", "jobs_done", True),  # old text format: no _total
        ("# TYPE http_requests counter", "http_requests_total", True),  # OpenMetrics family
        ("# TYPE http_requests_total counter", "http_requests_total", True),
        ("# TYPE latency_seconds histogram", "latency_seconds_count", True),
        ("# TYPE latency_seconds summary", "latency_seconds_sum", True),
        ("# TYPE queue gaugehistogram", "queue_bucket", False),
        # no type, or one that says nothing: the name decides, as before
        ("", "errors_total", True),
        ("", "inflight_requests", False),
        ("# TYPE errors_total unknown", "errors_total", True),
        ("# TYPE other_metric gauge", "errors_total", True),
    ],
)
def test_a_series_is_a_rate_when_its_declared_type_or_else_its_name_says_it_counts(
    tmp_path, declaration, sample, rated
):
    text = "\n".join([declaration, *_samples(sample)]).strip()
    assert _read(tmp_path, text, sample) == {sample: rated}


def test_a_gauge_named_like_a_count_keeps_its_values(tmp_path):
    text = "\n".join(["# TYPE sessions_count gauge", *_samples("sessions_count")])
    path = tmp_path / "pay.om"
    path.write_text(text + "\n# EOF\n", encoding="utf-8")
    selector = selector_parse("sessions_count")
    assert selector is not None
    read, _ = metrics_from_files(
        files=[path],
        selector=selector,
        grid=Grid(start=START + 300, end=START + 600, step=60),
        deadline=Deadline.after(10),
    )
    (series,) = list(rates_apply(read))
    assert [value for _, value in series.points] == [125.0, 130.0, 135.0, 140.0, 145.0, 150.0]


asked: list[str] = []  # the families each metadata read asked for


def _prometheus_answers(
    metadata: httpx.Response | Exception, name: str = "sessions_count"
) -> tuple[list[str], list[Deadline], Any]:
    calls: list[str] = []
    metadata_deadlines: list[Deadline] = []
    asked.clear()

    def backend_get(
        *, url: str, deadline: Deadline, params: dict[str, str], **_kwargs: Any
    ) -> httpx.Response:
        calls.append(url.rsplit("/", 1)[-1])
        if url.endswith("/metadata"):
            asked.append(params.get("metric", "(all)"))
            metadata_deadlines.append(deadline)
            if isinstance(metadata, Exception):
                raise metadata
            return metadata
        values = [[START + 60 * i, str(100 + 5 * i)] for i in range(40)]
        metric = {"__name__": name, "service": "pay"}
        body = {"resultType": "matrix", "result": [{"metric": metric, "values": values}]}
        return httpx.Response(200, json={"status": "success", "data": body})

    return calls, metadata_deadlines, backend_get


def _prometheus_rated(metric: str = "sessions_count", seconds: float = 10) -> bool | None:
    """Whether the query_metrics answer on Prometheus reads the series as a rate."""
    end = datetime.fromtimestamp(START + 2400, UTC)
    output = metrics_query(
        service="pay",
        metric=metric,
        labels={},
        window=QueryWindow.around(start=end - timedelta(minutes=10), end=end),
        step=None,
        deadline=Deadline.after(seconds),
        prometheus_url="http://prom.test",
    )
    assert output.status == "ok", output.output
    return "per-second rate" in output.output


def _answer(data: object, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json={"status": "success", "data": data})


@pytest.mark.parametrize(
    ("name", "metadata", "rated"),
    [
        ("sessions_count", _answer({}), True),  # backfilled only: the name decides
        ("sessions_count", _answer({"sessions_count": [{"type": "gauge", "help": ""}]}), False),
        ("sessions", _answer({"sessions": [{"type": "counter"}]}), True),  # no _total: a counter
        ("queue_bucket", _answer({"queue": [{"type": "gaugehistogram"}]}), False),
        # targets that disagree say nothing: the name decides (not the last one read)
        ("sessions", _answer({"sessions": [{"type": "gauge"}, {"type": "counter"}]}), False),
        ("sessions_count", httpx.Response(500, text="boom"), True),
        ("sessions", _answer({"sessions": None, "x": [None, {"type": ["a"]}]}), False),
        ("sessions_count", ToolTimeout("slow"), True),  # the series are read: nothing is lost
        ("sessions_count", ToolFailure("refused"), True),
    ],
)
def test_prometheus_series_take_their_type_from_its_metadata_when_it_has_one(
    monkeypatch, name, metadata, rated
):
    calls, _deadlines, fake = _prometheus_answers(metadata, name)
    monkeypatch.setattr(prometheus, "backend_get", fake)
    assert _prometheus_rated(metric=name) is rated
    assert _prometheus_rated(metric=name) is rated
    # read once a minute, whatever came, and only for the families in play
    families = prometheus.metadata_families([name])
    assert calls == ["query_range", *["metadata"] * len(families), "query_range"]
    assert asked == families


def test_the_metadata_read_asks_for_the_families_in_play_and_for_all_when_there_are_many():
    assert prometheus.metadata_families(["http_requests_total", "pool_active"]) == [
        "http_requests",
        "http_requests_total",
        "pool_active",
    ]


def test_more_families_than_the_bound_take_one_whole_metadata_read(monkeypatch):
    _calls, _deadlines, fake = _prometheus_answers(_answer({"m3": [{"type": "counter"}]}))
    monkeypatch.setattr(prometheus, "backend_get", fake)
    names = [f"m{i}" for i in range(prometheus.METADATA_MAX_FAMILIES + 1)]
    types = prometheus.metric_types(
        base_url="http://prom.test", token_env="", deadline=Deadline.after(10), names=names
    )
    assert types == {"m3": "counter"}
    assert asked == ["(all)"]
    # the whole read answers the next call's families too, without another read
    again = prometheus.metric_types(
        base_url="http://prom.test", token_env="", deadline=Deadline.after(10), names=["m3"]
    )
    assert (again, asked) == ({"m3": "counter"}, ["(all)"])


def test_the_metadata_read_has_its_own_budget_inside_the_call(monkeypatch):
    _calls, deadlines, fake = _prometheus_answers(_answer({}))
    monkeypatch.setattr(prometheus, "backend_get", fake)
    _prometheus_rated(seconds=3)  # half of what is left, under the cap
    prometheus._metadata.clear()
    _prometheus_rated(seconds=10)  # the cap
    # the reads of one call share one budget
    reads = len(prometheus.metadata_families(["sessions_count"]))
    assert deadlines[:reads] == [deadlines[0]] * reads
    short, long = deadlines[0], deadlines[reads]
    assert short.seconds == pytest.approx(1.5, abs=0.1)
    assert long.seconds == prometheus.METADATA_BUDGET_SECONDS


def test_prometheus_metadata_is_read_again_once_it_is_old_and_not_when_time_is_short(
    monkeypatch,
):
    calls, _deadlines, fake = _prometheus_answers(_answer({"sessions_count": [{"type": "gauge"}]}))
    monkeypatch.setattr(prometheus, "backend_get", fake)
    now = [1000.0]
    monkeypatch.setattr(prometheus, "_clock", lambda: now[0])
    assert _prometheus_rated() is False
    now[0] += prometheus.METADATA_FRESH_SECONDS + 1
    assert _prometheus_rated(seconds=prometheus.METADATA_MIN_SECONDS / 2) is True  # not read
    assert _prometheus_rated() is False
    assert calls.count("metadata") == 2 * len(prometheus.metadata_families(["sessions_count"]))


def test_a_promql_expression_does_not_read_the_metadata(monkeypatch):
    calls, _deadlines, fake = _prometheus_answers(_answer({}))
    monkeypatch.setattr(prometheus, "backend_get", fake)
    _prometheus_rated(metric="max(sessions_count)")
    assert calls == ["query_range"]


@pytest.mark.parametrize(("name", "rated"), [("workers_count", True), ("workers", False)])
def test_files_that_declare_a_family_differently_leave_its_name_to_decide(tmp_path, name, rated):
    (tmp_path / "a.om").write_text(
        "\n".join([f"# TYPE {name} gauge", *_samples(name)]) + "\n# EOF\n"
    )
    (tmp_path / "b.om").write_text(f"# TYPE {name} counter\n# EOF\n")
    read, _ = metrics_from_files(
        files=[tmp_path / "a.om", tmp_path / "b.om"],
        selector=selector_parse(name),
        grid=Grid(start=START + 300, end=START + 1140, step=60),
        deadline=Deadline.after(10),
    )
    assert [s.is_rate for s in rates_apply(read)] == [rated]  # by the name, not the last file
