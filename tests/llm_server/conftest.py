"""A real OpenAI-compatible server for the session: llama-cpp-python with SmolLM2-135M.

Budgets are small so the set stays within minutes on 2 busy cores: a few hundred
output tokens per role (the schemas sent are bounded to fit them), one tool round,
tool output cut at 2,000 characters (the same settings as bench/local_model.py and
the README's figures). Every test here is marked ``llm_server`` (skipped locally
without the packages, failing in CI without them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from diagnosis.models import DiagnosisSession, Environment
from tests.llm_server.server import ROLE_MAX_TOKENS, LlamaServer, require_llama_server


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """The server on a free loopback port, started once and stopped after the session."""
    model = require_llama_server()
    server = LlamaServer(model=model).start()
    yield server
    server.stop()


@pytest.fixture
def local_model_settings(settings: Any, llama_server: LlamaServer) -> Any:
    """Every role on the openai provider, pointed at the real local server."""
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = llama_server.base_url
    settings.LLM_TIMEOUT_SECONDS = 900.0
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TEMPERATURE = 0.0
    settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS = 1
    settings.TOOL_OUTPUT_MAX_CHARS = 2000
    settings.LLM_ROLE_SETTINGS = {
        role: {
            "provider": "openai",
            "base_url": llama_server.base_url,
            "api_key": "",
            "model": "smollm2-135m",
            "max_tokens": ROLE_MAX_TOKENS[role],
            "tool_choice": "auto",
            "response_format": "json_schema",
            # a 135M model rambles inside strings: bound the schema to the budget
            "schema_bounds": "fit",
            # chatml-function-calling leaves tool messages out of the prompt
            "tool_result_role": "user",
        }
        for role in settings.LLM_ROLES
    }
    return settings


@pytest.fixture
def session(db: None) -> DiagnosisSession:
    environment = Environment.objects.create(
        slug="local-model", name="local model", services=["payment-service"]
    )
    return DiagnosisSession.objects.create(
        environment=environment, original_query="payment-service 从 10:20 开始大量超时"
    )
