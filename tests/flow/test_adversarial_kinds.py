"""An Executor that names a kind its evidence does not show: the answer never states it.

The scripted Executor queries the real mini pack (a connection pool running out) and
writes a root cause bound to the pool's timeout line, but calls it memory. The Gatekeeper
demotes it (``kind_unbound``), the offline Verifier asks once for the kind's evidence, and
whatever follows, no confirmed statement, no hypothesis and no conclusion carries a kind
that no excerpt about the service shows; a fooled Verifier changes nothing of that.
"""

from __future__ import annotations

import json

from diagnosis.contracts import (
    Decision,
    ExecutorEvidenceV2,
    GatekeeperReport,
    VerifierOutput,
)
from diagnosis.evaluation import answer_stated_text
from diagnosis.flow.composer_filter import composer_input_build
from diagnosis.models import DiagnosisSession
from tests.flow.conftest import QUERY_LOGS, log_claim, verifier_json

TEXT = "payment-service 出现连接池超时日志，是本次故障的根因（类型：内存）"


def _turn(kind: str) -> dict:
    root = {**log_claim(text=TEXT, claim_type="root_cause"), "root_cause_kind": kind}
    body = {
        "answer_version": "executor_evidence_v2",
        "claims": [root],
        "hypotheses": [],
        "recommended_actions": [],
        "missing_info": [],
    }
    return {"content": json.dumps(body, ensure_ascii=False)}


def _first_attempt(session):
    return session.self_evaluation["attempts"][0]


def _kinds_stated(session) -> set[str | None]:
    composer_input = session.self_evaluation["composer_input"]
    items = composer_input["allowed_claims"] + composer_input["allowed_hypotheses"]
    return {i.get("root_cause_kind") for i in items if "连接池超时日志" in i["text"]}


def test_a_kind_no_excerpt_shows_is_demoted_and_asked_for_once(run_adversarial):
    session = run_adversarial(
        {"executor": [QUERY_LOGS, _turn("memory"), QUERY_LOGS, _turn("memory")]}
    )
    assert session.status == DiagnosisSession.Status.COMPLETED
    first = _first_attempt(session)
    codes = [f["code"] for f in first["gatekeeper"]["claims"][0]["findings"]]
    assert codes == ["kind_unbound"]
    assert first["verifier_decision"] == "RETRY"
    assert session.attempt_count == 2
    assert session.decision != "PASS"
    assert "memory" not in _kinds_stated(session)
    assert "内存" not in answer_stated_text(session.final_answer)


def test_the_kind_the_evidence_shows_passes(run_adversarial):
    session = run_adversarial({"executor": [QUERY_LOGS, _turn("resource_exhaustion")]})
    first = _first_attempt(session)
    assert first["gatekeeper"]["claims"][0]["verdict"] == "accepted"
    assert session.attempt_count == 1


def test_a_fooled_verifier_does_not_bring_the_kind_back(run_adversarial):
    session = run_adversarial(
        {
            "executor": [QUERY_LOGS, _turn("memory")],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
        }
    )
    assert session.decision == "LOW_CONFID"
    allowed = session.self_evaluation["composer_input"]["allowed_claims"]
    assert not [c for c in allowed if c["claim_id"] == "claim-1"]
    assert "内存" not in answer_stated_text(session.final_answer)


def _filtered(hypotheses, claims=(), classification="overstated", codes=()):
    output = ExecutorEvidenceV2.model_validate(
        {"claims": list(claims), "hypotheses": hypotheses, "missing_info": []}
    )
    report = GatekeeperReport.model_validate(
        {
            "parse_status": "parsed_v2",
            "claims": [
                {
                    "claim_id": c["claim_id"],
                    "verdict": "demoted",
                    "findings": [{"code": code} for code in codes],
                }
                for c in claims
            ],
        }
    )
    verifier = VerifierOutput.model_validate(
        {
            "decision": "LOW_CONFID",
            "claim_checks": [
                {"claim_id": c["claim_id"], "classification": classification} for c in claims
            ],
        }
    )
    return composer_input_build(
        question="q",
        language="zh-CN",
        decision=Decision.LOW_CONFID,
        executor_output=output,
        gatekeeper=report,
        verifier=verifier,
    ).composer_input.allowed_hypotheses


