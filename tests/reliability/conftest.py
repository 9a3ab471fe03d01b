from __future__ import annotations

import json

import pytest

from tests.flow.conftest import mini_env, run_scripted  # noqa: F401  (shared fixtures)


@pytest.fixture
def openai_run(settings, mini_env, owner, monkeypatch, django_capture_on_commit_callbacks):  # noqa: F811
    """Run one session through the openai provider against a loopback server.

    Timeouts are short and the backoff does not sleep, so a fault costs little time;
    the retry budget is ``LLM_MAX_RETRIES`` = 2.
    """
    from diagnosis.llm.openai_provider import OpenAIProvider
    from diagnosis.models import DiagnosisSession
    from diagnosis.services import diagnosis_submit
    from tests.support.openai_server import openai_server_running

    settings.LLM_PROVIDER = "openai"
    settings.LLM_MAX_RETRIES = 2
    settings.LLM_TIMEOUT_SECONDS = 0.3
    settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS = 3
    sleeps: list[float] = []
    monkeypatch.setattr(
        OpenAIProvider, "_backoff", lambda self, failures, retry_after: sleeps.append(0) or 0.0
    )

    def run(responder, *, question="payment-service 从 10:20 开始大量超时", environment=None):
        with openai_server_running(responder=responder, hang_seconds=2.0) as server:
            settings.LLM_ROLE_SETTINGS = {
                role: {
                    "provider": "openai",
                    "base_url": server.base_url,
                    "api_key": "k",
                    "model": "m",
                }
                for role in settings.LLM_ROLES
            }
            with django_capture_on_commit_callbacks(execute=True):
                session = diagnosis_submit(
                    question=question, environment=environment or mini_env, owner=owner
                )
        return DiagnosisSession.objects.get(pk=session.pk), server

    return run


def is_raw_json(text: str) -> bool:
    stripped = text.strip().strip("`").strip()
    if stripped.startswith("json"):
        stripped = stripped[4:].strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        return False
    return isinstance(value, dict | list)
