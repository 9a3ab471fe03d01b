"""How query_metrics reads a Prometheus answer: the matrix decoded with Python's cyclic
garbage collector paused, and the collector as it was afterwards, whatever the answer."""

from __future__ import annotations

import gc
import json
from datetime import UTC, datetime

import httpx
import pytest

from diagnosis.evidence.common import Deadline, QueryWindow, ToolFailure
from diagnosis.evidence.tools.query_metrics import prometheus
from diagnosis.evidence.tools.query_metrics.query import metrics_query

WINDOW = QueryWindow.around(
    start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
)
MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "pool_active", "service": "pay"},
                "values": [[1772438400 + 60 * i, "20" if i > 100 else "5"] for i in range(121)],
            }
        ],
    },
}


def _answering(monkeypatch, status: int, body: dict) -> list[dict]:
    seen: list[dict] = []

    def get(_client, url, **kwargs):
        seen.append({"enabled": gc.isenabled(), "headers": kwargs["headers"]})
        return httpx.Response(status, content=json.dumps(body).encode())

    monkeypatch.setattr(httpx.Client, "get", get)
    return seen


def _sweep():
    return metrics_query(
        service=None,
        metric=None,
        labels={},
        window=WINDOW,
        step=None,
        deadline=Deadline.after(10),
        prometheus_url="http://prometheus:9090",
    )


def _collector_state(monkeypatch) -> list[bool]:
    """Whether the collector ran while each matrix was decoded."""
    states: list[bool] = []
    real = prometheus._series_read

    def read(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(prometheus, "_series_read", read)
    return states


def test_a_fleet_matrix_is_decoded_with_the_collector_paused_and_resumed_after(monkeypatch):
    seen = _answering(monkeypatch, 200, MATRIX)
    states = _collector_state(monkeypatch)
    assert gc.isenabled()
    output = _sweep()
    assert output.status == "ok"
    assert output.summary["series"][0]["direction"] == "up"
    assert states == [False]
    assert seen[0]["enabled"]  # not paused while waiting for Prometheus
    assert seen[0]["headers"]["Accept-Encoding"] == "identity"
    assert gc.isenabled()


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"status": "error", "error": "parse error"}),
        (200, {"status": "success", "data": {"resultType": "vector", "result": []}}),
    ],
)
def test_a_refused_answer_leaves_the_collector_running(monkeypatch, status, body):
    _answering(monkeypatch, status, body)
    with pytest.raises(ToolFailure):
        _sweep()
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off(monkeypatch):
    _answering(monkeypatch, 200, MATRIX)
    gc.disable()
    try:
        assert _sweep().status == "ok"
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_aggregation_is_named_by_the_promql_as_written_not_as_relabelled(monkeypatch):
    # In an environment whose services are labelled "app", the model writes `service`; the
    # query sent says `app`, but the series it gets back is named as the model wrote it.
    matrix = json.loads(json.dumps(MATRIX))
    del matrix["data"]["result"][0]["metric"]["__name__"]
    matrix["data"]["result"][0]["metric"] = {"app": "pay"}
    _answering(monkeypatch, 200, matrix)
    output = metrics_query(
        service=None,
        metric="max by (service) (pool_active)",
        labels={},
        window=WINDOW,
        step=None,
        deadline=Deadline.after(10),
        prometheus_url="http://prometheus:9090",
        service_label="app",
    )
    assert output.status == "ok"
    assert "max by (service) (pool_active)" in output.output
    assert "max by (app)" not in output.output
