"""Calling tools: ``tool_specs`` for the model and ``tool_invoke``, which runs one call and
persists it as a ToolInvocation. Which tools exist is the registry,
:mod:`diagnosis.evidence.tools`.

``tool_invoke`` never raises for what a model sends: unknown tools, bad arguments, broken
backends and timeouts all become an invocation row with status ``error`` or ``timeout``
and a message the model can act on. A call a scenario pack recorded is replayed instead
of run.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.db.models import Max
from django.utils import timezone

from diagnosis.db import insert_guarded
from diagnosis.evidence.common import (
    BackendOutput,
    Deadline,
    ToolFailure,
    ToolTimeout,
    clamps_apply,
)
from diagnosis.evidence.recorded import recorded_find
from diagnosis.evidence.tools import tool_definition, tool_definitions, tool_names
from diagnosis.evidence.tools.base import ToolCall, ToolDefinition
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from diagnosis.storable import nul_free

logger = logging.getLogger(__name__)

TRUNCATION_MARKER = "\n[output truncated: {shown} of {total} characters shown]"


@dataclass(frozen=True)
class ToolResult:
    invocation_id: int
    trace_ref: str
    tool_name: str
    status: str
    output: str
    summary: dict[str, Any]


def tool_specs() -> list[dict[str, Any]]:
    """The registered tools for OpenAI Chat Completions ``tools=``."""
    return [definition.spec() for definition in tool_definitions()]


# --- invocation -------------------------------------------------------------


def output_bound(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut ``text`` at a line boundary so that it and the marker fit in ``max_chars``."""
    if len(text) <= max_chars:
        return text, False
    marker_room = len(TRUNCATION_MARKER.format(shown=max_chars, total=len(text)))
    cut = max(max_chars - marker_room, 0)
    newline = text.rfind("\n", 0, cut)
    if newline > cut // 2:
        cut = newline
    return text[:cut] + TRUNCATION_MARKER.format(shown=cut, total=len(text)), True


