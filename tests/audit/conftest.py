"""Sessions shaped like the flow leaves them (diagnosis/flow/run.py), built without running it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from diagnosis.models import DiagnosisSession, Environment, LLMCall, ToolInvocation

XSS = "<script>alert(1)</script>"
NOW = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
LOG_OUTPUT = (
    "query_logs service=payment-service 2026-03-02T10:00:00Z..2026-03-02T10:40:00Z\n"
    "template: HikariPool-1 - Connection is not available, request timed out after <*>ms "
    "count=412 first=10:20:03 last=10:39:58\n"
    "sample: 2026-03-02T10:21:03Z ERROR HikariPool-1 - Connection is not available, "
    "request timed out after 30000ms\n"
    "template: GET /pay 200 count=1200\n"
)
METRIC_OUTPUT = (
    "query_metrics service=payment-service metric=hikaricp_connections_active\n"
    "hikaricp_connections_active{pool=main} baseline=6 max=20 at 10:20:00 (limit 20)\n"
)


def _claim(claim_id, text, trace, excerpt, *, invocation_id=None, claim_type="symptom"):
    binding = {
        "source_type": "tool_trace",
        "source_id": trace,
        "tool_name": "query_logs" if trace == "trace-1" else "query_metrics",
        "evidence_excerpt": excerpt,
    }
    if invocation_id is not None:
        binding["source_invocation_ids"] = [invocation_id]
    return {
        "claim_id": claim_id,
        "claim_type": claim_type,
        "claim_text": text,
        "entity": "payment-service",
        "support_level": "direct",
        "evidence_bindings": [binding],
    }


@pytest.fixture
def environment(db):
    return Environment.objects.create(
        slug="audit-env",
        name="Audit env",
        services=["payment-service", "order-service", "mysql"],
    )


@pytest.fixture
def make_session(environment, owner):
    """A completed session with two tool invocations, four model calls and three claims.

    ``text`` is put into every field a model or a tool wrote, to test escaping.
    """

    def make(*, text: str = "", extra_invocations: int = 0, owner_user=owner, **fields):
        session = DiagnosisSession.objects.create(
            owner=owner_user,
            environment=environment,
            original_query=f"payment-service 从 10:20 开始大量超时 {text}".strip(),
            context={
                "now": "2026-03-02T10:40:00Z",
                "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
            },
            status=DiagnosisSession.Status.COMPLETED,
            stage=DiagnosisSession.Stage.DONE,
            started_at=NOW,
            finished_at=NOW + timedelta(seconds=12),
            **fields,
        )
        logs = ToolInvocation.objects.create(
            session=session,
            sequence=1,
            trace_ref="trace-1",
            tool_name="query_logs",
            arguments={"service": "payment-service", "level": "ERROR"},
            status="ok",
            output=LOG_OUTPUT + text,
            output_size=len(LOG_OUTPUT),
            summary={"templates": 2},
            started_at=NOW,
            duration_ms=40,
        )
        metrics = ToolInvocation.objects.create(
            session=session,
            sequence=2,
            trace_ref="trace-2",
            tool_name="query_metrics",
            arguments={"service": "payment-service", "metric": "hikaricp_connections_active"},
            status="ok",
            output=METRIC_OUTPUT,
            output_size=len(METRIC_OUTPUT),
            started_at=NOW,
            duration_ms=30,
        )
        for n in range(extra_invocations):
            ToolInvocation.objects.create(
                session=session,
                sequence=3 + n,
                trace_ref=f"trace-{3 + n}",
                tool_name="query_logs",
                arguments={"service": "order-service", "query": f"q{n}"},
                status="ok" if n % 3 else "no_data",
                output=f"line {n} {text}\n" * 5,
                started_at=NOW,
            )
        claims = [
            _claim(
                "claim-1",
                f"payment-service 出现连接池超时日志 {text}".strip(),
                "trace-1",
                f"Connection is not available, request timed out after 30000ms{text}",
                invocation_id=logs.id,
            ),
            _claim(
                "claim-2",
                "payment-service 连接池活跃连接达到上限 20",
                "trace-2",
                "max=20 at 10:20:00 (limit 20)",
                invocation_id=metrics.id,
            ),
            _claim(
                "claim-3",
                "数据库宕机",
                "trace-2",
                "mysql down",
                claim_type="root_cause",
            ),
        ]
        structured = {
            "answer_version": "executor_evidence_v2",
            "claims": claims,
            "hypotheses": [
                {
                    "hypothesis_text": f"连接泄漏导致连接池耗尽 {text}".strip(),
                    "entity": "payment-service",
                    "basis": "runbook",
                    "needed_evidence": ["连接持有时间"],
                }
            ],
            "recommended_actions": [{"action_text": "检查 HikariCP 配置", "reason": text}],
            "missing_info": [f"没有连接泄漏的直接证据 {text}".strip()],
        }
        raw = json.dumps(structured, ensure_ascii=False)
        gatekeeper = {
            "gatekeeper_version": "gatekeeper_v1",
            "parse_status": "parsed_v2",
            "claims": [
                {"claim_id": "claim-1", "verdict": "accepted", "valid_bindings": 1, "findings": []},
                {"claim_id": "claim-2", "verdict": "accepted", "valid_bindings": 1, "findings": []},
                {
                    "claim_id": "claim-3",
                    "verdict": "demoted",
                    "valid_bindings": 0,
                    "findings": [
                        {"code": "excerpt_not_found", "binding": 0, "detail": f"mysql down {text}"}
                    ],
                },
            ],
            "findings": [],
            "counts": {"claims": 3, "accepted": 2, "demoted": 1},
        }
        composer_input = {
            "decision": "PASS",
            "language": "zh-CN",
            "question": session.original_query,
            "allowed_claims": [
                {
                    "claim_id": c["claim_id"],
                    "text": c["claim_text"],
                    "wording": "definite",
                    "entity": "payment-service",
                    "claim_type": c["claim_type"],
                }
                for c in claims[:2]
            ],
            "allowed_hypotheses": [{"text": structured["hypotheses"][0]["hypothesis_text"]}],
            "missing_info": ["未能证实：数据库宕机"],
            "recommended_actions": [{"text": "检查 HikariCP 配置", "reason": text}],
        }
        final_answer = f"**结论**\n\npayment-service 连接池耗尽。{text}\n"
        session.plan = {
            "status": "parsed",
            "detail": "",
            "plan": {"services": ["payment-service"], "symptoms": [f"timeout {text}"]},
            "window": session.context["window"],
        }
        session.decision = fields.get("decision", "PASS")
        session.attempt_count = fields.get("attempt_count", 1)
        session.executor_final_answer = raw
        session.executor_structured_output = structured
        session.executor_output_parse_status = "parsed_v2"
        session.final_answer = final_answer
        session.answer_source = fields.get("answer_source", "composer")
        session.llm_usage = {
            "roles": {},
            "total": {"calls": 4, "tokens_in": 900, "tokens_out": 300},
        }
        session.self_evaluation = {
            "attempts": [
                {
                    "attempt": 1,
                    "executor_error": "",
                    "parse_status": "parsed_v2",
                    "gatekeeper_counts": gatekeeper["counts"],
                    "verifier_status": "parsed",
                    "verifier_decision": "PASS",
                    "routed_decision": "PASS",
                    "retry_context": None,
                    "structured_output": structured,
                    "gatekeeper": gatekeeper,
                }
            ],
            "gatekeeper": gatekeeper,
            "verifier_evaluation": {
                "status": "parsed",
                "detail": "",
                "decision": "PASS",
                "routed_decision": "PASS",
                "route_notes": [f"claim-3 demoted {text}".strip()],
                "claim_checks": [
                    {"claim_id": "claim-1", "classification": "direct_observation", "reason": text},
                    {"claim_id": "claim-2", "classification": "direct_observation", "reason": ""},
                    {"claim_id": "claim-3", "classification": "unsupported", "reason": ""},
                ],
                "extra_facts": [],
                "summary": f"证据充分 {text}".strip(),
                "retry_request": None,
                "disagreements": [],
                "placements": {
                    "claim-1": "allowed_claim",
                    "claim-2": "allowed_claim",
                    "claim-3": "missing_info",
                },
                "composer_output": {
                    "status": "ok",
                    "source": "composer",
                    "final_answer": final_answer,
                    "guard_findings": [],
                },
            },
            "composer_input": composer_input,
        }
        session.save()
        verifier_raw = json.dumps(
            {"verifier_version": "verifier_v2", "decision": "PASS", "claim_checks": []}
        )
        composer_raw = json.dumps({"answer_version": "composer_v1", "final_answer": final_answer})
        for sequence, (role, raw_response) in enumerate(
            [
                ("planner", json.dumps({"plan_version": "planner_v1", "note": text})),
                ("executor", raw),
                ("verifier", verifier_raw),
                ("composer", composer_raw),
            ],
            start=1,
        ):
            LLMCall.objects.create(
                session=session,
                attempt=1 if role != "planner" else 0,
                sequence=sequence,
                role=role,
                provider="offline",
                model="offline",
                raw_response=raw_response,
                request={"text": text},
                tokens_in=200,
                tokens_out=80,
                latency_ms=5,
                status="ok",
            )
        return session

    return make


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-1")
