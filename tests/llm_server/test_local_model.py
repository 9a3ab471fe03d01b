"""The openai provider against a real local model: llama-cpp-python's server, SmolLM2-135M.

What a 135M model concludes is not the point; the point is that the tool loop
completes for real (tool_choice, tool calls, schema-constrained answers), that
every stage's output parses, and that nothing unsupported is confirmed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from diagnosis.contracts import ComposerInput, PlannerOutput
from diagnosis.flow.parsing import model_output_parse
from diagnosis.llm.base import ModelText, Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from tests.llm.requests import planner_request

pytestmark = [pytest.mark.llm_server, pytest.mark.django_db]

PACK = Path(django_settings.BASE_DIR) / "scenarios" / "payment-pool-saturation"
PARSED = {"parsed_v2", "parsed_v1"}
# What the run cost, per role (README "Running with a local model" quotes it).
FIGURES = Path(django_settings.BASE_DIR) / "artifacts" / "llm_server" / "session.json"


def _figures_write(session, seconds: float) -> None:
    calls = list(LLMCall.objects.filter(session=session).order_by("sequence"))
    roles = {}
    for role in ("planner", "executor", "verifier", "composer"):
        mine = [c for c in calls if c.role == role]
        roles[role] = {
            "calls": [
                {
                    "status": c.status,
                    "seconds": round(c.latency_ms / 1000, 1),
                    "tokens_in": c.tokens_in,
                    "tokens_out": c.tokens_out,
                    "response_format": (c.request.get("response_format") or {}).get("type"),
                    "tool_choice": c.request.get("tool_choice"),
                    "error": c.error[:300],
                }
                for c in mine
            ],
            "seconds": round(sum(c.latency_ms for c in mine) / 1000, 1),
        }
    tools = ToolInvocation.objects.filter(session=session).order_by("sequence")
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(
        json.dumps(
            {
                "seconds": round(seconds, 1),
                "roles": roles,
                "parse": {
                    "planner": session.plan.get("status"),
                    "executor": session.executor_output_parse_status,
                    "verifier": session.self_evaluation["verifier_evaluation"].get("status"),
                    "composer": session.self_evaluation["verifier_evaluation"]
                    .get("composer_output", {})
                    .get("status"),
                },
                "tool_calls": [[t.tool_name, t.status, t.arguments] for t in tools],
                "decision": session.decision,
                "answer_source": session.answer_source,
            },
            ensure_ascii=False,
            indent=1,
        ),
        encoding="utf-8",
    )


def test_a_session_on_a_demo_pack_completes_the_tool_loop_and_confirms_nothing_unsupported(
    local_model_settings,
):
    from diagnosis.evaluation import pack_evaluate

    # required on the first Executor turn: this server refuses it, the provider falls back
    local_model_settings.LLM_ROLE_SETTINGS["executor"]["tool_choice"] = "required"

    started = time.monotonic()
    result = pack_evaluate(path=PACK, provider="openai")

    session = DiagnosisSession.objects.get(public_id=result.session_id)
    _figures_write(session, time.monotonic() - started)
    assert session.status == DiagnosisSession.Status.COMPLETED, session.error
    assert session.stage == DiagnosisSession.Stage.DONE

    # the tool loop: tool_choice sent, at least one call persisted, arguments read as objects
    executor_calls = list(LLMCall.objects.filter(session=session, role="executor"))
    choices = [c.request.get("tool_choice") for c in executor_calls]
    assert choices[:2] == ["required", "auto"], choices
    assert executor_calls[0].status == "rejected"
    invocations = list(ToolInvocation.objects.filter(session=session))
    assert invocations, "the model called no tool"
    assert all(isinstance(i.arguments, dict) for i in invocations)

    # every stage answered in its contract's shape (the grammar made it so), or, where the
    # small budget cut it, is recorded as truncated with a truncated call: never a fragment
    evaluation = session.self_evaluation
    assert session.plan["status"] == "ok", session.plan
    executor_status = session.executor_output_parse_status
    assert executor_status in PARSED | {"truncated"}, executor_status
    verifier_status = evaluation["verifier_evaluation"]["status"]
    assert verifier_status in {"ok", "truncated"}, evaluation["verifier_evaluation"]
    for role, status in (("executor", executor_status), ("verifier", verifier_status)):
        if status == "truncated":
            last = LLMCall.objects.filter(session=session, role=role).last()
            assert last is not None and last.status == "truncated", role
    composer = evaluation["verifier_evaluation"]["composer_output"]
    assert composer["status"] in {"ok", "guard_failed"}, composer  # parsed, guarded by code
    formats = {
        (c.request.get("response_format") or {}).get("type")
        for c in LLMCall.objects.filter(session=session, status="ok")
        if c.role != "executor" or "tools" not in c.request
    }
    assert formats == {"json_object"}, formats  # json_schema refused, the schema inside json_object

    # the answer: safe, guarded, nothing unsupported stated as fact
    composer_input = ComposerInput.model_validate(evaluation["composer_input"])
    # the Composer guard ran on the composed text (the flow then appends the window line)
    if composer["source"] == "composer":
        assert composer["status"] == "ok" and not composer["guard_findings"], composer
    assert session.final_answer.strip()
    assert result.leaked == 0, result.leaked_phrases
    assert result.unsupported_in_answer == 0
    accepted = {
        c["claim_id"] for c in evaluation["gatekeeper"]["claims"] if c["verdict"] == "accepted"
    }
    assert {c.claim_id for c in composer_input.allowed_claims} <= accepted


def test_a_plan_cut_by_max_tokens_is_recorded_as_truncated(local_model_settings, session):
    from diagnosis.llm.recorder import llm_call_recorder

    local_model_settings.LLM_ROLE_SETTINGS["planner"]["max_tokens"] = 24
    provider = OpenAIProvider.for_role(Role.PLANNER)
    recorder = llm_call_recorder(session=session, attempt_getter=lambda: 1)

    text = provider.plan(planner_request(), recorder=recorder)

    assert isinstance(text, ModelText) and text.cut
    result = model_output_parse(text, PlannerOutput)
    status, plan, _detail = result.status, result.output, result.detail
    assert (status, plan) == ("truncated", None)
    assert LLMCall.objects.filter(session=session).last().status == "truncated"
