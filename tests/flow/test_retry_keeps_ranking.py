"""A RETRY that asks again for a kind's evidence does not move the ranking.

Generated systems (scenarios/_generator/fleet.py: a disk or pool root whose own series and
logs make the offline engine state it as the root cause, random names, one renamed). The
Verifier (scripted, as a model would) finds the root-cause claim overstated and asks once
for the evidence of its kind; the offline engine does everything else. The second attempt
may leave the flagged claim out, but the root it named still leads the candidates: asking
again loses none of the first attempt's evidence.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.flow import selection
from diagnosis.llm.base import Role
from diagnosis.llm.scripted import ScriptedProvider
from diagnosis.models import DiagnosisSession
from diagnosis.offline import OfflineEngine
from tests.support.pack_transforms import services_rename

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

KIND_RETRY = {
    "content": json.dumps(
        {
            "verifier_version": "verifier_v2",
            "decision": "RETRY",
            "claim_checks": [
                {"claim_id": "claim-1", "classification": "overstated", "reason": "kind"}
            ],
            "retry_request": {
                "missing_evidence": ["根因类型的证据"],
                "instructions": "请引用显示该类型的指标或日志",
            },
            "summary": "the kind needs its evidence",
        }
    )
}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "seed", "renamed"),
    [("disk", 1, False), ("disk", 2, True), ("disk", 5, False), ("resource_exhaustion", 1, False)],
)
def test_a_retry_for_a_kinds_evidence_keeps_the_root_first(
    tmp_path, monkeypatch, kind, seed, renamed
):
    pack = fleet_pack_write(
        out=tmp_path / "p", services=30, seed=seed, kind=kind, depth=1 + seed % 3, lag=seed % 2
    )
    if renamed:
        services_rename(pack=pack.path, rng=random.Random(seed))
    root = json.loads((pack.path / "scenario.yaml").read_text("utf-8"))["expected"][
        "root_cause_service"
    ]
    provider = ScriptedProvider({"verifier": [KIND_RETRY]}, fallback=OfflineEngine())
    monkeypatch.setattr(
        selection, "agents_for_session", lambda **kwargs: dict.fromkeys(Role, provider)
    )
    result = pack_evaluate(path=pack.path)
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    first = session.self_evaluation["attempts"][0]["structured_output"]["claims"][0]
    assert (first["claim_id"], first["claim_type"], first["entity"]) == (
        "claim-1",
        "root_cause",
        root,
    )
    assert session.attempt_count == 2
    assert result.root_cause_candidates[:1] == [root]
