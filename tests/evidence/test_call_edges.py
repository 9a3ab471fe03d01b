"""An environment's known call edges: a pack's topology.json, a live environment's query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from diagnosis.evidence import topology
from diagnosis.evidence.common import ToolFailure
from diagnosis.evidence.tools.query_metrics.series import RawSeries
from diagnosis.models import Environment

pytestmark = pytest.mark.django_db

WINDOW = {
    "start": datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
    "end": datetime(2026, 3, 2, 10, 40, tzinfo=UTC),
}


def _live(**fields) -> Environment:
    return Environment.objects.create(
        slug="prod",
        name="prod",
        kind=Environment.Kind.LIVE,
        prometheus_url="http://prom:9090",
        **fields,
    )


def test_a_scenario_environment_gets_the_edges_its_pack_declares(tmp_path, pack_dir):
    (pack_dir / "topology.json").write_text(
        '{"calls": [{"caller": "gateway", "callee": "pay"}]}', encoding="utf-8"
    )
    environment = Environment.objects.create(slug="s", name="s", pack_path=str(pack_dir))
    assert topology.environment_call_edges(environment=environment, **WINDOW) == (
        ("gateway", "pay"),
    )


def test_a_live_environment_reads_its_edges_from_the_configured_query(settings, monkeypatch):
    settings.CALL_EDGES_QUERY = "sum by (source_workload, destination_workload) (rate(x[5m]))"
    asked = []

    def answer(**kwargs):
        asked.append(kwargs["query"])
        labels = [
            {"source_workload": "web", "destination_workload": "cart"},
            {"source_workload": "cart", "destination_workload": "db"},
            {"source_workload": "web"},
        ]
        return [RawSeries(name="", labels=item, points=[(0.0, 1.0)]) for item in labels], []

    monkeypatch.setattr(topology, "metrics_from_prometheus", answer)
    edges = topology.environment_call_edges(environment=_live(), **WINDOW)
    assert edges == (("cart", "db"), ("web", "cart"))
    assert asked == [settings.CALL_EDGES_QUERY]


def test_a_failing_edge_query_leaves_the_diagnosis_without_edges(settings, monkeypatch):
    settings.CALL_EDGES_QUERY = "up"

    def fail(**kwargs):
        raise ToolFailure("Prometheus rejected the query")

    monkeypatch.setattr(topology, "metrics_from_prometheus", fail)
    assert topology.environment_call_edges(environment=_live(), **WINDOW) == ()


def test_without_a_configured_query_a_live_environment_has_no_declared_edges(settings):
    settings.CALL_EDGES_QUERY = ""
    assert topology.environment_call_edges(environment=_live(), **WINDOW) == ()


@pytest.mark.parametrize("minutes", [1, 40, 24 * 60])
def test_the_edge_query_is_evaluated_over_the_sessions_window_not_the_wall_clock(
    settings, monkeypatch, minutes
):
    settings.CALL_EDGES_QUERY = "sum by (source, destination) (rate(calls_total[5m]))"
    grids = []

    def answer(**kwargs):
        grids.append(kwargs["grid"])
        return [], []

    monkeypatch.setattr(topology, "metrics_from_prometheus", answer)
    end = WINDOW["end"]
    start = end - timedelta(minutes=minutes)
    topology.environment_call_edges(environment=_live(), start=start, end=end)
    (grid,) = grids
    assert grid.end == end.timestamp()  # the last evaluation at the window's end
    assert 0 <= grid.start - start.timestamp() < grid.step  # from the window's start
    assert 1 <= len(grid.times()) <= topology.EDGE_QUERY_POINTS
