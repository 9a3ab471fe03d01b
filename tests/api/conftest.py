from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from diagnosis.api.services import api_key_create
from diagnosis.models import (
    DiagnosisSession,
    Environment,
    LLMCall,
    SessionEvent,
    ToolInvocation,
)


@pytest.fixture(autouse=True)
def _fresh_throttle_buckets():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def environment(db):
    return Environment.objects.create(
        slug="shop", name="Shop", services=["checkout-service", "payment-service"]
    )


@pytest.fixture
def other_environment(db):
    return Environment.objects.create(slug="lab", name="Lab")


@pytest.fixture
def owner_key(owner):
    return api_key_create(owner=owner, name="ci")


@pytest.fixture
def outsider_key(outsider):
    return api_key_create(owner=outsider, name="theirs")


def client_for(key: str | None = None) -> APIClient:
    client = APIClient()
    if key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def api(owner_key) -> APIClient:
    return client_for(owner_key.key)


@pytest.fixture
def outsider_api(outsider_key) -> APIClient:
    return client_for(outsider_key.key)


def session_make(*, owner, environment, **fields) -> DiagnosisSession:
    """A session row as the flow would leave it, without running the flow."""
    fields.setdefault("original_query", "checkout 为什么报错？")
    fields.setdefault("source", DiagnosisSession.Source.API)
    return DiagnosisSession.objects.create(owner=owner, environment=environment, **fields)


def completed_session_make(*, owner, environment) -> DiagnosisSession:
    """A finished session with one accepted and one demoted claim, invocations, events, usage."""
    now = timezone.now()
    session = session_make(
        owner=owner,
        environment=environment,
        status=DiagnosisSession.Status.COMPLETED,
        stage=DiagnosisSession.Stage.DONE,
        decision=DiagnosisSession.Decision.LOW_CONFID,
        final_answer="**结论**\n\npayment-service 出现请求超时日志。",
        answer_source=DiagnosisSession.AnswerSource.COMPOSER,
        attempt_count=1,
        started_at=now - timedelta(seconds=20),
        finished_at=now,
        executor_output_parse_status=DiagnosisSession.ParseStatus.PARSED_V2,
        llm_usage={
            "roles": {
                "executor": {"calls": 2, "tokens_in": 900, "tokens_out": 300, "latency_ms": 40}
            },
            "total": {"calls": 2, "tokens_in": 900, "tokens_out": 300, "latency_ms": 40},
        },
        context={
            "services": ["payment-service"],
            "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:30:00Z"},
        },
    )
    logs = ToolInvocation.objects.create(
        session=session,
        sequence=1,
        trace_ref="trace-1",
        tool_name="query_logs",
        arguments={"service": "payment-service", "level": "ERROR"},
        status=ToolInvocation.Status.OK,
        output="payment-service ERROR request timeout after 5000ms count=42",
        output_size=61,
        started_at=now - timedelta(seconds=15),
        duration_ms=12,
    )
    ToolInvocation.objects.create(
        session=session,
        sequence=2,
        trace_ref="trace-2",
        tool_name="query_metrics",
        arguments={"service": "payment-service"},
        status=ToolInvocation.Status.NO_DATA,
        output="no samples",
        started_at=now - timedelta(seconds=10),
    )
    session.executor_structured_output = {
        "answer_version": "executor_evidence_v2",
        "claims": [
            {
                "claim_id": "claim-1",
                "claim_type": "symptom",
                "claim_text": "payment-service 出现请求超时日志。",
                "entity": "payment-service",
                "support_level": "direct",
                "evidence_bindings": [
                    {
                        "source_type": "tool_trace",
                        "source_id": "trace-1",
                        "tool_name": "query_logs",
                        "source_invocation_ids": [logs.pk],
                        "evidence_excerpt": "request timeout after 5000ms",
                    }
                ],
            },
            {
                "claim_id": "claim-2",
                "claim_type": "root_cause",
                "claim_text": "数据库连接池耗尽。",
                "entity": "payment-db",
                "support_level": "direct",
                "evidence_bindings": [
                    {
                        "source_type": "tool_trace",
                        "source_id": "trace-2",
                        "tool_name": "query_metrics",
                        "evidence_excerpt": "pool exhausted",
                    }
                ],
            },
        ],
        "hypotheses": [{"hypothesis_text": "连接池配置过小", "basis": "runbook"}],
        "recommended_actions": [{"action_text": "检查连接池", "reason": "超时"}],
        "missing_info": ["数据库指标"],
    }
    session.self_evaluation = {
        "gatekeeper": {
            "gatekeeper_version": "gatekeeper_v1",
            "parse_status": "parsed_v2",
            "claims": [
                {"claim_id": "claim-1", "verdict": "accepted", "valid_bindings": 1, "findings": []},
                {
                    "claim_id": "claim-2",
                    "verdict": "demoted",
                    "valid_bindings": 0,
                    "findings": [{"code": "invocation_failed", "binding": 0, "detail": "no_data"}],
                },
            ],
            "counts": {"claims": 2, "accepted": 1, "demoted": 1},
        },
        "verifier_evaluation": {
            "claim_checks": [
                {
                    "claim_id": "claim-1",
                    "classification": "direct_observation",
                    "reason": "日志可见",
                },
                {"claim_id": "claim-2", "classification": "unsupported", "reason": "无数据"},
            ],
            "placements": {"claim-1": "allowed_claim", "claim-2": "missing_info"},
            "composer_output": {
                "status": "ok",
                "source": "composer",
                "final_answer": "…",
                "guard_findings": [],
            },
        },
        "composer_input": {
            "decision": "LOW_CONFID",
            "language": "zh-CN",
            "question": "checkout 为什么报错？",
            "allowed_claims": [
                {
                    "claim_id": "claim-1",
                    "text": "payment-service 出现请求超时日志。",
                    "wording": "definite",
                }
            ],
            "allowed_hypotheses": [{"text": "连接池配置过小", "basis": "runbook"}],
            "missing_info": ["数据库连接池指标"],
            "recommended_actions": [{"text": "检查连接池", "reason": "超时"}],
        },
        "attempts": [{"attempt": 1}],
    }
    session.save()
    for sequence, (kind, stage) in enumerate(
        [("stage", "queued"), ("stage", "planner"), ("tool_call", "executor"), ("stage", "done")],
        start=1,
    ):
        SessionEvent.objects.create(
            session=session, sequence=sequence, kind=kind, stage=stage, message=stage
        )
    LLMCall.objects.create(
        session=session, sequence=1, role="executor", provider="scripted", status="ok"
    )
    return session
