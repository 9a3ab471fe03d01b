"""A series is compared as a per-second rate when it counts up: by the type its OpenMetrics
file declares (``# TYPE``), and only where none is declared by its name's suffix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from diagnosis.evidence.common import Deadline
from diagnosis.evidence.tools.query_metrics import prometheus
from diagnosis.evidence.tools.query_metrics.files import metrics_from_files, rates_apply
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


def _prometheus_answers(metadata: httpx.Response) -> tuple[list[str], Any]:
    calls: list[str] = []

    def backend_get(*, url: str, **_kwargs: Any) -> httpx.Response:
        calls.append(url.rsplit("/", 1)[-1])
        if url.endswith("/metadata"):
            return metadata
        values = [[START + 60 * i, str(100 + 5 * i)] for i in range(20)]
        metric = {"__name__": "sessions_count", "service": "pay"}
        body = {"resultType": "matrix", "result": [{"metric": metric, "values": values}]}
        return httpx.Response(200, json={"status": "success", "data": body})

    return calls, backend_get


@pytest.mark.parametrize(
    ("metadata", "rated"),
    [
        (httpx.Response(200, json={"status": "success", "data": {}}), True),  # backfilled only
        (
            httpx.Response(
                200, json={"status": "success", "data": {"sessions_count": [{"type": "gauge"}]}}
            ),
            False,
        ),
        (httpx.Response(500, text="boom"), True),  # no metadata: the name decides
        (  # targets that disagree say nothing either
            httpx.Response(
                200,
                json={
                    "status": "success",
                    "data": {"sessions_count": [{"type": "gauge"}, {"type": "counter"}]},
                },
            ),
            True,
        ),
    ],
)
def test_prometheus_series_take_their_type_from_its_metadata_when_it_has_one(
    monkeypatch, metadata, rated
):
    monkeypatch.setattr(prometheus, "_metadata", {})
    calls, fake = _prometheus_answers(metadata)
    monkeypatch.setattr(prometheus, "backend_get", fake)
    grid = Grid(start=START + 300, end=START + 1140, step=60)
    for _ in range(2):
        read, _notes = prometheus.metrics_from_prometheus(
            base_url="http://prom.test",
            token_env="",
            query="sessions_count",
            grid=grid,
            deadline=Deadline.after(10),
        )
        assert [s.is_rate for s in rates_apply(read)] == [rated]
    assert calls == ["query_range", "metadata", "query_range"]  # metadata read once a minute
