"""The ``offline`` engine: deterministic and evidence-driven, it answers the four roles.

A sibling of the flow, not a model: ``OfflineEngine.answer`` answers a role's request
with the role's contract, picked from one table (``ROLE_ANSWERS``), and records the
call as a model call (provider ``offline``), so the audit trail reads the same.

It is the default when no model endpoint is configured, so a fresh machine
diagnoses for real: the Planner reads services, window and symptoms from the
question; the Executor queries metrics and logs, ranks services against their
own baselines and writes claims whose excerpts are copied from tool output; the
Verifier classifies each claim from the Verifier payload alone; the Composer
renders only the filtered material. Same inputs, same output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnosis.contracts import ComposerInput, VerifierPayload
from diagnosis.llm.base import (
    CallRecorder,
    ExecutorRequest,
    PlannerRequest,
    Role,
    RoleRequest,
    ToolRunner,
)

from .common import MODEL_NAME, PROVIDER_NAME, clock, json_dump, record_call
from .composer import compose_run
from .executor import execute_run
from .planner import plan_build
from .verifier import verify_run

__all__ = ["MODEL_NAME", "OfflineEngine"]


# Each role's answer and what its call record keeps of the request (bounded: counts, not
# lists that grow with the fleet). The engine times and records every role the same way.
RoleAnswer = tuple[str, dict[str, Any]]


def _plan(request: PlannerRequest, tools: ToolRunner | None) -> RoleAnswer:
    raw = plan_build(request).model_dump_json()
    return raw, {
        "question": request.question,
        "language": request.language,
        "now": request.now,
        "window": request.window,
        # the count, not the list: a 1,000-service fleet would make every audit
        # row (and the cost estimate) grow with the fleet; the plan names the
        # services it picked
        "services": len(request.services),
        "history_turns": len(request.history or []),
        "alert": bool(request.alert),
    }


def _execute(request: ExecutorRequest, tools: ToolRunner | None) -> RoleAnswer:
    if tools is None:
        raise TypeError("the offline executor needs a tool runner")
    output, evidence = execute_run(request, tools)
    raw = json_dump(output.model_dump(mode="json"))
    return raw, {
        "question": request.question,
        "language": request.language,
        "window": request.window,
        "plan_services": list(request.plan.get("services") or []),
        "attempt": request.attempt,
        "retry": bool(request.retry_context),
        "tool_calls": [
            {
                "tool": c.tool_name,
                "arguments": c.arguments,
                "trace_ref": c.trace_ref,
                "status": c.status,
            }
            for c in evidence.calls
        ],
    }


def _verify(payload: VerifierPayload, tools: ToolRunner | None) -> RoleAnswer:
    raw = verify_run(payload).model_dump_json()
    return raw, {
        "original_query": payload.original_query,
        "parse_status": payload.executor_output_parse_status.value,
        "claims": payload.gatekeeper.counts.model_dump(),
        "trace_entries": len(payload.tool_trace_summary),
        "retry": payload.retry_context is not None,
    }


def _compose(composer_input: ComposerInput, tools: ToolRunner | None) -> RoleAnswer:
    raw = json_dump(compose_run(composer_input).model_dump(mode="json"))
    return raw, {
        "decision": composer_input.decision.value,
        "language": composer_input.language,
        "allowed_claims": len(composer_input.allowed_claims),
        "allowed_hypotheses": len(composer_input.allowed_hypotheses),
        "missing_info": len(composer_input.missing_info),
        "recommended_actions": len(composer_input.recommended_actions),
    }


# Each role: the request it takes and how the engine answers it.
ROLE_ANSWERS: dict[Role, tuple[type, Callable[..., RoleAnswer]]] = {
    Role.PLANNER: (PlannerRequest, _plan),
    Role.EXECUTOR: (ExecutorRequest, _execute),
    Role.VERIFIER: (VerifierPayload, _verify),
    Role.COMPOSER: (ComposerInput, _compose),
}


class OfflineEngine:
    """The flow's ``RoleAnswerer`` when settings pick ``offline`` for a role."""

    name = PROVIDER_NAME
    model = MODEL_NAME

    def answer(
        self,
        role: Role,
        request: RoleRequest,
        *,
        recorder: CallRecorder,
        tools: ToolRunner | None = None,
    ) -> str:
        kind, run = ROLE_ANSWERS[Role(role)]
        if not isinstance(request, kind):
            raise TypeError(f"the offline {role} answers a {kind.__name__}, not {request!r:.80}")
        started = clock()
        raw, recorded = run(request, tools)
        record_call(recorder, role=Role(role), request=recorded, raw_response=raw, started=started)
        return raw
