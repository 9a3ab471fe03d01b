"""Idempotent runs, redelivery after a dead worker, the stale-session reaper, cancel."""

import socket
from datetime import timedelta

import pytest
from celery.exceptions import Retry, SoftTimeLimitExceeded
from django.utils import timezone

from diagnosis.evidence import invoke
from diagnosis.flow.run import diagnosis_run
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.services import (
    diagnosis_cancel,
    session_claim,
    session_fail,
    sessions_reap_stale,
)
from diagnosis.tasks import diagnosis_run_task
from tests.flow.conftest import QUERY_LOGS, executor_json, log_claim, verifier_json

SCRIPT = {
    "executor": [QUERY_LOGS, executor_json(log_claim())],
    "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
}


def _running(mini_env, owner, runner: str) -> DiagnosisSession:
    """A session some worker is running, with a fresh heartbeat."""
    return DiagnosisSession.objects.create(
        owner=owner,
        environment=mini_env,
        original_query="q",
        status=DiagnosisSession.Status.RUNNING,
        heartbeat_at=timezone.now(),
        runner=runner,
    )


def _after_the_first_tool_call(monkeypatch, change) -> None:
    """Run ``change(session id)`` after each tool call, as another process might."""
    real_invoke = invoke.tool_invoke

    def invoke_then_change(**kwargs):
        result = real_invoke(**kwargs)
        change(kwargs["session"].pk)
        return result

    monkeypatch.setattr(invoke, "tool_invoke", invoke_then_change)


def test_a_finished_session_is_skipped_when_its_task_is_delivered_again(run_scripted):
    session = run_scripted(SCRIPT)
    before = ToolInvocation.objects.filter(session=session).count()
    assert diagnosis_run(session_id=session.id) is None
    assert ToolInvocation.objects.filter(session=session).count() == before


def test_a_missing_session_is_skipped(db):
    assert session_claim(session_id=999_999) is None


def test_a_session_run_by_a_live_worker_is_not_taken_twice(mini_env, owner):
    session = _running(mini_env, owner, "some-other-host:123")
    assert session_claim(session_id=session.id) is None


def test_a_redelivered_session_whose_worker_died_restarts_as_a_new_attempt(mini_env, owner):
    session = _running(mini_env, owner, f"{socket.gethostname()}:999999999")  # a dead pid
    claimed = session_claim(session_id=session.id)
    assert claimed is not None
    assert claimed.restarts == 1
    assert claimed.status == DiagnosisSession.Status.RUNNING


def test_the_reaper_fails_a_running_session_whose_heartbeat_stopped(mini_env, owner, settings):
    settings.DIAGNOSIS_STALE_AFTER_SECONDS = 60
    now = timezone.now()
    stale = DiagnosisSession.objects.create(
        owner=owner,
        environment=mini_env,
        original_query="q",
        status=DiagnosisSession.Status.RUNNING,
        heartbeat_at=now - timedelta(seconds=61),
    )
    fresh = DiagnosisSession.objects.create(
        owner=owner,
        environment=mini_env,
        original_query="q",
        status=DiagnosisSession.Status.RUNNING,
        heartbeat_at=now,
    )
    assert sessions_reap_stale(now=now) == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == "failed" and "worker_lost" in stale.error
    assert "诊断未能完成" in stale.final_answer
    assert fresh.status == "running"


def test_cancelling_a_queued_session_ends_it_at_once(mini_env, owner):
    session = DiagnosisSession.objects.create(owner=owner, environment=mini_env, original_query="q")
    cancelled = diagnosis_cancel(session=session)
    assert cancelled.status == "cancelled"
    assert "已取消" in cancelled.final_answer
    assert diagnosis_run(session_id=session.id) is None


def test_a_duplicate_delivery_of_a_session_held_by_a_live_worker_checks_back_later(
    mini_env, owner, monkeypatch
):
    session = _running(mini_env, owner, "another-host:123")
    retries = []

    def record_retry(*args, **kwargs):
        retries.append(kwargs)
        raise Retry()

    monkeypatch.setattr(diagnosis_run_task, "retry", record_retry)
    with pytest.raises(Retry):
        diagnosis_run_task.run(session.id)
    assert retries and retries[0]["countdown"] == 60
    session.refresh_from_db()
    assert session.status == "running"  # untouched: the live worker still owns it


def test_a_cancel_requested_while_a_tool_runs_ends_the_session_at_the_next_stage(
    run_scripted, monkeypatch
):
    def cancel(pk):
        DiagnosisSession.objects.filter(pk=pk).update(cancel_requested=True)

    _after_the_first_tool_call(monkeypatch, cancel)
    session = run_scripted(SCRIPT)
    assert session.status == DiagnosisSession.Status.CANCELLED
    assert session.stage == DiagnosisSession.Stage.DONE
    assert not LLMCall.objects.filter(session=session, role="verifier").exists()


def test_a_run_past_its_soft_time_limit_ends_failed_with_the_timeout_code(
    run_scripted, monkeypatch
):
    def out_of_time(**kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(invoke, "tool_invoke", out_of_time)
    session = run_scripted({"executor": [QUERY_LOGS, executor_json(log_claim())]})
    assert session.status == DiagnosisSession.Status.FAILED
    assert session.error.startswith("timeout:")
    assert session.final_answer  # a safe answer, not the exception
    assert "SoftTimeLimitExceeded" not in session.final_answer


def test_a_run_whose_session_another_worker_took_over_stops_and_leaves_its_row_alone(
    run_scripted, monkeypatch
):
    def taken_over(pk):
        DiagnosisSession.objects.filter(pk=pk).update(runner="another-host:42", restarts=1)

    _after_the_first_tool_call(monkeypatch, taken_over)
    session = run_scripted(SCRIPT)
    session.refresh_from_db()
    assert session.runner == "another-host:42"
    assert session.status == DiagnosisSession.Status.RUNNING  # the other worker's to end
    assert session.stage == DiagnosisSession.Stage.EXECUTOR  # no later stage written
    assert session.final_answer == "" and session.decision == ""


# As in a worker, no test transaction around the run (a clash inside one would abort it).
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_session_the_reaper_failed_does_not_overwrite_the_failure(
    run_scripted, monkeypatch, caplog
):
    def reaped(pk):
        session_fail(session_id=pk, error="heartbeat stopped", code="worker_lost")

    _after_the_first_tool_call(monkeypatch, reaped)
    session = run_scripted(SCRIPT)
    session.refresh_from_db()
    assert session.status == DiagnosisSession.Status.FAILED
    assert session.error.startswith("worker_lost:")
    assert session.decision == ""  # the late run's PASS never landed
    # It stopped as a run that lost its session, not by crashing into the reaper's rows.
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert any("no longer this worker's" in r.getMessage() for r in caplog.records)


def test_a_soft_time_limit_in_a_stalled_runner_leaves_a_taken_over_session_running(mini_env, owner):
    session = _running(mini_env, owner, "another-host:7")
    assert not session_fail(
        session_id=session.pk, error="time limit", code="timeout", runner="this-host:1"
    )
    session.refresh_from_db()
    assert session.status == DiagnosisSession.Status.RUNNING
    assert session_fail(
        session_id=session.pk, error="time limit", code="timeout", runner="another-host:7"
    )
