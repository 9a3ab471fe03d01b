"""Abstention: where the root cause is a service nobody observed, the answer confirms no cause
and names that service as missing data or as a hypothesis (docs/scenario-pack.md §10)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scenarios" / "_generator"))
from fleet import fleet_pack_write  # noqa: E402

pytestmark = pytest.mark.django_db

ABSTENTION_PACK = ROOT / "scenarios" / "abstain" / "unobserved-callee"


def test_the_committed_abstention_pack_is_scored_as_an_abstention():
    result = pack_evaluate(path=ABSTENTION_PACK, provider="offline")
    assert result.status == "completed"
    assert result.expected_abstain
    assert result.abstained_ok, result.root_cause_candidates
    # an abstention pack is not a ranking miss: its root has no data to rank
    assert result.hit_at_1 is None and result.hit_at_3 is None


@pytest.mark.parametrize(("seed", "kind"), [(3, "latency"), (5, "errors"), (6, "cpu")])
def test_a_root_that_writes_no_data_is_never_confirmed_and_is_named(tmp_path, seed, kind):
    pack = fleet_pack_write(
        out=tmp_path / "fleet", services=12, seed=seed, kind=kind, depth=2, unobserved_root=True
    )
    assert not (pack.path / "metrics" / f"{pack.root}.om").exists()
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.status == "completed"
    assert result.abstained_ok, (pack.root, result.root_cause_candidates)


@pytest.mark.parametrize("kind", ["latency", "errors"])
def test_a_callee_without_data_may_carry_latency_or_errors_but_not_a_resource_shift(kind):
    from diagnosis.offline.localise import (
        ServiceState,
        Symptom,
        Topology,
        unobserved_callees,
    )

    topology = Topology(edges=frozenset({("a", "b"), ("a", "c")}))
    symptom = Symptom(kind=kind, strength=5.0, onset=None, signal=None)  # type: ignore[arg-type]
    passed_on = ServiceState(service="a", symptoms={kind: symptom})
    assert unobserved_callees(passed_on, topology, {"b"}) == ["b"]
    assert unobserved_callees(passed_on, topology, set()) == []
    own = ServiceState(service="a", symptoms={"resource": symptom})
    assert unobserved_callees(own, topology, {"b", "c"}) == []


@pytest.mark.parametrize("seed", [3, 5])
def test_the_leader_whose_callee_is_unobserved_is_not_stated_as_the_cause(tmp_path, seed):
    from diagnosis.models import DiagnosisSession

    pack = fleet_pack_write(
        out=tmp_path / "fleet", services=12, seed=seed, kind="latency", depth=2,
        unobserved_root=True,
    )  # fmt: skip
    result = pack_evaluate(path=pack.path, provider="offline")
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    callers = {a for a, b in pack.calls if b == pack.root}
    assert result.root_cause_candidates[0] in callers
    # the answer says the cause is undetermined and names the unobserved callee as what
    # would settle it, where an observed callee would have been found or ruled out
    assert "根因未定" in session.final_answer
    assert pack.root in session.final_answer.split("根因未定", 1)[1]
