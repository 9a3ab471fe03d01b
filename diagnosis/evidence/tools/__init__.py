"""The tool registry: every tool the Executor can call, each in its own folder.

``diagnosis/evidence/tools/<name>/`` holds one tool: ``definition.py`` with its
``DEFINITION`` (a :class:`~diagnosis.evidence.tools.base.ToolDefinition`: name,
description, JSON-schema arguments, ``kind`` evidence/knowledge, how its summary becomes
facts, whether it can be recorded, whether it is charted) and its backends beside it.

Everything that needs to know which tools exist asks here: the model's tool specs and
``tool_invoke`` (``diagnosis.evidence.invoke``), pack validation (which tools a recorded
invocation may name), replay, the Gatekeeper (a tool's ``kind``: whether its output is observed
evidence a direct claim can rest on), the trace summary (``ToolDefinition.summary_facts``),
the prompts (``{{ tool_catalogue }}`` and friends, filled by ``diagnosis.llm.prompts``)
and the offline planner.

A new tool: its folder, and its ``DEFINITION`` imported into ``_BUILT_IN`` below; nothing
else has to change. Tests register a fake tool
with ``tool_registered(definition)`` (or ``tool_register``/``tool_unregister``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from diagnosis.evidence.tools.base import ToolDefinition
from diagnosis.evidence.tools.lookup_knowledge.definition import DEFINITION as LOOKUP_KNOWLEDGE
from diagnosis.evidence.tools.query_logs.definition import DEFINITION as QUERY_LOGS
from diagnosis.evidence.tools.query_metrics.definition import DEFINITION as QUERY_METRICS
from diagnosis.evidence.tools.query_traces.definition import DEFINITION as QUERY_TRACES

_BUILT_IN = (QUERY_METRICS, QUERY_LOGS, QUERY_TRACES, LOOKUP_KNOWLEDGE)

# name -> definition, in the order the model is shown them.
TOOLS: dict[str, ToolDefinition] = {d.name: d for d in _BUILT_IN}


def tool_definitions() -> tuple[ToolDefinition, ...]:
    """Every registered tool, in the order the model is shown them."""
    return tuple(TOOLS.values())


def tool_definition(name: str) -> ToolDefinition | None:
    """The tool called ``name``, or None when no such tool is registered."""
    return TOOLS.get(name)


def tool_names() -> tuple[str, ...]:
    """Every registered tool's name, in the order the model is shown them."""
    return tuple(TOOLS)


def evidence_tool_names() -> frozenset[str]:
    """Tools whose output is observed data (``kind == "evidence"``), not runbook text."""
    return frozenset(d.name for d in TOOLS.values() if d.kind == "evidence")


def recordable_tool_names() -> tuple[str, ...]:
    """Tools a pack's ``recorded/invocations.jsonl`` may hold calls of, in registry order."""
    return tuple(d.name for d in TOOLS.values() if d.recordable)


def tool_register(definition: ToolDefinition) -> None:
    """Add a tool; a name already registered is refused (``ValueError``)."""
    if definition.name in TOOLS:
        raise ValueError(f"a tool named {definition.name!r} is already registered")
    TOOLS[definition.name] = definition


def tool_unregister(name: str) -> None:
    """Remove the tool called ``name`` (nothing happens when there is none)."""
    TOOLS.pop(name, None)


@contextmanager
def tool_registered(definition: ToolDefinition) -> Iterator[ToolDefinition]:
    """The tool registered for the ``with`` block, removed after it (for tests)."""
    tool_register(definition)
    try:
        yield definition
    finally:
        tool_unregister(definition.name)
