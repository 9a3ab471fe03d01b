"""A failed run tells users and API clients that it failed, never the exception itself."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from diagnosis.api.services import api_key_create
from diagnosis.models import DiagnosisSession
from tests.flow.conftest import QUERY_LOGS, executor_json, log_claim, verifier_json

PYDANTIC_TEXT = (
    "1 validation error for TraceSummaryEntry invocation_id Input should be a valid integer"
)


@pytest.fixture
def failed_session(run_scripted, monkeypatch):
    from diagnosis.flow import trace_summary

    def crash(**kwargs):
        raise ValueError(PYDANTIC_TEXT)

    monkeypatch.setattr(trace_summary, "trace_summary_build", crash)
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
        }
    )
    assert session.status == DiagnosisSession.Status.FAILED
    return session


def _detail(session: DiagnosisSession, language: str) -> dict:
    client = APIClient()
    key = api_key_create(owner=session.owner, name="ci")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.key}")
    response = client.get(f"/api/v1/diagnoses/{session.public_id}", HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 200
    return response.json()


@pytest.mark.django_db
def test_the_exception_of_a_failed_run_is_kept_for_reviewers(failed_session):
    assert PYDANTIC_TEXT in failed_session.error


@pytest.mark.django_db
def test_an_api_client_gets_a_translated_message_instead_of_the_exception(failed_session):
    body = _detail(failed_session, "zh-hans")
    assert body["status"] == "failed"
    assert "诊断在运行中出错" in body["error"]
    assert "validation error" not in str(body)
    english = _detail(failed_session, "en")
    assert english["error"].startswith("The diagnosis failed while running")


@pytest.mark.django_db
def test_progress_events_of_a_failed_run_hold_no_exception_text(failed_session):
    messages = list(failed_session.events.values_list("message", flat=True))
    assert "failed" in messages
    assert not any("validation error" in m or "ValueError" in m for m in messages)


@pytest.mark.django_db
def test_the_chat_page_of_a_failed_run_shows_no_exception_text(failed_session, client):
    from django.urls import reverse

    from chat.models import Conversation

    conversation = Conversation.objects.create(
        owner=failed_session.owner, environment=failed_session.environment, title="t"
    )
    failed_session.conversation = conversation
    failed_session.save(update_fields=["conversation"])
    client.force_login(failed_session.owner)
    page = client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    assert page.status_code == 200
    assert "validation error" not in page.content.decode()


@pytest.mark.django_db
def test_an_api_client_gets_a_stable_failure_code(failed_session):
    assert _detail(failed_session, "en")["error_code"] == "internal_error"


@pytest.mark.django_db
def test_a_session_whose_worker_died_fails_with_the_worker_lost_code(run_scripted, monkeypatch):
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from diagnosis.models import DiagnosisSession
    from diagnosis.services import sessions_reap_stale

    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
        }
    )
    DiagnosisSession.objects.filter(pk=session.pk).update(
        status=DiagnosisSession.Status.RUNNING, heartbeat_at=timezone.now()
    )
    later = timezone.now() + timedelta(seconds=settings.DIAGNOSIS_STALE_AFTER_SECONDS + 1)
    assert sessions_reap_stale(now=later) == 1
    session.refresh_from_db()
    body = _detail(session, "zh-hans")
    assert body["error_code"] == "worker_lost"
    assert "heartbeat" not in body["error"]
