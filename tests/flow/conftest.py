from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnosis.models import DiagnosisSession, Environment

MINI_PACK = Path(__file__).parent / "fixtures" / "mini-pool"
EXCERPT = "Connection is not available, request timed out after 30000ms"


@pytest.fixture
def mini_env(db):
    return Environment.objects.create(
        slug="mini-pool",
        name="mini",
        kind=Environment.Kind.SCENARIO,
        pack_path=str(MINI_PACK),
        services=["payment-service", "order-service", "mysql"],
    )


@pytest.fixture
def real_stack():
    """Real worker processes need PostgreSQL and a real broker; returns a private queue name."""
    import os
    import uuid

    from config.celery import app
    from tests.support.workers import real_stack_available

    if not real_stack_available():
        if os.environ.get("ROOTPROOF_CI") == "1":
            pytest.fail("CI must run the worker tests on PostgreSQL with a real broker")
        pytest.skip("needs DATABASE_URL=postgres://… and CELERY_BROKER_URL=redis://…")
    queue = f"test-{uuid.uuid4().hex[:8]}"
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    yield queue
    app.conf.task_always_eager, app.conf.task_default_queue = previous


def executor_json(*claims, hypotheses=(), version="executor_evidence_v2", **extra):
    body = {
        "answer_version": version,
        "claims": list(claims),
        "hypotheses": [
            {"hypothesis_text": h, "entity": "payment-service", "basis": "runbook"}
            for h in hypotheses
        ],
        "recommended_actions": [{"action_text": "检查 HikariCP 配置", "reason": "确认上限"}],
        "missing_info": ["没有连接泄漏的直接证据"],
    }
    body.update(extra)
    return {"content": json.dumps(body, ensure_ascii=False)}


def log_claim(
    claim_id="claim-1",
    text="payment-service 出现连接池超时日志",
    excerpt=EXCERPT,
    trace="trace-1",
    claim_type="symptom",
):
    return {
        "claim_id": claim_id,
        "claim_type": claim_type,
        "claim_text": text,
        "entity": "payment-service",
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": trace,
                "tool_name": "query_logs",
                "evidence_excerpt": excerpt,
            }
        ],
    }


def verifier_json(decision, **classifications):
    return {
        "content": json.dumps(
            {
                "verifier_version": "verifier_v2",
                "decision": decision,
                "claim_checks": [
                    {"claim_id": cid, "classification": cls, "reason": "checked"}
                    for cid, cls in classifications.items()
                ],
                "retry_request": {"missing_evidence": ["mysql 指标"], "instructions": "再查"},
                "summary": "ok",
            }
        )
    }


def composer_json(text):
    return {"content": json.dumps({"answer_version": "composer_v1", "final_answer": text})}


PLANNER = {
    "content": json.dumps(
        {
            "plan_version": "planner_v1",
            "services": ["payment-service"],
            "window": {"start": "2026-03-02T10:10:00Z", "end": "2026-03-02T10:40:00Z"},
            "symptoms": ["timeout"],
            "tools": ["query_logs"],
        }
    )
}
QUERY_LOGS = {"tool_calls": [{"name": "query_logs", "arguments": {"service": "payment-service"}}]}


@pytest.fixture
def run_scripted(mini_env, owner, monkeypatch, django_capture_on_commit_callbacks):
    """Run a session through the real flow and Celery task with scripted agents."""
    from diagnosis.flow import selection
    from diagnosis.llm.base import Role
    from diagnosis.llm.scripted import ScriptedProvider
    from diagnosis.services import diagnosis_submit

    providers: list[ScriptedProvider] = []

    def run(script, *, language="zh-CN", question="payment-service 从 10:20 开始大量超时"):
        script = {"planner": [PLANNER], **script}
        provider = ScriptedProvider(script)
        providers.append(provider)
        monkeypatch.setattr(
            selection, "agents_for_session", lambda **kwargs: dict.fromkeys(Role, provider)
        )
        with django_capture_on_commit_callbacks(execute=True):
            session = diagnosis_submit(
                question=question, environment=mini_env, owner=owner, language=language
            )
        session = DiagnosisSession.objects.get(pk=session.pk)
        session.provider = provider
        return session

    return run


@pytest.fixture
def run_adversarial(mini_env, owner, monkeypatch, django_capture_on_commit_callbacks):
    """Run a session on the mini pack with scripted roles, the offline engine answering
    whatever the script leaves out."""
    from diagnosis.flow import selection
    from diagnosis.llm.base import Role
    from diagnosis.llm.scripted import ScriptedProvider
    from diagnosis.offline import OfflineEngine
    from diagnosis.services import diagnosis_submit

    def run(script, language="zh-CN"):
        provider = ScriptedProvider({"planner": [PLANNER], **script}, fallback=OfflineEngine())
        monkeypatch.setattr(
            selection, "agents_for_session", lambda **kwargs: dict.fromkeys(Role, provider)
        )
        with django_capture_on_commit_callbacks(execute=True):
            session = diagnosis_submit(
                question="payment-service 从 10:20 开始大量超时",
                environment=mini_env,
                owner=owner,
                language=language,
            )
        return DiagnosisSession.objects.get(pk=session.pk)

    return run
