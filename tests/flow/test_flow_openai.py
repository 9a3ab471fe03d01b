"""The whole flow through the `openai` provider against a loopback OpenAI-compatible server."""

import pytest

from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from tests.support.openai_roles import role_responder
from tests.support.openai_server import openai_server_running


@pytest.fixture
def openai_settings(settings):
    def configure(base_url):
        settings.LLM_PROVIDER = "openai"
        settings.LLM_MAX_RETRIES = 1
        settings.LLM_TIMEOUT_SECONDS = 5
        settings.LLM_ROLE_SETTINGS = {
            role: {"provider": "openai", "base_url": base_url, "api_key": "k", "model": "m"}
            for role in settings.LLM_ROLES
        }

    return configure


def test_a_session_runs_end_to_end_through_the_openai_provider(
    mini_env, owner, openai_settings, django_capture_on_commit_callbacks
):
    from diagnosis.services import diagnosis_submit

    with openai_server_running(responder=role_responder) as server:
        openai_settings(server.base_url)
        with django_capture_on_commit_callbacks(execute=True):
            session = diagnosis_submit(
                question="payment-service 从 10:20 开始大量超时", environment=mini_env, owner=owner
            )
    session = DiagnosisSession.objects.get(pk=session.pk)
    assert session.status == "completed", session.error
    assert session.decision == "PASS"
    assert session.answer_source == "composer"
    assert ToolInvocation.objects.filter(session=session, tool_name="query_logs").count() == 1
    roles = set(LLMCall.objects.filter(session=session).values_list("role", flat=True))
    assert roles == {"planner", "executor", "verifier", "composer"}
    assert "日志中出现错误" in session.final_answer
