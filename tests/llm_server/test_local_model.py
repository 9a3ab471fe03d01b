"""The openai provider against a real local model: llama-cpp-python's server, SmolLM2-135M.

What a 135M model concludes is not the point; the point is that the tool loop
completes for real (tool_choice, tool calls, schema-constrained answers), that
every stage's output parses, and that nothing unsupported is confirmed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from diagnosis.contracts import (
    AnswerSource,
    ComposerStatus,
    ParseStatus,
    PlannerOutput,
    SelfEvaluation,
    Verdict,
)
from diagnosis.evaluation import pack_evaluate
from diagnosis.flow.guard import composer_guard
from diagnosis.flow.parsing import model_output_parse
from diagnosis.llm.base import ModelText, Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.llm.recorder import llm_call_recorder
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.selectors import session_self_evaluation
from tests.llm.requests import planner_request
from tests.llm_server.figures import session_figures
from tests.support.agents import agent_answer

pytestmark = [pytest.mark.llm_server, pytest.mark.django_db]

PACK = Path(django_settings.BASE_DIR) / "scenarios" / "payment-pool-saturation"
# What the run cost, per role (README "Running with a local model" quotes it).
FIGURES = Path(django_settings.BASE_DIR) / "artifacts" / "llm_server" / "session.json"


def _stages_parsed(session: DiagnosisSession, evaluation: SelfEvaluation) -> None:
    """Every stage answered in its contract's shape: the bounded grammar closed each one."""
    assert session.plan["status"] == "ok", session.plan
    assert session.executor_output_parse_status in {ParseStatus.PARSED_V2, ParseStatus.PARSED_V1}
    verifier = evaluation.verifier_evaluation
    assert verifier is not None and verifier.status == "ok", verifier
    composer = verifier.composer_output
    # parsed; whether the guard lets it through is the guard's (code's) call
    assert composer is not None and composer.status in {
        ComposerStatus.OK,
        ComposerStatus.GUARD_FAILED,
    }
    statuses = {(c.role, c.status) for c in LLMCall.objects.filter(session=session)}
    assert not {s for _role, s in statuses} - {"ok", "rejected"}, statuses  # nothing truncated


def _tool_loop_completed(session: DiagnosisSession) -> None:
    """tool_choice sent, at least one call persisted, its arguments read as an object."""
    executor_calls = list(
        LLMCall.objects.filter(session=session, role="executor").order_by("sequence")
    )
    choices = [c.request.get("tool_choice") for c in executor_calls]
    # required on the first turn: this server refuses it, the provider falls back to auto
    assert choices[:2] == ["required", "auto"], choices
    assert executor_calls[0].status == "rejected"
    invocations = list(ToolInvocation.objects.filter(session=session))
    assert invocations, "the model called no tool"
    assert all(isinstance(i.arguments, dict) for i in invocations)
    # the answers' schema went inside json_object (this server refuses json_schema)
    formats = {
        (c.request.get("response_format") or {}).get("type")
        for c in LLMCall.objects.filter(session=session, status="ok")
        if "tools" not in c.request
    }
    assert formats == {"json_object"}, formats


def _answer_safe(session: DiagnosisSession, evaluation: SelfEvaluation) -> None:
    """The answer shown passes the Composer guard and confirms nothing unsupported."""
    composer_input = evaluation.composer_input
    verifier = evaluation.verifier_evaluation
    assert composer_input is not None and verifier is not None
    shown = verifier.composer_output
    assert shown is not None and shown.final_answer.strip()
    if shown.source == AnswerSource.COMPOSER:
        assert shown.status == ComposerStatus.OK and not shown.guard_findings
    services = list(session.environment.services or [])
    findings = composer_guard(
        answer=shown.final_answer, composer_input=composer_input, known_services=services
    )
    assert not findings, findings
    assert evaluation.gatekeeper is not None
    accepted = {c.claim_id for c in evaluation.gatekeeper.claims if c.verdict == Verdict.ACCEPTED}
    assert {c.claim_id for c in composer_input.allowed_claims} <= accepted


def test_a_session_on_a_demo_pack_completes_the_tool_loop_and_confirms_nothing_unsupported(
    local_model_settings: Any,
) -> None:
    local_model_settings.LLM_ROLE_SETTINGS["executor"]["tool_choice"] = "required"

    started = time.monotonic()
    result = pack_evaluate(path=PACK, provider="openai")

    figures = session_figures(result, time.monotonic() - started)
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures, ensure_ascii=False, indent=1), encoding="utf-8")
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    assert session.status == DiagnosisSession.Status.COMPLETED, session.error
    assert session.stage == DiagnosisSession.Stage.DONE
    evaluation = session_self_evaluation(session)
    _tool_loop_completed(session)
    _stages_parsed(session, evaluation)
    _answer_safe(session, evaluation)
    assert result.leaked == 0, result.leaked_phrases
    assert result.unsupported_in_answer == 0


def test_a_plan_cut_by_max_tokens_is_recorded_as_truncated(
    local_model_settings: Any, session: DiagnosisSession
) -> None:
    # 24 tokens: less than the plan's structure alone, so even the bounded grammar is cut
    local_model_settings.LLM_ROLE_SETTINGS["planner"]["max_tokens"] = 24
    provider = OpenAIProvider.for_role(Role.PLANNER)
    recorder = llm_call_recorder(session=session, attempt_getter=lambda: 1)

    text = agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)

    assert isinstance(text, ModelText) and text.cut
    result = model_output_parse(text, PlannerOutput)
    assert (result.status, result.output) == ("truncated", None)
    last = LLMCall.objects.filter(session=session).last()
    assert last is not None and last.status == "truncated"
