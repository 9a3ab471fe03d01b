"""Localisation from callers' client-side latency against callees' server-side latency: a series
of the caller's labelled with the callee is the edge, and the comparison says who explains whom."""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.offline.analysis import MetricSignal, Suspect
from diagnosis.offline.localise import client_call_edges, client_gaps, service_states
from tests.support.pack_transforms import services_rename

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write


def _latency(labels: dict[str, str]) -> MetricSignal:
    fields = {f: None for f in MetricSignal.__dataclass_fields__}
    return MetricSignal(**{**fields, "kind": "latency", "labels": labels})  # type: ignore[arg-type]


def test_a_client_series_naming_one_known_service_as_a_whole_token_is_an_edge():
    known = ["web", "pay-db", "pay-db-replica", "cart"]
    series = [
        _latency({"service": "web", "server_address": "pay-db.prod.svc:5432"}),
        _latency({"service": "web", "peer_service": "pay-db-replica-x"}),  # not a whole token
        _latency({"service": "web", "upstream": "cart,pay-db"}),  # two services: ambiguous
        _latency({"service": "web", "peer_service": "web"}),  # itself
    ]
    assert client_call_edges([Suspect(service="web", metrics=series)], known) == {("web", "pay-db")}


def _pack(tmp_path: Path, name: str, **options: object):
    common = {"services": 30, "depth": 2, "topology": False, "client_latency": True}
    return fleet_pack_write(out=tmp_path / name, **{**common, **options})


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "kind"), [(1, "latency"), (3, "latency"), (4, "cpu")])
def test_without_topology_the_client_latency_localises_the_root(tmp_path, seed, kind):
    pack = _pack(tmp_path, "client", seed=seed, kind=kind)
    assert not (pack.path / "topology.json").exists()
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.root_cause_candidates[:1] == [pack.root]


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2, 5])
def test_a_client_wait_that_rose_over_a_flat_callee_is_not_that_callee(tmp_path, seed):
    """A network root: its client latency to its first callee rose, that callee's own side is
    flat. The root (the caller) ranks first; the callee never leads, and the basis names the
    way between them rather than the callee."""
    pack = _pack(tmp_path, "gap", seed=seed, kind="network")
    callee = min(b for a, b in pack.calls if a == pack.root)
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.root_cause_candidates[:1] == [pack.root]
    assert callee not in result.root_cause_candidates[:1]


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "kind"), [(2, "latency"), (5, "network")])
def test_renaming_every_service_changes_nothing(tmp_path, seed, kind):
    pack = _pack(tmp_path, "named", seed=seed, kind=kind)
    renamed = tmp_path / "renamed"
    shutil.copytree(pack.path, renamed)
    services_rename(pack=renamed, rng=random.Random(seed))
    before = pack_evaluate(path=pack.path, provider="offline")
    after = pack_evaluate(path=renamed, provider="offline")
    assert after.expected_root_cause != before.expected_root_cause  # really renamed
    assert before.hit_at_1 and after.hit_at_1
    assert before.root_cause_kind == after.root_cause_kind


def _risen(labels: dict[str, str]) -> MetricSignal:
    fields = {f: None for f in MetricSignal.__dataclass_fields__}
    values = {"kind": "latency", "labels": labels, "direction": "up", "anomaly": 10.0}
    values |= {
        "window_mean": 0.9,
        "window_level": 0.9,
        "baseline_median": 0.1,
        "metric": "m",
        "sustained_points": 5,
    }
    return MetricSignal(**{**fields, **values})  # type: ignore[arg-type]


def test_a_risen_client_wait_over_a_flat_observed_callee_is_a_gap_not_the_callee():
    client = _risen({"service": "web", "peer_service": "pay-db"})
    web = Suspect(service="web", metrics=[client], has_data=True)
    flat = Suspect(service="pay-db", has_data=True)
    slow = Suspect(service="pay-db", metrics=[_risen({"service": "pay-db"})], has_data=True)
    assert client_gaps(web, service_states([web, flat]), {"web", "pay-db"}) == ["pay-db"]
    assert client_gaps(web, service_states([web, slow]), {"web", "pay-db"}) == []
    assert client_gaps(web, service_states([web, flat]), {"web"}) == []  # unobserved: unknown
