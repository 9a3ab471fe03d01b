"""Asking a role's agent: a chat model gets the stage's messages, an answerer the request.

The stage module builds its messages (from its prompt) and names its contract; a
``RoleAnswerer`` (the offline engine, a scripted replay) answers the request itself
and never needs them, so they are built only for a chat model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from diagnosis.llm.base import Agent, CallRecorder, Role, RoleAnswerer, RoleRequest


def role_ask(
    *,
    agent: Agent,
    role: Role,
    request: RoleRequest,
    messages: Callable[[], list[dict[str, Any]]],
    contract: type[BaseModel],
    recorder: CallRecorder,
) -> str:
    """The agent's raw answer to one role's request (a model's with ``finish_reason``)."""
    if isinstance(agent, RoleAnswerer):
        return agent.answer(role, request, recorder=recorder)
    return agent.chat(messages(), role=role, recorder=recorder, schema=contract).text()
