"""The Executor stage: the model calls the evidence tools and answers with claims.

For a chat model the tool loop is here, once, above every transport: the first turn
asks for a tool (``tool_choice``, ``required`` by default), each call runs through
the tool runner and goes back as a ``tool`` message, and when the model stops
calling tools without a complete answer (no content, prose, a cut object) it is
asked once more for the answer alone, without tools and with the contract's schema,
so a grammar-constrained server makes it schema-valid. After
``LLM_EXECUTOR_MAX_TOOL_ROUNDS`` rounds it is told to answer with what it has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from diagnosis.contracts import ExecutorEvidenceV2, ParseStatus
from diagnosis.flow.parsing import ParsedExecutorOutput, executor_output_parse
from diagnosis.llm.base import (
    Agent,
    CallRecorder,
    ChatModel,
    ChatReply,
    ExecutorRequest,
    LLMError,
    ModelText,
    Role,
    RoleAnswerer,
    ToolCall,
    ToolRunner,
)
from diagnosis.llm.prompts import prompt_messages, prompt_render, prompt_services

# The contract this stage's answer is asked for and read with.
CONTRACT = ExecutorEvidenceV2

_ANSWERED = {ParseStatus.PARSED_V2, ParseStatus.PARSED_V1}


@dataclass(frozen=True)
class ExecutorResult:
    """The Executor's raw answer, its tolerant parse, and the provider error if any."""

    raw: str
    parsed: ParsedExecutorOutput
    error: str


def executor_messages(request: ExecutorRequest) -> list[dict[str, str]]:
    return prompt_messages(
        "executor",
        question=request.question,
        language=request.language,
        now=request.now,
        window=request.window,
        services=prompt_services(
            request.services,
            first=[str(s) for s in request.plan.get("services") or [] if isinstance(s, str)],
            text=request.question,
        ),
        plan=request.plan,
        attempt=str(request.attempt),
        retry_context=request.retry_context,
    )


def _tool_message_content(result: Any) -> str:
    trace_ref = getattr(result, "trace_ref", "trace-?")
    status = getattr(result, "status", "error")
    output = getattr(result, "output", "")
    return f"[{trace_ref} {status}]\n{output}"


# Real servers put raw newlines and tabs inside argument strings (a grammar allows them).
_ARGUMENTS_DECODER = json.JSONDecoder(strict=False)


def _arguments_for_runner(raw: Any) -> object:
    """A dict when the model sent a JSON object; otherwise the raw value, so
    ``tool_invoke`` records an error invocation that shows what the model sent.

    Missing or empty arguments are ``{}``; a JSON string that itself holds the
    JSON object (double-encoded) is unwrapped once.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    for _ in range(2):
        if not text:
            return {}
        try:
            value, end = _ARGUMENTS_DECODER.raw_decode(text)
        except ValueError:
            return raw
        if text[end:].strip():
            return raw  # something after the object: show the model what it sent
        if isinstance(value, str):
            text = value.strip()
            continue
        return value if isinstance(value, dict) else raw
    return raw


def _answered(reply: ChatReply) -> bool:
    """Is this reply's content a complete Executor answer (not prose, not a cut object)?"""
    return executor_output_parse(reply.text()).status in _ANSWERED


def _tool_result_message(call: ToolCall, result: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": _tool_message_content(result)}


def _assistant_turn(reply: ChatReply, round_no: int) -> dict[str, Any]:
    calls = []
    for index, call in enumerate(reply.tool_calls):
        if not call.id:
            call.id = f"call_{round_no}_{index}"
        arguments = call.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            }
        )
    # a string, never null: llama-cpp-python's server refuses an assistant message whose
    # content is null (HTTP 500), and OpenAI accepts an empty one beside tool_calls
    return {"role": "assistant", "content": reply.content or "", "tool_calls": calls}


def executor_loop(
    *,
    model: ChatModel,
    messages: list[dict[str, Any]],
    tools: ToolRunner,
    tool_specs: list[dict[str, Any]],
    recorder: CallRecorder,
) -> ModelText:
    """The Executor's tool loop against a chat model; its last reply's text."""
    messages = list(messages)
    max_rounds = settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS
    rounds_spent = not tool_specs
    later_choice = "none" if model.tool_choice == "none" else "auto"
    for round_no in range(max_rounds if tool_specs else 0):
        reply = model.chat(
            messages,
            role=Role.EXECUTOR,
            recorder=recorder,
            tools=tool_specs,
            tool_choice=model.tool_choice if round_no == 0 else later_choice,
        )
        if not reply.tool_calls:
            if _answered(reply):
                return reply.text()
            if reply.content.strip():
                messages.append({"role": "assistant", "content": reply.content})
            messages.append({"role": "user", "content": prompt_render("executor_answer_turn")})
            break
        messages.append(_assistant_turn(reply, round_no))
        for call in reply.tool_calls:
            result = tools(call.name, _arguments_for_runner(call.arguments))
            messages.append(_tool_result_message(call, result))
    else:
        rounds_spent = True
    if rounds_spent and tool_specs:
        final_turn = prompt_render("executor_final_turn", max_tool_rounds=str(max_rounds))
        messages.append({"role": "user", "content": final_turn.strip()})
    return model.chat(messages, role=Role.EXECUTOR, recorder=recorder, schema=CONTRACT).text()


def executor_answer(
    *,
    request: ExecutorRequest,
    agent: Agent,
    recorder: CallRecorder,
    tools: ToolRunner,
    tool_specs: list[dict[str, Any]],
) -> str:
    """The Executor's raw answer: an answerer's own, or a chat model's through the tool loop.
    A call that failed for good raises ``LLMError``."""
    if isinstance(agent, RoleAnswerer):
        return agent.answer(Role.EXECUTOR, request, recorder=recorder, tools=tools)
    return executor_loop(
        model=agent,
        messages=executor_messages(request),
        tools=tools,
        tool_specs=tool_specs,
        recorder=recorder,
    )


def executor_stage(
    *,
    request: ExecutorRequest,
    agent: Agent,
    recorder: CallRecorder,
    tools: ToolRunner,
    tool_specs: list[dict[str, Any]],
) -> ExecutorResult:
    """Run the Executor with ``tools``; a provider failure is an empty answer and its error."""
    error = ""
    try:
        raw = executor_answer(
            request=request, agent=agent, recorder=recorder, tools=tools, tool_specs=tool_specs
        )
    except LLMError as exc:
        raw, error = "", f"{exc.status}: {exc}"
    return ExecutorResult(raw=raw or "", parsed=executor_output_parse(raw), error=error)
