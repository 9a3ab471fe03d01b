"""Live progress stays live without costing three queries an event."""

import time

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


def _running(mini_env, owner, **fields):
    return DiagnosisSession.objects.create(
        owner=owner, environment=mini_env, original_query="q", status="running", **fields
    )


@pytest.mark.django_db
def test_deferred_fields_wait_for_the_next_update_not_for_an_event(mini_env, owner):
    session = _running(mini_env, owner)
    log = SessionEventLog(session)
    log.add(kind=SessionEvent.Kind.STAGE, stage="gatekeeper")  # beats once
    log.fields_defer(self_evaluation={"gatekeeper": {}})
    with CaptureQueriesContext(connection) as ctx:
        log.add(kind=SessionEvent.Kind.INFO, stage="gatekeeper", message="counted")
    assert [q["sql"][:6] for q in ctx.captured_queries] == ["INSERT"]
    assert DiagnosisSession.objects.get(pk=session.pk).self_evaluation == {}
    log.flush()
    assert DiagnosisSession.objects.get(pk=session.pk).self_evaluation == {"gatekeeper": {}}


@pytest.mark.django_db
def test_deferred_session_fields_ride_on_the_next_stage_update(mini_env, owner):
    session = _running(mini_env, owner)
    log = SessionEventLog(session)
    log.fields_defer(plan={"status": "ok"}, attempt_count=1)
    assert DiagnosisSession.objects.get(pk=session.pk).plan == {}
    with CaptureQueriesContext(connection) as ctx:
        assert log.beat(force=True, unless_cancelled=True, stage="executor") is True
    assert len(ctx.captured_queries) == 1
    stored = DiagnosisSession.objects.get(pk=session.pk)
    assert (stored.stage, stored.plan, stored.attempt_count) == ("executor", {"status": "ok"}, 1)


@pytest.mark.django_db
def test_a_cancel_keeps_what_the_run_recorded_before_it(mini_env, owner):
    session = _running(mini_env, owner, stage="planner", cancel_requested=True)
    log = SessionEventLog(session)
    log.fields_defer(plan={"status": "ok"})
    assert log.beat(force=True, unless_cancelled=True, stage="executor") is False
    stored = DiagnosisSession.objects.get(pk=session.pk)
    assert (stored.stage, stored.plan) == ("planner", {"status": "ok"})


@pytest.mark.django_db
def test_a_cancel_is_read_again_only_once_the_last_look_is_older_than_the_bound(mini_env, owner):
    session = _running(mini_env, owner)
    log = SessionEventLog(session)
    assert log.beat(force=True, unless_cancelled=True, stage="executor")  # a look
    DiagnosisSession.objects.filter(pk=session.pk).update(cancel_requested=True)
    with CaptureQueriesContext(connection) as ctx:
        assert log.cancel_requested() is False  # the stage's look is fresh
    assert ctx.captured_queries == []
    log.cancel_checked_at = time.monotonic() - SessionEventLog.CANCEL_SEEN_WITHIN_SECONDS
    with CaptureQueriesContext(connection) as ctx:
        assert log.cancel_requested() is True
    assert len(ctx.captured_queries) == 1


@pytest.mark.django_db
def test_a_look_that_finds_no_cancel_counts_as_the_last_look(mini_env, owner):
    session = _running(mini_env, owner)
    log = SessionEventLog(session)
    assert log.cancel_requested() is False  # never looked: one read
    with CaptureQueriesContext(connection) as ctx:
        assert log.cancel_requested() is False
    assert ctx.captured_queries == []