def _hypothesis(kind, basis, alternative=None, entity="svc-a"):
    return {
        "hypothesis_text": f"{entity} 可能是根因",
        "entity": entity,
        "basis": basis,
        "root_cause_kind": kind,
        "root_cause_kind_alternative": alternative,
    }


def test_a_hypothesis_keeps_only_the_kinds_its_basis_shows():
    kept = _filtered(
        [
            _hypothesis("memory", "svc-a container_cpu_usage_percent 5 → 88"),
            _hypothesis("cpu", "svc-a container_cpu_usage_percent 5 → 88", "memory"),
            _hypothesis("cpu", "svc-a cpu_usage 88, heap_used 2x", "memory"),
        ]
    )
    kinds = [(h.root_cause_kind, h.root_cause_kind_alternative) for h in kept]
    assert kinds == [(None, None), ("cpu", None), ("cpu", "memory")]
    assert [h.text for h in kept] == ["svc-a 可能是根因"] * 3  # the hypotheses stay


def test_a_claim_demoted_for_its_kind_becomes_a_hypothesis_without_it():
    claim = {
        **log_claim(text=TEXT, claim_type="root_cause"),
        "root_cause_kind": "memory",
        "root_cause_kind_alternative": "network",
    }
    (hypothesis,) = _filtered([], claims=[claim], codes=["kind_unbound"])
    assert hypothesis.root_cause_kind is None and hypothesis.root_cause_kind_alternative is None
    assert "类型" not in hypothesis.text and "连接池超时日志" in hypothesis.text


def _hypotheses_turn(*hypotheses: dict) -> dict:
    body = {
        "answer_version": "executor_evidence_v2",
        "claims": [log_claim()],
        "hypotheses": list(hypotheses),
        "recommended_actions": [],
        "missing_info": [],
    }
    return {"content": json.dumps(body, ensure_ascii=False)}


def test_a_hypothesis_kind_no_output_shows_never_reaches_the_answer(run_adversarial):
    # the session saw only the pool's logs: a disk fault is named in the basis, shown nowhere
    invented = {
        "hypothesis_text": "payment-service 的磁盘写满可能是根因（类型：磁盘）",
        "entity": "payment-service",
        "root_cause_kind": "disk",
        "basis": "payment-service 的磁盘使用率升高到 99%",
    }
    shown = {
        "hypothesis_text": "payment-service 的连接池耗尽可能是根因",
        "entity": "payment-service",
        "root_cause_kind": "resource_exhaustion",
        "basis": "payment-service 的日志报告连接池没有可用连接",
    }
    session = run_adversarial({"executor": [QUERY_LOGS, _hypotheses_turn(invented, shown)]})
    assert session.status == DiagnosisSession.Status.COMPLETED
    report = session.self_evaluation["attempts"][0]["gatekeeper"]
    flagged = [(f["code"], f["detail_params"]["hypothesis"]) for f in report["findings"]]
    # its kind is shown nowhere, and its basis's 99 % is in no output
    assert flagged == [("hypothesis_kind_unshown", 0), ("hypothesis_fact_unbound", 0)]
    hypotheses = session.self_evaluation["composer_input"]["allowed_hypotheses"]
    kinds = {h["text"]: h.get("root_cause_kind") for h in hypotheses}
    assert kinds.get("payment-service 的磁盘写满可能是根因") is None
    assert "resource_exhaustion" in kinds.values()
    assert "类型：磁盘" not in session.final_answer
    assert "99%" not in session.final_answer  # the invented basis is withheld
