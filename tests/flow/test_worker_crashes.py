"""Workers SIGKILLed in the middle of sessions (the short version of bench/chaos.py).

Real worker processes on PostgreSQL and Redis (run by .ci/run); skipped elsewhere,
failed in CI if the stack is missing. Timeouts bound how long the test may wait;
nothing asserts how long a run took.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from diagnosis.models import DiagnosisSession
from diagnosis.services import diagnosis_submit, sessions_reap_stale
from tests.support.crashes import crash_report, sessions_mid_flow
from tests.support.openai_roles import role_responder
from tests.support.openai_server import openai_server_running
from tests.support.workers import (
    wait_until,
    worker_env,
    worker_kill,
    worker_start,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

KILLS = 3
VISIBILITY_TIMEOUT = 3


def _unfinished(ids: list[int]) -> int:
    return DiagnosisSession.objects.filter(pk__in=ids, status__in=["queued", "running"]).count()


def _mid_flow(ids: list[int], workers: list, *, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sessions_mid_flow(session_ids=ids, workers=workers)
        if found:
            return found
        time.sleep(0.1)
    return []


def test_killing_workers_mid_session_leaves_every_session_finished_once(
    real_stack, mini_env, owner
):
    ids: list[int] = []
    killed: set[int] = set()
    with openai_server_running(responder=role_responder, latency=0.5) as server:
        env = worker_env(
            queue=real_stack,
            extra={
                "LLM_PROVIDER": "openai",
                "LLM_BASE_URL": server.base_url,
                "LLM_API_KEY": "k",
                "LLM_MAX_RETRIES": "0",
                "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
            },
        )
        workers = [worker_start(env=env, name=f"crash{i}") for i in range(2)]
        try:
            for round_ in range(KILLS):
                ids += [
                    diagnosis_submit(
                        question=f"payment-service 超时 #{round_}.{n}",
                        environment=mini_env,
                        owner=owner,
                    ).pk
                    for n in range(2)
                ]
                found = _mid_flow(ids, workers, timeout=120)
                assert found, "no session reached the middle of the flow"
                session, victim = next(((s, w) for s, w in found if s.pk not in killed), found[0])
                worker_kill(victim)
                killed.add(session.pk)
                workers.remove(victim)
                # A worker that starts after the visibility timeout takes the orphaned
                # task back at once (Redis redelivery) and the session over.
                time.sleep(VISIBILITY_TIMEOUT + 1)
                workers.append(worker_start(env=env, name=f"crash-r{round_}"))
            wait_until(lambda: _unfinished(ids) == 0, timeout=180)
        finally:
            for proc in workers:
                worker_kill(proc)
    # Whatever redelivery missed, the reaper ends: no session runs forever.
    reaped = sessions_reap_stale(now=timezone.now() + timedelta(days=1))
    report = crash_report(session_ids=ids)
    assert report.still_running == 0
    assert report.queued == 0
    assert report.completed + report.failed == report.submitted
    assert report.failed_with_safe_answer == report.failed
    assert report.unsafe_answers == []
    assert report.duplicated == []
    # Each kill orphaned one run: another worker took it over, or the reaper ended it.
    assert 1 <= report.restarts
    assert report.restarts + reaped <= KILLS
    took_over = DiagnosisSession.objects.filter(pk__in=ids, restarts__gt=0)
    for session in took_over:
        assert session.self_evaluation.get("restarts"), "a takeover is recorded for reviewers"
