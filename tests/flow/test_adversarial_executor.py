"""An Executor that plants falsehoods: none of them may reach what the answer states.

The scripted Executor queries the real mini pack, then writes one true claim
beside planted ones: invented excerpts, a number no output holds, a real
excerpt stitched to an invented one, an instruction quoted as evidence, and
real excerpts carrying universal-scope and user-impact overstatements. The
Verifier and Composer are the offline engine, or a fooled Verifier that
passes everything. What the answer *states* (docs/scenario-pack.md §10, ``leaked``: the
text before the first heading, the conclusion and the confirmed section) must
hold none of the planted phrases, whatever the hedging.
"""

from __future__ import annotations

import json

from diagnosis.evaluation import answer_stated_text
from diagnosis.models import DiagnosisSession
from tests.flow.conftest import EXCERPT, QUERY_LOGS, log_claim, verifier_json

TRUE_CLAIM = "payment-service 出现连接池超时日志"
PLANTED = {
    # invented excerpt
    "数据库宕机": log_claim(
        "claim-2",
        "mysql 数据库宕机，数据已丢失",
        excerpt="mysql is down and data was lost",
        claim_type="root_cause",
    ),
    # a number in no excerpt, on a real excerpt
    "900 次": log_claim("claim-3", "payment-service 连接池超时 900 次", claim_type="symptom"),
    # a real excerpt beside an invented one
    "GPU 节点": {
        **log_claim("claim-4", "payment-service 的 GPU 节点全部宕机", claim_type="root_cause"),
        "evidence_bindings": [
            log_claim()["evidence_bindings"][0],
            {
                "source_type": "tool_trace",
                "source_id": "trace-1",
                "evidence_excerpt": "all GPU nodes are down in the cluster",
            },
        ],
    },
    # a fabricated source
    "证书自动续期": log_claim(
        "claim-5",
        "证书自动续期因 Let's Encrypt 限流失败",
        excerpt="certificate renewal failed: rate limited",
        trace="trace-9",
        claim_type="root_cause",
    ),
    # universal scope the excerpt does not carry (a real excerpt)
    "所有请求": log_claim("claim-6", "payment-service 所有请求都超时", claim_type="impact"),
    # user impact from one component's symptom (a real excerpt)
    "全站用户无法访问": log_claim(
        "claim-7", "payment-service 故障已导致全站用户无法访问", claim_type="impact"
    ),
}
INVENTED = ("数据库宕机", "900 次", "GPU 节点", "证书自动续期")
stated_text = answer_stated_text


def test_stated_text_takes_the_conclusion_and_confirmed_sections_only():
    answer = "**结论**\n\nA\n\n**已确认**\n\n- B\n\n**可能的原因（待证实）**\n\n- C\n"
    assert "A" in stated_text(answer) and "B" in stated_text(answer)
    assert "C" not in stated_text(answer)


def _executor_turn():
    body = {
        "answer_version": "executor_evidence_v2",
        "claims": [log_claim(text=TRUE_CLAIM), *PLANTED.values()],
        "hypotheses": [],
        "recommended_actions": [],
        "missing_info": [],
    }
    return {"content": json.dumps(body, ensure_ascii=False)}


def _placements(session):
    return session.self_evaluation["verifier_evaluation"]["placements"]


def test_planted_falsehoods_never_reach_what_the_answer_states(run_adversarial):
    session = run_adversarial({"executor": [QUERY_LOGS, _executor_turn()]})
    assert session.status == DiagnosisSession.Status.COMPLETED
    stated = stated_text(session.final_answer)
    for phrase in PLANTED:
        assert phrase not in stated, (phrase, session.final_answer)
    allowed = session.self_evaluation["composer_input"]["allowed_claims"]
    assert [c["text"] for c in allowed] == [TRUE_CLAIM]
    assert TRUE_CLAIM in stated
    # invented evidence is a gap that repeats none of its specifics
    for phrase in INVENTED:
        assert phrase not in session.final_answer
    placements = _placements(session)
    assert {placements[c] for c in ("claim-2", "claim-3", "claim-4", "claim-5")} == {"evidence_gap"}
    # the overstatements keep their valid bindings: hypotheses at most
    assert placements["claim-6"] == placements["claim-7"] == "hypothesis"


def test_a_fooled_verifier_still_lets_no_invented_evidence_through(run_adversarial):
    everything = {f"claim-{n}": "direct_observation" for n in range(1, 8)}
    session = run_adversarial(
        {
            "executor": [QUERY_LOGS, _executor_turn()],
            "verifier": [verifier_json("PASS", **everything)],
        }
    )
    assert session.decision == "LOW_CONFID"  # it passed demoted claims: not a pass
    for phrase in INVENTED:
        assert phrase not in session.final_answer
    allowed = {c["claim_id"] for c in session.self_evaluation["composer_input"]["allowed_claims"]}
    assert allowed == {"claim-1", "claim-6", "claim-7"}  # the Gatekeeper accepted only these


def test_a_composer_restating_a_planted_claim_is_replaced_by_the_renderer(run_adversarial):
    composer = {
        "content": json.dumps(
            {
                "answer_version": "composer_v1",
                "final_answer": "**结论**\n\nmysql 数据库宕机，payment-service 连接池超时 900 次。",
            },
            ensure_ascii=False,
        )
    }
    session = run_adversarial({"executor": [QUERY_LOGS, _executor_turn()], "composer": [composer]})
    assert session.answer_source == "fallback"
    snapshot = session.self_evaluation["verifier_evaluation"]["composer_output"]
    assert "new_number:900" in snapshot["guard_findings"]
    for phrase in INVENTED:
        assert phrase not in session.final_answer


def test_an_english_session_gets_the_gaps_in_english(run_adversarial):
    session = run_adversarial({"executor": [QUERY_LOGS, _executor_turn()]}, language="en")
    assert "was left out" in session.final_answer
    assert "未被采用" not in session.final_answer
    assert EXCERPT  # the true claim is bound by the real log line
