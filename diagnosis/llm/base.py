"""The one boundary between the flow and what answers a role.

Two kinds of agent answer a role. A ``ChatModel`` is a transport: ``chat(messages,
*, tools, tool_choice, schema, max_tokens)`` returns one ``ChatReply`` and knows
nothing of roles but the name it records the call under; the flow builds each
stage's messages and runs the Executor's tool loop above it. A ``RoleAnswerer``
(the offline engine, a scripted replay) answers a role's request itself, with the
role's contract. Either way the flow gets the raw text and parses it tolerantly,
so the offline engine and a real model go through the same parsing and checking.
A call that fails for good raises ``LLMError`` after the recorder has written
its row; the flow turns that into a recorded status and a safe fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

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
    # The environment has spans (trace files or a trace backend): query_traces can answer.
    has_traces: bool = False


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


@dataclass
class ToolCall:
    """One tool call a model asked for: ``arguments`` as the model sent them (usually a
    JSON string); ``id`` may be empty (the loop numbers it)."""

    id: str
    name: str
    arguments: Any


@dataclass
class ChatReply:
    """One model reply: its text, how it ended (``finish_reason``), the tools it called."""

    content: str
    finish_reason: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    def text(self) -> ModelText:
        return ModelText(self.content, finish_reason=self.finish_reason)


@runtime_checkable
class ChatModel(Protocol):
    """A transport to one chat model; ``tool_choice`` is what to ask on a first tool turn."""

    name: str
    model: str
    tool_choice: str

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        role: Role,
        recorder: CallRecorder,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str = "auto",
        schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply: ...


# What a role is asked: the Planner's and Executor's requests, the Verifier's payload,
# the Composer's input.
RoleRequest = PlannerRequest | ExecutorRequest | VerifierPayload | ComposerInput


@runtime_checkable
class RoleAnswerer(Protocol):
    """Answers a role's request itself, with the role's contract (offline, scripted);
    ``tools`` runs the Executor's calls."""

    name: str

    def answer(
        self,
        role: Role,
        request: RoleRequest,
        *,
        recorder: CallRecorder,
        tools: ToolRunner | None = None,
    ) -> str: ...


# What the flow may ask for a role.
Agent = ChatModel | RoleAnswerer


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
