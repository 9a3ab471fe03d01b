"""Typical role requests for the provider tests."""

from __future__ import annotations

from typing import Any

from diagnosis.contracts import (
    AllowedClaim,
    ComposerInput,
    Decision,
    GatekeeperReport,
    ParseStatus,
    TraceSummaryEntry,
    VerifierPayload,
    Wording,
)
from diagnosis.llm.base import ExecutorRequest, PlannerRequest

QUESTION = "payment-service 从 10:20 开始大量超时，帮我看看原因"
WINDOW = {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}
SERVICES = ["payment-service", "order-service", "mysql"]


def planner_request(**overrides: Any) -> PlannerRequest:
    values = {
        "question": QUESTION,
        "language": "zh-CN",
        "now": "2026-03-02T10:40:00Z",
        "window": WINDOW,
        "services": SERVICES,
        "history": [{"question": "昨天的告警是什么？", "answer": "订单服务延迟升高。"}],
        "alert": {"labels": {"alertname": "PaymentTimeouts", "service": "payment-service"}},
    }
    return PlannerRequest(**{**values, **overrides})


def executor_request(**overrides: Any) -> ExecutorRequest:
    values = {
        "question": QUESTION,
        "language": "zh-CN",
        "now": "2026-03-02T10:40:00Z",
        "window": WINDOW,
        "plan": {"plan_version": "planner_v1", "services": ["payment-service"]},
        "services": SERVICES,
        "attempt": 1,
        "retry_context": None,
    }
    return ExecutorRequest(**{**values, **overrides})


def verifier_payload() -> VerifierPayload:
    return VerifierPayload(
        original_query=QUESTION,
        executor_final_answer='{"answer_version": "executor_evidence_v2", "claims": []}',
        executor_structured_output={"answer_version": "executor_evidence_v2", "claims": []},
        executor_output_parse_status=ParseStatus.PARSED_V2,
        gatekeeper=GatekeeperReport(parse_status=ParseStatus.PARSED_V2),
        tool_trace_summary=[
            TraceSummaryEntry(
                trace_ref="trace-1",
                invocation_id=7,
                tool_name="query_logs",
                arguments={"service": "payment-service"},
                status="ok",
                summary="HikariPool-1 - Connection is not available (x412)",
            )
        ],
        retry_context=None,
    )


def composer_input(language: str = "zh-CN") -> ComposerInput:
    return ComposerInput(
        decision=Decision.PASS,
        language=language,
        question=QUESTION,
        allowed_claims=[
            AllowedClaim(
                claim_id="claim-1",
                text="payment-service 出现连接池耗尽日志。",
                wording=Wording.DEFINITE,
                entity="payment-service",
            )
        ],
    )
