"""The Executor stage: the model calls the evidence tools and answers with claims."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnosis.flow.parsing import ParsedExecutorOutput, executor_output_parse
from diagnosis.llm.base import (
    AgentProvider,
    CallRecorder,
    ExecutorRequest,
    LLMError,
    ToolRunner,
)


@dataclass(frozen=True)
class ExecutorResult:
    """The Executor's raw answer, its tolerant parse, and the provider error if any."""

    raw: str
    parsed: ParsedExecutorOutput
    error: str


def executor_stage(
    *,
    request: ExecutorRequest,
    agent: AgentProvider,
    recorder: CallRecorder,
    tools: ToolRunner,
    tool_specs: list[dict[str, Any]],
) -> ExecutorResult:
    """Run the Executor with ``tools``; a provider failure is an empty answer and its error."""
    error = ""
    try:
        raw = agent.execute(request, tools=tools, tool_specs=tool_specs, recorder=recorder)
    except LLMError as exc:
        raw, error = "", f"{exc.status}: {exc}"
    return ExecutorResult(raw=raw or "", parsed=executor_output_parse(raw), error=error)
