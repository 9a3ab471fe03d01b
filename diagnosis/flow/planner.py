"""The Planner stage: where to look (services, window, tools) for one question."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from diagnosis.contracts import PlannerOutput
from diagnosis.evidence import timeutil
from diagnosis.evidence.timeutil import rfc3339
from diagnosis.flow.agent import role_ask
from diagnosis.llm.base import Agent, CallRecorder, LLMError, PlannerRequest, Role
from diagnosis.llm.parsing import Params, Parsed, model_output_parse
from diagnosis.llm.prompts import prompt_messages, prompt_services

# The contract this stage's answer is asked for and read with.
CONTRACT = PlannerOutput


@dataclass(frozen=True)
class PlannerResult:
    """The plan (None when unusable), how its parse went, and the window the run uses."""

    status: str
    detail: str
    plan: PlannerOutput | None
    window: dict[str, str]
    detail_code: str = ""  # ``detail`` as a code when the plan did not parse (parsing.Parsed)
    detail_params: Params = field(default_factory=dict)


def planner_messages(request: PlannerRequest) -> list[dict[str, str]]:
    return prompt_messages(
        "planner",
        question=request.question,
        language=request.language,
        now=request.now,
        window_hint=request.window,
        services=prompt_services(request.services, text=request.question),
        history=request.history,
        alert=request.alert,
    )


def time_parse(value: object) -> datetime | None:
    """A moment a plan or a request names, in the zone it names (UTC when none), or None."""
    return timeutil.time_parse(value, strict=False, to_utc=False)


def effective_window(
    *, plan: PlannerOutput | None, hint: dict[str, Any] | None, now: datetime
) -> dict[str, str]:
    """The Planner's window when it is sane, else the hint, else the 30 minutes before now."""
    for candidate in (plan.window.model_dump() if plan and plan.window else None, hint):
        if not isinstance(candidate, dict):
            continue
        start, end = time_parse(candidate.get("start")), time_parse(candidate.get("end"))
        if start and end and start < end and end - start <= timedelta(days=7):
            return {"start": rfc3339(start), "end": rfc3339(end)}
    return {"start": rfc3339(now - timedelta(minutes=30)), "end": rfc3339(now)}


def planner_stage(
    *,
    request: PlannerRequest,
    agent: Agent,
    recorder: CallRecorder,
    now: datetime,
    hinted_services: list[str],
) -> PlannerResult:
    """Ask the Planner; a failed or malformed plan is a recorded status and no plan."""
    parsed: Parsed[PlannerOutput] = Parsed("error", None, "")
    try:
        raw = role_ask(
            agent=agent,
            role=Role.PLANNER,
            request=request,
            messages=lambda: planner_messages(request),
            contract=CONTRACT,
            recorder=recorder,
        )
        parsed = model_output_parse(raw, CONTRACT)
    except LLMError as exc:
        parsed = Parsed(exc.status, None, str(exc))
    plan = parsed.output
    if plan is not None and not plan.services and hinted_services:
        plan.services = hinted_services  # the requester named the services; the Planner none
    window = effective_window(plan=plan, hint=request.window, now=now)
    return PlannerResult(
        status=parsed.status,
        detail=parsed.detail,
        plan=plan,
        window=window,
        detail_code=parsed.detail_code,
        detail_params=parsed.detail_params,
    )
