"""Localisation without call-edge metrics or a topology: the calls the callers' own logs record
("upstream X timed out", "Call to X failed"), X a service of the environment as a whole token."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.offline.analysis import LogSignal, Suspect
from diagnosis.offline.localise import log_call_edges

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write


def _log(kind: str, mentions: list[str]) -> LogSignal:
    fields = {f: None for f in LogSignal.__dataclass_fields__}
    return LogSignal(**{**fields, "kind": kind, "mentions": mentions, "injected": False})  # type: ignore[arg-type]


def test_a_failed_call_naming_a_known_service_is_an_edge_from_the_line_writer():
    caller = Suspect(service="web", logs=[_log("dependency", ["pay-db", "not-a-service"])])
    quiet = Suspect(service="pay-db", logs=[_log("code", ["web"])])
    assert log_call_edges([caller, quiet], ["web", "pay-db"]) == {("web", "pay-db")}
    assert log_call_edges([caller], ["web"]) == frozenset()


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "kind"), [(1, "latency"), (3, "latency"), (2, "errors")])
def test_without_topology_or_edge_metrics_the_callers_logs_localise_the_root(tmp_path, seed, kind):
    common = {"services": 30, "seed": seed, "kind": kind, "depth": 2, "topology": False}
    pack = fleet_pack_write(out=tmp_path / "logs", caller_logs=True, **common)
    assert not (pack.path / "topology.json").exists()
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.root_cause_candidates[:1] == [pack.root]
    callers = {a for a, b in pack.calls if b == pack.root}
    assert not callers & set(result.root_cause_candidates[:1])
