"""Live progress stays live without costing three queries an event."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from diagnosis.models import DiagnosisSession, SessionEvent
from diagnosis.services import SessionEventLog


@pytest.mark.django_db
def test_each_progress_event_of_a_running_session_is_one_insert(mini_env, owner):
    session = DiagnosisSession.objects.create(
        owner=owner, environment=mini_env, original_query="q", status="running"
    )
    log = SessionEventLog(session)
    log.add(kind=SessionEvent.Kind.STAGE, stage="planner", message="planner")  # beats once
    with CaptureQueriesContext(connection) as ctx:
        for n in range(10):
            log.add(kind=SessionEvent.Kind.INFO, stage="executor", message=f"step {n}")
    inserts = [q for q in ctx.captured_queries if q["sql"].startswith("INSERT")]
    assert len(ctx.captured_queries) == len(inserts) == 10
    assert list(session.events.values_list("sequence", flat=True)) == list(range(1, 12))


@pytest.mark.django_db
def test_a_new_log_continues_the_sequence_of_an_earlier_runner(mini_env, owner):
    session = DiagnosisSession.objects.create(owner=owner, environment=mini_env, original_query="q")
    SessionEventLog(session).add(kind=SessionEvent.Kind.STAGE, stage="queued")
    SessionEventLog(session).add(kind=SessionEvent.Kind.STAGE, stage="planner")
    assert list(session.events.values_list("sequence", flat=True)) == [1, 2]


@pytest.mark.django_db
def test_the_first_event_of_a_running_session_beats_its_heartbeat(mini_env, owner):
    session = DiagnosisSession.objects.create(
        owner=owner, environment=mini_env, original_query="q", status="running"
    )
    SessionEventLog(session).add(kind=SessionEvent.Kind.STAGE, stage="planner")
    session.refresh_from_db()
    assert session.heartbeat_at is not None


@pytest.mark.django_db
def test_a_stage_change_writes_the_stage_and_the_heartbeat_in_one_update(mini_env, owner):
    session = DiagnosisSession.objects.create(
        owner=owner, environment=mini_env, original_query="q", status="running"
    )
    log = SessionEventLog(session)
    with CaptureQueriesContext(connection) as ctx:
        log.beat(force=True, stage="executor")
    assert len(ctx.captured_queries) == 1
    session.refresh_from_db()
    assert session.stage == "executor" and session.heartbeat_at is not None


@pytest.mark.django_db
def test_a_stage_change_of_a_cancelled_session_writes_nothing_and_says_so(mini_env, owner):
    session = DiagnosisSession.objects.create(
        owner=owner,
        environment=mini_env,
        original_query="q",
        status="running",
        stage="planner",
        cancel_requested=True,
    )
    log = SessionEventLog(session)
    assert log.beat(force=True, unless_cancelled=True, stage="executor") is False
    session.refresh_from_db()
    assert session.stage == "planner"
