"""The whole flow with scripted agents: routing, filter, guard, fallback, audit snapshot."""

import json

import pytest

from diagnosis.contracts import VerifierPayload
from diagnosis.llm.base import Role
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from tests.flow.conftest import (
    EXCERPT,
    QUERY_LOGS,
    composer_json,
    executor_json,
    log_claim,
    verifier_json,
)

GOOD_ANSWER = "**结论**\n\npayment-service 出现连接池超时日志。\n"


def test_a_passing_session_completes_with_the_composer_answer_and_a_full_audit_trail(
    run_scripted,
):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json(GOOD_ANSWER)],
        }
    )
    assert session.status == DiagnosisSession.Status.COMPLETED
    assert session.decision == "PASS"
    assert session.answer_source == "composer"
    answer, _, looked_at = session.final_answer.rpartition("\n\n")
    assert answer + "\n" == GOOD_ANSWER
    assert (
        looked_at
        == "_查看的时间窗口：2026-03-02 10:10 至 10:40（UTC），与其之前的基线时段比较。_\n"
    )
    assert session.executor_output_parse_status == "parsed_v2"
    [invocation] = ToolInvocation.objects.filter(session=session)
    assert (invocation.trace_ref, invocation.tool_name, invocation.status) == (
        "trace-1",
        "query_logs",
        "ok",
    )
    evaluation = session.self_evaluation
    assert evaluation["gatekeeper"]["counts"] == {"claims": 1, "accepted": 1, "demoted": 0}
    snapshot = evaluation["verifier_evaluation"]["composer_output"]
    assert snapshot == {
        "status": "ok",
        "source": "composer",
        "final_answer": GOOD_ANSWER,
        "guard_findings": [],
        "composer_coherence": [],
        "coherence_findings": [],
        "certainty": "undetermined",
    }
    assert [c["claim_id"] for c in evaluation["composer_input"]["allowed_claims"]] == ["claim-1"]
    assert len(evaluation["attempts"]) == 1
    roles = list(LLMCall.objects.filter(session=session).values_list("role", flat=True))
    assert roles.count("planner") == 1 and roles.count("verifier") == 1
    assert session.llm_usage["total"]["calls"] == len(roles)
    stages = [e.stage for e in session.events.filter(kind="stage")]
    assert stages == ["queued", "planner", "executor", "gatekeeper", "verifier", "composer", "done"]


@pytest.mark.parametrize(
    "classification,placement",
    [
        ("direct_observation", "allowed_claim"),
        ("reasonable_inference", "allowed_claim"),
        ("overstated", "hypothesis"),
        ("unsupported", "missing_info"),
        ("external_unknown", "missing_info"),
        ("contradicted", "missing_info"),
    ],
)
def test_each_verifier_classification_lands_where_the_seed_table_says(
    run_scripted, classification, placement
):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("LOW_CONFID", **{"claim-1": classification})],
        }
    )
    evaluation = session.self_evaluation
    assert evaluation["verifier_evaluation"]["placements"] == {"claim-1": placement}
    ci = evaluation["composer_input"]
    allowed = [c["claim_id"] for c in ci["allowed_claims"]]
    assert allowed == (["claim-1"] if placement == "allowed_claim" else [])
    if placement == "allowed_claim":
        wording = "definite" if classification == "direct_observation" else "bounded"
        assert ci["allowed_claims"][0]["wording"] == wording
    if placement == "hypothesis":
        assert "payment-service 出现连接池超时日志" in [h["text"] for h in ci["allowed_hypotheses"]]
    if placement == "missing_info":
        assert "未能证实：payment-service 出现连接池超时日志" in ci["missing_info"]


def test_reject_drops_every_hypothesis_but_keeps_direct_observations(run_scripted):
    session = run_scripted(
        {
            "executor": [
                QUERY_LOGS,
                executor_json(log_claim(), hypotheses=["mysql 可能宕机了"]),
            ],
            "verifier": [verifier_json("REJECT", **{"claim-1": "direct_observation"})],
        }
    )
    ci = session.self_evaluation["composer_input"]
    assert session.decision == "REJECT"
    assert ci["allowed_hypotheses"] == []
    assert [c["claim_id"] for c in ci["allowed_claims"]] == ["claim-1"]
    assert "mysql 可能宕机了" not in session.final_answer


def test_a_composer_answer_that_adds_a_number_is_replaced_by_the_fallback(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json(GOOD_ANSWER + "\n错误率达到 87%。\n")],
        }
    )
    snapshot = session.self_evaluation["verifier_evaluation"]["composer_output"]
    assert snapshot["status"] == "guard_failed"
    assert "new_number:87%" in snapshot["guard_findings"]
    assert session.answer_source == "fallback"
    assert "87%" not in session.final_answer
    assert "payment-service 出现连接池超时日志" in session.final_answer


@pytest.mark.parametrize(
    "raw",
    ["这不是 JSON", '{"answer_version": "composer_v1"}', "[1, 2]", ""],
    ids=["prose", "missing-field", "array", "empty"],
)
def test_a_malformed_composer_answer_falls_back_to_the_renderer(run_scripted, raw):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [{"content": raw}],
        }
    )
    snapshot = session.self_evaluation["verifier_evaluation"]["composer_output"]
    assert snapshot["status"] in {"malformed", "error"}
    assert snapshot["source"] == "fallback"
    assert session.answer_source == "fallback"
    assert session.status == "completed"
    assert not session.final_answer.lstrip().startswith(("{", "["))