def _arguments_read(arguments: object) -> dict[str, Any]:
    if isinstance(arguments, str):
        # Function-calling APIs deliver arguments as a JSON string; accept that form too.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolFailure(
                f"arguments are not valid JSON ({exc.msg}); send a JSON object"
            ) from None
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise ToolFailure(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


class InvocationCounter:
    """Numbers one runner's ToolInvocation rows of a session after the first one.

    The first row reads the session's last sequence; each later one is one INSERT. A
    clash with the unique (session, sequence) constraint means another runner wrote
    rows meanwhile (a worker that took the session over, or was taken over): the row
    is retried after reading the last sequence again, so no sequence or trace_ref is
    ever reused.
    """

    def __init__(self, last: int | None = None) -> None:
        self.last = last  # None: read it before the first row

    def next(self, session: DiagnosisSession) -> int:
        if self.last is None:
            last = ToolInvocation.objects.filter(session=session).aggregate(m=Max("sequence"))
            self.last = last["m"] or 0
        return self.last + 1


def _invocation_save(
    *,
    session: DiagnosisSession,
    counter: InvocationCounter,
    attempt: int,
    tool_name: str,
    arguments: dict[str, Any],
    status: str,
    output: str,
    output_size: int,
    truncated: bool,
    summary: dict[str, Any],
    error: str,
    started_at: datetime,
    duration_ms: int,
) -> ToolInvocation:
    """One ToolInvocation row of ``session``, numbered by ``counter``."""
    fields = {
        "attempt": attempt,
        "tool_name": tool_name[:50],
        "arguments": arguments,
        "status": status,
        "output": output,
        "output_size": output_size,
        "truncated": truncated,
        "summary": summary,
        "error": error,
        "started_at": started_at,
        "duration_ms": duration_ms,
    }
    for retry in range(5):
        sequence = counter.next(session)
        try:
            with insert_guarded():
                row = ToolInvocation.objects.create(
                    session=session, sequence=sequence, trace_ref=f"trace-{sequence}", **fields
                )
        except IntegrityError:
            counter.last = None  # another runner took the number: read the last one
            if retry == 4:
                raise
            continue
        counter.last = sequence
        return row
    raise AssertionError("unreachable")


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class _Outcome:
    status: str
    output: str
    summary: dict[str, Any]
    error: str
    arguments: dict[str, Any]  # as stored: the model's, parsed when they parse
    definition: ToolDefinition | None = None  # None for an unknown tool


def _definition(tool_name: str) -> ToolDefinition:
    definition = tool_definition(tool_name)
    if definition is None:
        raise ToolFailure(f"unknown tool {tool_name!r}; available tools: {', '.join(tool_names())}")
    return definition


def _call_run(
    *,
    definition: ToolDefinition,
    session: DiagnosisSession,
    tool_name: str,
    given: dict[str, Any],
    deadline: Deadline,
) -> BackendOutput:
    """The arguments cleaned, then the recorded answer or the backend's, within the deadline."""
    clamps: dict[str, dict[str, Any]] = {}
    cleaned = definition.clean(given, clamps)
    call = ToolCall(
        session=session,
        environment=session.environment,
        tool_name=tool_name,
        given=given,
        args=cleaned,
        deadline=deadline,
        clamps=clamps,
    )
    result = _replay(call, definition) or clamps_apply(definition.run(call), call.clamps)
    deadline.check()
    return result


def _outcome(
    *, session: DiagnosisSession, tool_name: str, arguments: object, timeout_seconds: float
) -> _Outcome:
    """What the call gave; every failure becomes an error or timeout outcome, never raised."""
    deadline = Deadline.after(timeout_seconds)
    stored: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
    error = ""
    definition: ToolDefinition | None = None
    try:
        definition = _definition(tool_name)
        given = _arguments_read(arguments)
        stored = given
        result = _call_run(
            definition=definition,
            session=session,
            tool_name=tool_name,
            given=given,
            deadline=deadline,
        )
        status, output, summary = result.status, result.output, result.summary
        if status in {ToolInvocation.Status.ERROR, ToolInvocation.Status.TIMEOUT}:
            error = output
    except ToolFailure as exc:
        error = str(exc)
        status, output, summary = ToolInvocation.Status.ERROR, f"error: {error}", {"error": error}
    except ToolTimeout as exc:
        error = f"{tool_name} timed out after {timeout_seconds:g}s: {exc}"
        status, output, summary = (
            ToolInvocation.Status.TIMEOUT,
            f"timeout: {error}",
            {"error": error},
        )
    except Exception as exc:  # a backend bug must not end the diagnosis
        logger.exception("tool %s failed", tool_name)
        error = f"the {tool_name} backend failed: {type(exc).__name__}: {exc}"
        status, output, summary = ToolInvocation.Status.ERROR, f"error: {error}", {"error": error}
    return _Outcome(
        status=status,
        output=output,
        summary=summary,
        error=error,
        arguments=stored,
        definition=definition,
    )


def tool_invoke(
    *,
    session: DiagnosisSession,
    attempt: int,
    tool_name: str,
    arguments: object,
    counter: InvocationCounter | None = None,
) -> ToolResult:
    """Run one tool call and persist it as a ToolInvocation before returning its result.

    A runner passes its ``counter`` so that each call after its first is one INSERT.
    """
    started_at = timezone.now()
    started = time.monotonic()
    outcome = _outcome(
        session=session,
        tool_name=tool_name,
        arguments=arguments,
        timeout_seconds=float(settings.TOOL_TIMEOUT_SECONDS),
    )
    output, error, summary = (
        nul_free(outcome.output),
        nul_free(outcome.error),
        nul_free(outcome.summary),
    )
    bounded, truncated = output_bound(output, int(settings.TOOL_OUTPUT_MAX_CHARS))
    if truncated and "error" not in summary and outcome.definition is not None:
        summary = outcome.definition.summary_cut(summary, bounded)
    invocation = _invocation_save(
        session=session,
        counter=counter or InvocationCounter(),
        attempt=attempt,
        tool_name=nul_free(tool_name if isinstance(tool_name, str) else repr(tool_name)),
        arguments=nul_free(_json_safe(outcome.arguments)),
        status=outcome.status,
        output=bounded,
        output_size=len(output),
        truncated=truncated,
        summary=_json_safe(summary),
        error=error,
        started_at=started_at,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    return ToolResult(
        invocation_id=invocation.pk,
        trace_ref=invocation.trace_ref,
        tool_name=invocation.tool_name,
        status=invocation.status,
        output=invocation.output,
        summary=invocation.summary,
    )


def _replay(call: ToolCall, definition: ToolDefinition) -> BackendOutput | None:
    env = call.environment
    if env.kind != Environment.Kind.SCENARIO:
        return None
    recorded_path: Path | None = call.pack.paths.recorded
    if recorded_path is None or not definition.recordable:
        return None
    found = recorded_find(path=recorded_path, tool_name=call.tool_name, arguments=call.given)
    if found is None:
        return None
    summary = found.summary if found.summary is not None else definition.empty_summary()
    summary = {**summary, "recorded": True}
    if found.status in {"error", "timeout"}:
        summary.setdefault("error", found.output)
    return BackendOutput(status=found.status, output=found.output, summary=summary)
