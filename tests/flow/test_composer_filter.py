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
