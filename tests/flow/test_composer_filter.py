"""The seed's filtering table, one test per row, plus REJECT and demoted claims."""

import pytest

from diagnosis.contracts import (
    Classification,
    Decision,
    ExecutorEvidenceV2,
    GatekeeperReport,
    VerifierOutput,
    Wording,
)
from diagnosis.flow.composer_filter import composer_input_build


def _output(*claims, hypotheses=()):
    return ExecutorEvidenceV2.model_validate(
        {
            "claims": [
                {
                    "claim_id": cid,
                    "claim_type": ctype,
                    "claim_text": text,
                    "entity": "payment-service",
                    "support_level": "direct",
                    "evidence_bindings": [],
                }
                for cid, ctype, text in claims
            ],
            "hypotheses": [{"hypothesis_text": h, "basis": "runbook"} for h in hypotheses],
            "missing_info": ["没有 mysql 慢查询日志"],
            "recommended_actions": [{"action_text": "检查连接池配置", "reason": "确认上限"}],
        }
    )


def _gatekeeper(**verdicts):
    claims = [
        {"claim_id": cid, "verdict": verdict, "valid_bindings": int(verdict == "accepted")}
        for cid, verdict in verdicts.items()
    ]
    return GatekeeperReport.model_validate({"parse_status": "parsed_v2", "claims": claims})


def _verifier(decision, **classes):
    return VerifierOutput.model_validate(
        {
            "decision": decision,
            "claim_checks": [
                {"claim_id": cid, "classification": value} for cid, value in classes.items()
            ],
        }
    )


def _build(decision, classification, verdict="accepted", hypotheses=()):
    return composer_input_build(
        question="payment-service 为什么超时",
        language="zh-CN",
        decision=decision,
        executor_output=_output(
            ("c1", "root_cause", "payment-service 连接池耗尽"), hypotheses=hypotheses
        ),
        gatekeeper=_gatekeeper(c1=verdict),
        verifier=_verifier(decision.value, c1=classification),
    )


def test_a_direct_observation_becomes_an_allowed_claim_with_definite_wording():
    result = _build(Decision.PASS, "direct_observation")
    [claim] = result.composer_input.allowed_claims
    assert claim.text == "payment-service 连接池耗尽"
    assert claim.wording == Wording.DEFINITE
    assert result.placements == {"c1": "allowed_claim"}


def test_a_reasonable_inference_becomes_an_allowed_claim_with_bounded_wording():
    result = _build(Decision.PASS, "reasonable_inference")
    [claim] = result.composer_input.allowed_claims
    assert claim.wording == Wording.BOUNDED


def test_an_overstated_claim_becomes_a_hypothesis():
    result = _build(Decision.LOW_CONFID, "overstated")
    assert result.composer_input.allowed_claims == []
    assert [h.text for h in result.composer_input.allowed_hypotheses] == [
        "payment-service 连接池耗尽"
    ]


@pytest.mark.parametrize("classification", ["unsupported", "external_unknown", "contradicted"])
def test_unsupported_unknown_and_contradicted_claims_become_missing_info(classification):
    result = _build(Decision.LOW_CONFID, classification)
    ci = result.composer_input
    assert ci.allowed_claims == [] and ci.allowed_hypotheses == []
    assert "未能证实：payment-service 连接池耗尽" in ci.missing_info


def test_reject_empties_hypotheses_but_keeps_direct_observations():
    result = composer_input_build(
        question="q",
        language="zh-CN",
        decision=Decision.REJECT,
        executor_output=_output(
            ("c1", "symptom", "payment-service 出现超时日志"),
            ("c2", "root_cause", "mysql 宕机"),
            hypotheses=["可能是连接泄漏"],
        ),
        gatekeeper=_gatekeeper(c1="accepted", c2="accepted"),
        verifier=_verifier("REJECT", c1="direct_observation", c2="overstated"),
    )
    ci = result.composer_input
    assert [c.claim_id for c in ci.allowed_claims] == ["c1"]
    assert ci.allowed_hypotheses == []
    assert "未能证实：mysql 宕机" in ci.missing_info


def test_a_claim_the_gatekeeper_demoted_is_never_allowed_whatever_the_verifier_said():
    result = _build(Decision.PASS, "direct_observation", verdict="demoted")
    assert result.composer_input.allowed_claims == []
    assert result.disagreements == [
        {"claim_id": "c1", "verifier": "direct_observation", "gatekeeper": "demoted"}
    ]


def test_a_claim_without_a_claim_check_is_treated_as_unsupported():
    result = composer_input_build(
        question="q",
        language="zh-CN",
        decision=Decision.PASS,
        executor_output=_output(("c1", "symptom", "payment-service 出现超时日志")),
        gatekeeper=_gatekeeper(c1="accepted"),
        verifier=_verifier("PASS"),
    )
    assert result.composer_input.allowed_claims == []
    assert result.placements["c1"] == "missing_info"


def test_without_a_verifier_nothing_is_allowed():
    result = composer_input_build(
        question="q",
        language="en",
        decision=Decision.LOW_CONFID,
        executor_output=_output(("c1", "symptom", "timeouts in payment-service")),
        gatekeeper=_gatekeeper(c1="accepted"),
        verifier=None,
    )
    assert result.composer_input.allowed_claims == []
    assert "Not confirmed: timeouts in payment-service" in result.composer_input.missing_info


def test_executor_hypotheses_actions_and_gaps_pass_through():
    result = _build(Decision.LOW_CONFID, "direct_observation", hypotheses=["可能是连接泄漏"])
    ci = result.composer_input
    assert [h.text for h in ci.allowed_hypotheses] == ["可能是连接泄漏"]
    assert ci.missing_info == ["没有 mysql 慢查询日志"]
    assert [(a.text, a.reason) for a in ci.recommended_actions] == [("检查连接池配置", "确认上限")]


