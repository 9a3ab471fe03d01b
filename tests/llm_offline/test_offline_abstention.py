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