def test_a_v1_user_facing_answer_is_never_shown(run_scripted):
    secret = "根因已确认：数据库宕机，请立即重启 mysql"
    session = run_scripted(
        {
            "executor": [
                QUERY_LOGS,
                executor_json(
                    log_claim(),
                    version="executor_evidence_v1",
                    diagnosis_summary="数据库宕机",
                    user_facing_answer=secret,
                ),
            ],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json(GOOD_ANSWER)],
        }
    )
    assert session.executor_output_parse_status == "parsed_v1"
    assert secret not in session.final_answer
    assert secret not in json.dumps(session.self_evaluation["composer_input"], ensure_ascii=False)


def test_a_verifier_that_passes_a_demoted_claim_is_overruled(run_scripted):
    invented = log_claim(
        claim_id="claim-2", text="mysql 数据库宕机", excerpt="mysql server has gone away forever"
    )
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim(), invented)],
            "verifier": [
                verifier_json(
                    "PASS", **{"claim-1": "direct_observation", "claim-2": "direct_observation"}
                )
            ],
        }
    )
    evaluation = session.self_evaluation
    assert session.decision == "LOW_CONFID"
    assert [c["claim_id"] for c in evaluation["composer_input"]["allowed_claims"]] == ["claim-1"]
    assert evaluation["verifier_evaluation"]["disagreements"] == [
        {"claim_id": "claim-2", "verifier": "direct_observation", "gatekeeper": "demoted"}
    ]
    assert "mysql 数据库宕机" not in [
        c["text"] for c in evaluation["composer_input"]["allowed_claims"]
    ]


def test_retry_is_honoured_once_with_retry_context_and_then_degraded(run_scripted, settings):
    settings.DIAGNOSIS_MAX_RETRIES = 1
    session = run_scripted(
        {
            "executor": [
                QUERY_LOGS,
                executor_json(log_claim(excerpt="invented excerpt that is nowhere")),
                QUERY_LOGS,
                executor_json(log_claim(trace="trace-2")),
            ],
            "verifier": [verifier_json("RETRY"), verifier_json("RETRY")],
        }
    )
    assert session.attempt_count == 2
    assert session.decision == "LOW_CONFID"
    assert "retry_budget_exhausted" in session.self_evaluation["verifier_evaluation"]["route_notes"]
    attempts = session.self_evaluation["attempts"]
    assert [a["routed_decision"] for a in attempts] == ["RETRY", "LOW_CONFID"]
    assert attempts[1]["retry_context"]["missing_evidence"] == ["mysql 指标"]
    executor_requests = [req for role, req in session.provider.asked if role == Role.EXECUTOR]
    assert executor_requests[-1].retry_context["previous_attempt"] == 1
    assert list(
        ToolInvocation.objects.filter(session=session).values_list("attempt", "trace_ref")
    ) == [(1, "trace-1"), (2, "trace-2")]


def test_the_verifier_payload_holds_exactly_the_contract_keys(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
        }
    )
    [payload] = [req for role, req in session.provider.asked if role == Role.VERIFIER]
    assert isinstance(payload, VerifierPayload)
    assert set(payload.model_dump()) == {
        "original_query",
        "executor_final_answer",
        "executor_structured_output",
        "executor_output_parse_status",
        "gatekeeper",
        "tool_trace_summary",
        "retry_context",
    }
    assert [e.trace_ref for e in payload.tool_trace_summary] == ["trace-1"]


def test_a_malformed_verifier_answer_degrades_to_low_confid_and_is_recorded(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [{"content": "I think it is fine"}],
        }
    )
    evaluation = session.self_evaluation["verifier_evaluation"]
    assert session.decision == "LOW_CONFID"
    assert evaluation["status"] == "invalid_json"
    assert evaluation["route_notes"] == ["verifier_malformed:invalid_json"]
    assert session.self_evaluation["composer_input"]["allowed_claims"] == []


def test_unparseable_executor_output_still_ends_with_a_safe_answer(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, {"content": "payment-service 挂了，根因是数据库宕机。"}],
            "verifier": [verifier_json("LOW_CONFID")],
        }
    )
    assert session.status == "completed"
    assert session.executor_output_parse_status == "invalid_json"
    assert "数据库宕机" not in session.final_answer


def test_an_unexpected_error_ends_the_session_as_failed_with_a_safe_answer(
    run_scripted, monkeypatch
):
    import diagnosis.flow.run

    def explode(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(diagnosis.flow.run, "gatekeeper_stage", explode)
    session = run_scripted({"executor": [QUERY_LOGS, executor_json(log_claim())]})
    assert session.status == "failed"
    assert "RuntimeError: boom" in session.error
    assert "诊断未能完成" in session.final_answer
    assert session.stage == "done"


def test_an_excerpt_copied_from_the_log_is_accepted_by_the_gatekeeper(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim(excerpt=EXCERPT))],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
        }
    )
    assert session.self_evaluation["gatekeeper"]["claims"][0]["verdict"] == "accepted"


def test_a_runaway_executor_answer_reaches_the_verifier_bounded(run_scripted, settings):
    settings.DIAGNOSIS_VERIFIER_ANSWER_MAX_CHARS = 1000
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, {"content": "噪声" * 50_000}],
            "verifier": [verifier_json("LOW_CONFID")],
        }
    )
    [payload] = [req for role, req in session.provider.asked if role == Role.VERIFIER]
    assert len(payload.executor_final_answer) < 1100
    assert "characters cut" in payload.executor_final_answer
    assert session.status == "completed"