def test_classification_enumeration_is_the_six_of_the_contract():
    assert {c.value for c in Classification} == {
        "direct_observation",
        "reasonable_inference",
        "overstated",
        "unsupported",
        "external_unknown",
        "contradicted",
    }


# --- where a demoted claim may go (issue 14) ---------------------------------------------


def _demoted(cid, *codes, facts=()):
    return {
        "claim_id": cid,
        "verdict": "demoted",
        "valid_bindings": 0,
        "findings": [{"code": code, "fact": fact} for code in codes for fact in facts or [None]],
    }


def _with(claims, results, checks, decision=Decision.LOW_CONFID, hypotheses=()):
    return composer_input_build(
        question="frontend 为什么挂了",
        language="zh-CN",
        decision=decision,
        executor_output=_output(*claims, hypotheses=hypotheses),
        gatekeeper=GatekeeperReport.model_validate(
            {"parse_status": "parsed_v2", "claims": results}
        ),
        verifier=_verifier(decision.value, **checks),
    )


PLANTED = "集群中的 GPU 节点 gpu-node-7 全部宕机，所有 GPU 工作负载都无法运行"


@pytest.mark.parametrize(
    "code",
    [
        "excerpt_not_found",
        "unknown_source_id",
        "number_mismatch",
        "claim_fact_unbound",
        "invalid_binding_beside_valid",
        "excerpt_is_instruction",
        "no_bindings",
    ],
)
@pytest.mark.parametrize("classification", ["overstated", "direct_observation", "unsupported"])
def test_a_claim_demoted_for_invented_evidence_is_a_gap_without_its_specifics(code, classification):
    result = _with(
        [("c1", "root_cause", PLANTED)],
        [_demoted("c1", code, facts=["gpu-node-7"])],
        {"c1": classification},
    )
    ci = result.composer_input
    assert ci.allowed_claims == [] and ci.allowed_hypotheses == []
    assert result.placements == {"c1": "evidence_gap"}
    [gap, *_rest] = ci.missing_info
    assert gap.startswith("一条关于原因的说法未被采用")
    for specific in ("gpu-node-7", "GPU", "宕机", "全部"):
        assert specific not in " ".join(ci.missing_info)


def test_the_gap_says_which_evidence_is_missing_in_english_too():
    result = composer_input_build(
        question="why is frontend down",
        language="en",
        decision=Decision.LOW_CONFID,
        executor_output=_output(("c1", "impact", "all users of frontend-7 cannot log in")),
        gatekeeper=GatekeeperReport.model_validate(
            {"parse_status": "parsed_v2", "claims": [_demoted("c1", "claim_fact_unbound")]}
        ),
        verifier=_verifier("LOW_CONFID", c1="overstated"),
    )
    [gap, _executor_gap] = result.composer_input.missing_info
    assert gap == (
        "A statement about the impact was left out: the numbers, times or names it states are "
        "not in the tool output it cites; logs or metrics that hold them are needed."
    )


def test_two_claims_with_the_same_missing_evidence_give_one_gap():
    result = _with(
        [("c1", "symptom", "a-1 超时 900 次"), ("c2", "symptom", "b-2 超时 800 次")],
        [_demoted("c1", "excerpt_not_found"), _demoted("c2", "excerpt_not_found")],
        {"c1": "unsupported", "c2": "unsupported"},
    )
    gaps = [m for m in result.composer_input.missing_info if "未被采用" in m]
    assert len(gaps) == 1


def test_an_overstated_claim_with_valid_bindings_becomes_a_hypothesis_with_its_basis():
    output = ExecutorEvidenceV2.model_validate(
        {
            "claims": [
                {
                    "claim_id": "c1",
                    "claim_type": "impact",
                    "claim_text": "frontend 故障已导致全站用户无法访问",
                    "entity": "frontend",
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": "trace-1",
                            "evidence_excerpt": "Back-off restarting failed container",
                        }
                    ],
                }
            ]
        }
    )
    result = composer_input_build(
        question="q",
        language="zh-CN",
        decision=Decision.LOW_CONFID,
        executor_output=output,
        gatekeeper=_gatekeeper(c1="accepted"),
        verifier=_verifier("LOW_CONFID", c1="overstated"),
    )
    [hypothesis] = result.composer_input.allowed_hypotheses
    assert hypothesis.claim_id == "c1"
    assert hypothesis.basis == "Back-off restarting failed container"


def test_a_demoted_claim_whose_bindings_hold_may_be_a_hypothesis_only_when_overstated():
    runbook_only = {
        "claim_id": "c1",
        "verdict": "demoted",
        "valid_bindings": 1,
        "findings": [{"code": "knowledge_only_binding"}],
    }
    overstated = _with([("c1", "root_cause", "连接池耗尽")], [runbook_only], {"c1": "overstated"})
    assert [h.claim_id for h in overstated.composer_input.allowed_hypotheses] == ["c1"]
    unsupported = _with([("c1", "root_cause", "连接池耗尽")], [runbook_only], {"c1": "unsupported"})
    assert unsupported.composer_input.allowed_hypotheses == []
    assert "未能证实：连接池耗尽" in unsupported.composer_input.missing_info


def test_the_executors_own_hypotheses_come_first_and_carry_no_claim_id():
    result = _with(
        [("c1", "root_cause", "连接池耗尽")],
        [{"claim_id": "c1", "verdict": "accepted", "valid_bindings": 1}],
        {"c1": "overstated"},
        hypotheses=["慢查询占满连接"],
    )
    assert [(h.text, h.claim_id) for h in result.composer_input.allowed_hypotheses] == [
        ("慢查询占满连接", None),
        ("连接池耗尽", "c1"),
    ]
