"""The one boundary between the flow and any model: four roles, three providers.

Every role returns the model's raw text; the flow parses it tolerantly, so the
offline engine and a real model go through the same parsing and checking.
A call that fails for good raises ``LLMError`` after the recorder has written
its row; the flow turns that into a recorded status and a safe fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from diagnosis.contracts import ComposerInput, VerifierPayload


class Role(StrEnum):
    PLANNER = "planner"
    EXECUTOR = "executor"
    VERIFIER = "verifier"
    COMPOSER = "composer"


class LLMError(Exception):
    """A model call that failed for good (after retries); ``status`` is an LLMCall.Status."""

    def __init__(self, status: str, message: str) -> None:
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class PlannerRequest:
    question: str
    language: str
    now: str  # RFC 3339: the moment the question is asked
    window: dict[str, str] | None  # hint {"start","end"}, may be None
    services: list[str]  # the environment's known services
    history: list[dict[str, str]] = field(default_factory=list)  # [{"question","answer"}]
    alert: dict[str, Any] | None = None  # labels/annotations when started by an alert


@dataclass(frozen=True)
class ExecutorRequest:
    question: str
    language: str
    now: str
    window: dict[str, str]  # the effective window {"start","end"}
    plan: dict[str, Any]  # PlannerOutput as a dict
    services: list[str]
    attempt: int
    retry_context: dict[str, Any] | None = None
    # Known call edges (caller, callee) of the environment: a pack's topology.json, or
    # caller/callee labels the Executor finds on the metrics; it localises along them.
    call_edges: tuple[tuple[str, str], ...] = ()


# (tool_name, arguments) -> the persisted result (diagnosis.evidence.invoke.ToolResult);
# never raises for bad arguments.
ToolRunner = Callable[[str, object], Any]


class CallRecorder(Protocol):
    def __call__(
        self,
        *,
        role: Role,
        provider: str,
        model: str,
        request: dict[str, Any],
        raw_response: str,
        tokens_in: int,
        tokens_out: int,
        latency_ms: int,
        status: str,
        error: str = "",
    ) -> None: ...


class AgentProvider(Protocol):
    """One provider; the flow may use a different one per role."""

    name: str

    def plan(self, request: PlannerRequest, *, recorder: CallRecorder) -> str: ...

    def execute(
        self,
        request: ExecutorRequest,
        *,
        tools: ToolRunner,
        tool_specs: list[dict[str, Any]],
        recorder: CallRecorder,
    ) -> str: ...

    def verify(self, payload: VerifierPayload, *, recorder: CallRecorder) -> str: ...

    def compose(self, composer_input: ComposerInput, *, recorder: CallRecorder) -> str: ...


class ModelText(str):
    """A model's raw text, and how the reply ended (the server's ``finish_reason``).

    A ``str``, so every provider keeps returning text and the flow keeps storing it;
    the parser reads ``cut`` so that a reply stopped by ``max_tokens`` counts only
    when its whole top-level object arrived.
    """

    finish_reason: str

    def __new__(cls, text: str, *, finish_reason: str = "") -> ModelText:
        made = super().__new__(cls, text)
        made.finish_reason = finish_reason
        return made

    @property
    def cut(self) -> bool:
        return self.finish_reason == "length"


def text_cut(raw: object) -> bool:
    """Was this model text stopped by ``max_tokens``?"""
    return isinstance(raw, ModelText) and raw.cut
