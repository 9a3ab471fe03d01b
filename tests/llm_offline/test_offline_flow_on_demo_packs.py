"""The whole flow on each demo pack with the offline provider for every role.

Packs the engine was developed on: a regression floor, not a generalisation claim.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from diagnosis.contracts import ComposerInput
from diagnosis.evaluation import PackResult, pack_evaluate
from diagnosis.models import DiagnosisSession

from .test_offline_on_demo_packs import PACKS, PACKS_ROOT


def _flow(pack_id: str) -> tuple[None, DiagnosisSession, PackResult]:
    result = pack_evaluate(path=PACKS_ROOT / pack_id, provider="offline")
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    return None, session, result


@pytest.mark.django_db
@pytest.mark.parametrize("pack_id", PACKS)
def test_the_offline_flow_diagnoses_each_demo_pack_with_a_composed_answer(pack_id):
    _, session, result = _flow(pack_id)
    if os.environ.get("OFFLINE_DEBUG"):
        target = Path(os.environ["OFFLINE_DEBUG"]) / f"flow-{pack_id}.json"
        target.write_text(
            json.dumps(
                {
                    "decision": session.decision,
                    "answer_source": session.answer_source,
                    "final_answer": session.final_answer,
                    "candidates": result.root_cause_candidates,
                    "must_mention": [result.must_mention_hits, result.must_mention],
                    "leaked": result.leaked_phrases,
                    "self_evaluation": session.self_evaluation,
                },
                ensure_ascii=False,
                indent=1,
            ),
            encoding="utf-8",
        )
    assert session.status == "completed", session.error
    assert session.answer_source == "composer"
    assert result.unsupported_in_answer == 0
    assert result.leaked == 0, result.leaked_phrases
    assert result.hit_at_1, result.root_cause_candidates
    assert result.must_mention_hits == result.must_mention
    ComposerInput.model_validate(session.self_evaluation["composer_input"])


@pytest.mark.django_db
@pytest.mark.parametrize("pack_id", ["payment-pool-saturation", "inventory-slow-dependency"])
def test_a_service_called_a_chain_reaction_is_not_also_sent_for_root_cause_investigation(
    pack_id,
):
    _, session, _ = _flow(pack_id)
    ci = ComposerInput.model_validate(session.self_evaluation["composer_input"])
    secondary = {h.entity for h in ci.allowed_hypotheses if "连锁反应" in h.text and h.entity}
    assert secondary, "the pack has downstream services"
    for action in ci.recommended_actions:
        for service in secondary:
            assert f"排除 {service} 作为根因" not in action.reason, action
