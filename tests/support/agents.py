"""Asking one role's agent outside a run, as the stage modules ask it (a test's shortcut)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from diagnosis.flow import composer, executor, planner, verifier
from diagnosis.flow.agent import role_ask
from diagnosis.flow.composer import composer_messages
from diagnosis.flow.executor import executor_answer
from diagnosis.flow.planner import planner_messages
from diagnosis.flow.verifier import verifier_messages
from diagnosis.llm.base import Agent, CallRecorder, Role, RoleRequest, ToolRunner

# What each role's answer must be: the contract its stage module names.
ROLE_CONTRACTS: dict[Role, type[BaseModel]] = {
    Role.PLANNER: planner.CONTRACT,
    Role.EXECUTOR: executor.CONTRACT,
    Role.VERIFIER: verifier.CONTRACT,
    Role.COMPOSER: composer.CONTRACT,
}

_MESSAGES = {
    Role.PLANNER: planner_messages,
    Role.VERIFIER: verifier_messages,
    Role.COMPOSER: composer_messages,
}


def agent_answer(
    agent: Agent,
    role: Role,
    request: RoleRequest,
    *,
    recorder: CallRecorder,
    tools: ToolRunner | None = None,
    tool_specs: list[dict[str, Any]] | None = None,
) -> str:
    """The agent's raw answer for ``role``, as its stage gets it (a failed call raises
    ``LLMError``)."""
    if role is Role.EXECUTOR:
        return executor_answer(
            request=request,  # type: ignore[arg-type]
            agent=agent,
            recorder=recorder,
            tools=tools or (lambda name, arguments: None),
            tool_specs=list(tool_specs or []),
        )
    return role_ask(
        agent=agent,
        role=role,
        request=request,
        messages=lambda: _MESSAGES[role](request),  # type: ignore[operator]
        contract=ROLE_CONTRACTS[role],
        recorder=recorder,
    )
