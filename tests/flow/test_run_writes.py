"""What a user following a run sees, and when: writes ride on the next stage, never later.

The run defers a write only when its next write follows at once (code, not a model or a
tool); these tests look at the database while a tool runs and while the Verifier is
asked, as a page polling the session would, and after a cancel or a failure.
"""

from __future__ import annotations

import pytest
from django.db import connection

from diagnosis.evidence import invoke
from diagnosis.flow import run as flow_run_module
from diagnosis.models import DiagnosisSession, LLMCall, SessionEvent, ToolInvocation
from diagnosis.services import SessionEventLog
from tests.flow.conftest import QUERY_LOGS, executor_json, log_claim, verifier_json

SCRIPT = {
    "executor": [QUERY_LOGS, executor_json(log_claim())],
    "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
}
TWO_CALLS = {"tool_calls": QUERY_LOGS["tool_calls"] * 2}


def _seen() -> dict:
    """What a page polling the (only) session reads now."""
    session = DiagnosisSession.objects.get()
    events = list(session.events.order_by("sequence").values_list("kind", "stage"))
    return {"session": session, "events": events}


def _around(monkeypatch, owner, name: str, *, before=None, after=None) -> None:
    """``owner.name`` wrapped: ``before(kwargs)`` runs ahead of the real call, ``after`` past it."""
    real = getattr(owner, name)

    def wrapped(**kwargs):
        if before:
            before(kwargs)
        result = real(**kwargs)
        if after:
            after(kwargs)
        return result

    monkeypatch.setattr(owner, name, wrapped)


def _cancel(kwargs) -> None:
    """A user presses cancel (the session is the call's ``session``)."""
    DiagnosisSession.objects.filter(pk=kwargs["session"].pk).update(cancel_requested=True)


def _seen_during(run_scripted, monkeypatch, owner, name: str) -> dict:
    """What a polling page saw while ``owner.name`` ran, in a session that completed."""
    seen: list[dict] = []
    _around(monkeypatch, owner, name, before=lambda kwargs: seen.append(_seen()))
    assert run_scripted(SCRIPT).status == DiagnosisSession.Status.COMPLETED
    [during] = seen
    return during


def test_while_a_tool_runs_its_stage_plan_and_call_are_already_shown(run_scripted, monkeypatch):
    during = _seen_during(run_scripted, monkeypatch, invoke, "tool_invoke")
    assert during["session"].stage == DiagnosisSession.Stage.EXECUTOR
    assert during["session"].plan["status"] == "ok"
    assert during["session"].attempt_count == 1
    assert during["events"] == [
        ("stage", "queued"),
        ("stage", "planner"),
        ("stage", "executor"),
        ("tool_call", "executor"),
    ]


def test_while_the_verifier_is_asked_the_gatekeepers_record_is_shown(run_scripted, monkeypatch):
    during = _seen_during(run_scripted, monkeypatch, flow_run_module, "verifier_stage")
    assert during["session"].executor_output_parse_status == "parsed_v2"
    assert during["session"].self_evaluation["gatekeeper"]["counts"]["accepted"] == 1
    assert during["events"][-3:] == [
        ("stage", "gatekeeper"),
        ("info", "gatekeeper"),
        ("stage", "verifier"),
    ]


def test_a_cancel_during_the_gatekeeper_keeps_its_record_and_asks_no_verifier(
    run_scripted, monkeypatch
):
    _around(monkeypatch, flow_run_module, "gatekeeper_stage", after=_cancel)
    session = run_scripted(SCRIPT)

    assert session.status == DiagnosisSession.Status.CANCELLED
    assert session.self_evaluation["gatekeeper"]["counts"]["accepted"] == 1
    kinds = list(session.events.order_by("sequence").values_list("kind", "stage", "message"))
    assert ("info", "gatekeeper", "accepted 1 / demoted 0") in kinds
    assert kinds[-1] == ("stage", "done", "cancelled")
    assert not LLMCall.objects.filter(session=session, role="verifier").exists()


def test_a_failure_after_the_gatekeeper_keeps_its_record_for_review(run_scripted, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("bug in the router")

    monkeypatch.setattr(flow_run_module, "route", crash)
    session = run_scripted(SCRIPT)

    assert session.status == DiagnosisSession.Status.FAILED
    assert session.self_evaluation["gatekeeper"]["counts"]["accepted"] == 1
    events = list(session.events.order_by("sequence").values_list("kind", "stage"))
    assert ("info", "gatekeeper") in events
    assert events[-1] == ("error", "done")


def test_a_cancel_between_two_tool_calls_stops_the_second_once_the_bound_has_passed(
    run_scripted, monkeypatch
):
    # With no bound every tool call looks, as a run whose model answers slower than the
    # bound does; the default bound is covered by the SessionEventLog tests.
    monkeypatch.setattr(SessionEventLog, "CANCEL_SEEN_WITHIN_SECONDS", 0.0)
    _around(monkeypatch, invoke, "tool_invoke", after=_cancel)
    session = run_scripted({**SCRIPT, "executor": [TWO_CALLS, executor_json(log_claim())]})

    assert session.status == DiagnosisSession.Status.CANCELLED
    assert ToolInvocation.objects.filter(session=session).count() == 1
    assert not LLMCall.objects.filter(session=session, role="verifier").exists()


@pytest.mark.django_db(transaction=True)
def test_a_runs_writes_skip_the_flush_to_disk_and_its_ending_does_not(run_scripted, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's")
    settings_seen: dict[str, str] = {}

    def show() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    _around(monkeypatch, invoke, "tool_invoke", before=lambda k: settings_seen.update(tool=show()))
    _around(
        monkeypatch,
        flow_run_module,
        "session_finish",
        before=lambda k: settings_seen.update(end=show()),
    )
    session = run_scripted(SCRIPT)

    assert session.status == DiagnosisSession.Status.COMPLETED
    assert settings_seen == {"tool": "off", "end": "on"}
    assert show() == "on"
    assert SessionEvent.objects.filter(session=session).count() == 10
