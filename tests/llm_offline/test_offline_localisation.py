"""Localisation along the calls, from the call edges a fleet's own metrics name."""

from __future__ import annotations

from diagnosis.evidence import vocab
from diagnosis.offline.analysis import Call
from diagnosis.offline.localise import _ancestors, _path, topology_build


def _metrics_call(labels: list[dict[str, str]]) -> Call:
    series = [
        {"service": item.get("service", ""), "metric": "calls_total", "labels": item, "line": ""}
        for item in labels
    ]
    return Call(
        tool_name="query_metrics",
        arguments={},
        invocation_id=1,
        trace_ref="trace-1",
        status="ok",
        output="",
        summary={"series": series},
    )


def test_caller_and_callee_labels_in_any_common_naming_become_call_edges():
    call = _metrics_call(
        [
            {"source_workload": "web", "destination_workload": "cart"},
            {"client": "cart", "server": "db"},
            {"src": "web", "dst": "search"},
            {"caller_service": "search", "callee_service": "index"},
        ]
    )
    topology = topology_build(calls=[call])
    assert topology.edges == {
        ("web", "cart"),
        ("cart", "db"),
        ("web", "search"),
        ("search", "index"),
    }


def test_labels_that_only_look_alike_are_not_paired():
    assert vocab.call_label_pairs({"source": "web", "destination_port": "8080"}) == []
    assert vocab.call_label_pairs({"source_app": "web", "destination_workload": "cart"}) == []


def test_declared_edges_and_label_edges_add_up():
    call = _metrics_call([{"source": "web", "destination": "cart"}])
    topology = topology_build(declared=[("cart", "db")], calls=[call])
    assert topology.callees("cart") == ["db"]
    assert topology.callers("cart") == ["web"]


def test_a_call_cycle_ends_the_walk_up_the_callers() -> None:
    links = {("a", "b"): 1.0, ("b", "c"): 1.0, ("c", "a"): 1.0, ("web", "a"): 0.5}
    found = _ancestors(links, "c")
    assert set(found) == {"a", "b", "web"}
    assert found["web"] == 0.5
    assert _path(links, "c", ["web"]) == ["web", "a", "b", "c"]
