from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from diagnosis.llm.base import Role
from diagnosis.llm.recorder import llm_call_recorder
from diagnosis.models import DiagnosisSession, Environment
from tests.llm.requests import executor_request
from tests.support.agents import agent_answer
from tests.support.openai_server import FakeOpenAIServer

TEST_API_KEY = "sk-test-0123456789abcdef-not-real"


@pytest.fixture
def openai_server():
    """A started loopback OpenAI-compatible server (tests.support.openai_server)."""
    server = FakeOpenAIServer(hang_seconds=3.0).start()
    yield server
    server.stop()


@pytest.fixture
def openai_settings(settings, openai_server):
    """Every role on the openai provider, pointed at the loopback server."""
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = openai_server.base_url
    settings.LLM_API_KEY = TEST_API_KEY
    settings.LLM_ROLE_SETTINGS = {
        role: {
            "provider": "openai",
            "base_url": openai_server.base_url,
            "api_key": TEST_API_KEY,
            "model": f"fake-{role}-model",
        }
        for role in settings.LLM_ROLES
    }
    settings.LLM_TIMEOUT_SECONDS = 2.0
    settings.LLM_MAX_RETRIES = 2
    settings.LLM_MAX_TOKENS = 512
    settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS = 4
    return settings


@pytest.fixture
def environment(db, tmp_path):
    return Environment.objects.create(
        slug="test-pack",
        name="test pack",
        pack_path=str(tmp_path / "pack"),
        services=["payment-service", "order-service", "mysql"],
    )


@pytest.fixture
def session(environment):
    return DiagnosisSession.objects.create(
        environment=environment, original_query="payment-service 从 10:20 开始大量超时"
    )


@pytest.fixture
def recorder(session):
    return llm_call_recorder(session=session, attempt_getter=lambda: 1)


@dataclass
class FakeToolResult:
    trace_ref: str
    status: str
    output: str
    invocation_id: int = 0
    tool_name: str = ""
    summary: dict[str, Any] = field(default_factory=dict)


class FakeTools:
    """A ToolRunner: numbers calls trace-1, trace-2, … and remembers them."""

    def __init__(self, outputs: dict[str, str] | None = None) -> None:
        self.outputs = outputs or {}
        self.calls: list[tuple[str, object]] = []

    def __call__(self, name: str, arguments: object) -> FakeToolResult:
        self.calls.append((name, arguments))
        trace_ref = f"trace-{len(self.calls)}"
        if not isinstance(arguments, dict):
            return FakeToolResult(trace_ref, "error", "arguments are not a JSON object", 0, name)
        output = self.outputs.get(name, f"{name}: nothing matched")
        return FakeToolResult(trace_ref, "ok", output, len(self.calls), name)


@pytest.fixture
def fake_tools():
    return FakeTools(
        {
            "query_logs": "payment-service ERROR HikariPool-1 - Connection is not available (x412)",
            "query_metrics": "hikaricp_connections_active{service=payment-service} max 20 at 10:21",
        }
    )


TOOL_SPECS = [
    {
        "name": "query_logs",
        "description": "Log templates of a service.",
        "parameters": {"type": "object", "properties": {"service": {"type": "string"}}},
    },
    {
        "type": "function",
        "function": {
            "name": "query_metrics",
            "description": "Metrics of a service.",
            "parameters": {"type": "object", "properties": {"service": {"type": "string"}}},
        },
    },
]


class StubProvider:
    """A fallback answerer that answers every role with a fixed text and remembers it."""

    name = "stub"
    ANSWERS = {
        "planner": '{"plan_version": "planner_v1", "notes": "stub"}',
        "executor": '{"answer_version": "executor_evidence_v2", "claims": [], "notes": "stub"}',
        "verifier": '{"verifier_version": "verifier_v2", "decision": "LOW_CONFID"}',
        "composer": '{"answer_version": "composer_v1", "final_answer": "stub"}',
    }
    CALLS = {"planner": "plan", "executor": "execute", "verifier": "verify", "composer": "compose"}

    def __init__(self) -> None:
        self.calls: list[str] = []

    def answer(self, role, request, *, recorder, tools=None):
        self.calls.append(self.CALLS[str(role)])
        if str(role) == "executor":
            tools("query_logs", {"service": "payment-service"})
        return self.ANSWERS[str(role)]


@pytest.fixture
def stub_provider():
    return StubProvider()


@pytest.fixture
def ask_executor(recorder, fake_tools):
    """Ask ``agent`` as the Executor stage does: the fake tools, the test tool specs."""

    def ask(agent, request=None, *, tools=None):
        return agent_answer(
            agent,
            Role.EXECUTOR,
            request or executor_request(),
            tools=tools or fake_tools,
            tool_specs=TOOL_SPECS,
            recorder=recorder,
        )

    return ask
