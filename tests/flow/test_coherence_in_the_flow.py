"""The coherence check in the flow: an incoherent Composer answer is re-rendered, the
findings recorded for reviewers, and the badge, opening and API read one certainty."""

from __future__ import annotations

import pytest

from tests.flow.conftest import QUERY_LOGS, composer_json, executor_json, log_claim, verifier_json

ROOT = "payment-service 的连接池耗尽"


def _script(classification: str, answer: str) -> dict:
    claim = log_claim(text=ROOT + "，出现连接池超时日志", claim_type="root_cause")
    return {
        "executor": [QUERY_LOGS, executor_json(claim)],
        "verifier": [verifier_json("PASS", **{"claim-1": classification})],
        "composer": [composer_json(answer)],
    }


@pytest.mark.parametrize(
    ("language", "answer"),
    [
        ("zh-CN", "**结论**\n\n初步判断（尚待证实）：可能：根因已确认：" + ROOT + "。\n"),
        ("en", "**Conclusion**\n\nPreliminary finding (unconfirmed): Likely: " + ROOT + ".\n"),
    ],
)
def test_a_stacked_hedge_answer_is_re_rendered_and_its_findings_recorded(
    run_scripted, language, answer
):
    session = run_scripted(_script("direct_observation", answer), language=language)
    snapshot = session.self_evaluation["verifier_evaluation"]["composer_output"]
    assert session.answer_source == "fallback"
    assert snapshot["status"] == "incoherent"
    assert {f["code"] for f in snapshot["composer_coherence"]} >= {"badge_conclusion_mismatch"}
    assert snapshot["coherence_findings"] == []
    assert snapshot["certainty"] == "confirmed"
    assert session.root_cause_status == "confirmed"
    assert "可能：" not in session.final_answer and "Likely:" not in session.final_answer


def test_an_inferred_root_cause_has_its_own_badge_and_a_one_hedge_opening(run_scripted):
    answer = "**结论**\n\n初步判断（尚待证实）：" + ROOT + "。\n"
    session = run_scripted(_script("reasonable_inference", answer))
    snapshot = session.self_evaluation["verifier_evaluation"]["composer_output"]
    assert session.answer_source == "composer", snapshot
    assert snapshot["coherence_findings"] == []
    assert session.root_cause_status == snapshot["certainty"] == "inferred"


def test_a_confirmed_badge_with_a_hedged_opening_is_never_shown(run_scripted):
    answer = "**结论**\n\n可能是" + ROOT + "。\n"
    session = run_scripted(_script("direct_observation", answer))
    assert session.answer_source == "fallback"
    assert session.final_answer.split("\n\n")[1].startswith("根因已确认")
