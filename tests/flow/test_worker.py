"""Real worker processes on PostgreSQL and a real broker (run by .ci/run with Redis).

Timeouts here bound how long a test may wait; nothing asserts how long a run took.
"""

from __future__ import annotations

import pytest
from django.db.models import Count

from diagnosis.models import DiagnosisSession, ToolInvocation
from diagnosis.services import diagnosis_submit, sessions_reap_stale
from tests.support.openai_roles import role_responder
from tests.support.openai_server import openai_server_running
from tests.support.workers import (
    wait_until,
    worker_env,
    worker_kill,
    worker_start,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _status(session_id):
    return DiagnosisSession.objects.values_list("status", flat=True).get(pk=session_id)


def test_a_real_worker_runs_a_submitted_session_to_completion(real_stack, mini_env, owner):
    with openai_server_running(responder=role_responder) as server:
        env = worker_env(
            queue=real_stack,
            extra={"LLM_PROVIDER": "openai", "LLM_BASE_URL": server.base_url, "LLM_API_KEY": "k"},
        )
        worker = worker_start(env=env)
        try:
            session = diagnosis_submit(
                question="payment-service 超时", environment=mini_env, owner=owner
            )
            done = wait_until(lambda: _status(session.id) in {"completed", "failed"}, timeout=120)
        finally:
            worker_kill(worker)
    session.refresh_from_db()
    assert done, f"session still {session.status}"
    assert session.status == "completed", session.error
    assert session.decision == "PASS"
    assert session.invocations.count() == 1


def test_a_worker_killed_mid_session_leaves_no_session_running(real_stack, mini_env, owner):
    with openai_server_running(responder=role_responder, latency=1.0) as server:
        env = worker_env(
            queue=real_stack,
            extra={
                "LLM_PROVIDER": "openai",
                "LLM_BASE_URL": server.base_url,
                "LLM_API_KEY": "k",
                "CELERY_VISIBILITY_TIMEOUT": "3",
            },
        )
        first = worker_start(env=env, name="first")
        second = None
        try:
            session = diagnosis_submit(
                question="payment-service 超时", environment=mini_env, owner=owner
            )
            assert wait_until(
                lambda: DiagnosisSession.objects.filter(
                    pk=session.id, status="running", stage__in=["executor", "verifier"]
                ).exists(),
                timeout=120,
            ), "the session never reached the Executor"
            worker_kill(first)
            assert _status(session.id) == "running"
            # A second worker gets the unacknowledged task again and takes the session over.
            second = worker_start(env=env, name="second")
            wait_until(lambda: _status(session.id) in {"completed", "failed"}, timeout=120)
        finally:
            worker_kill(first)
            if second is not None:
                worker_kill(second)
    # Whatever happened to the redelivery, the reaper guarantees a terminal state.
    from datetime import timedelta

    from django.utils import timezone

    sessions_reap_stale(now=timezone.now() + timedelta(days=1))
    session.refresh_from_db()
    assert session.status in {"completed", "failed"}
    assert session.final_answer.strip()
    if session.status == "failed":
        assert "诊断未能完成" in session.final_answer
    duplicates = (
        ToolInvocation.objects.filter(session=session)
        .values("attempt", "tool_name", "arguments")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert list(duplicates) == []
