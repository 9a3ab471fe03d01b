"""A reply cut by max_tokens is never a plan, a verdict or an evidence report by accident."""

from __future__ import annotations

import json

import pytest

from diagnosis.contracts import ParseStatus, PlannerOutput, VerifierOutput
from diagnosis.flow.parsing import executor_output_parse, json_object_extract, model_output_parse
from diagnosis.llm.base import ModelText, Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.llm.scripted import ScriptedProvider
from diagnosis.models import LLMCall
from tests.llm.requests import planner_request
from tests.support.agents import agent_answer
from tests.support.openai_server import Reply

PLAN = {
    "plan_version": "planner_v1",
    "services": ["payment-service"],
    "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
    "symptoms": ["大量超时"],
    "focus": ["连接池"],
    "tools": ["query_logs"],
    "notes": "先看日志",
}
WHOLE_PLAN = json.dumps(PLAN, ensure_ascii=False)
# cut after the window: the nested window object is complete, the plan is not
CUT_PLAN = WHOLE_PLAN[: WHOLE_PLAN.index('"symptoms"') + 15]


def test_a_plan_cut_after_its_window_is_truncated_not_an_empty_plan():
    result = model_output_parse(CUT_PLAN, PlannerOutput)
    status, plan, detail = result.status, result.output, result.detail

    assert status == ParseStatus.TRUNCATED.value
    assert plan is None
    assert "cut off" in detail


def test_a_cut_evidence_report_is_truncated_even_when_a_binding_inside_it_is_complete():
    report = (
        '{"answer_version": "executor_evidence_v2", "claims": [{"claim_id": "claim-1", '
        '"evidence_bindings": [{"source_type": "tool_trace", "source_id": "trace-1", '
        '"evidence_excerpt": "Connection is not available"}], "claim_text": "payment-ser'
    )

    parsed = executor_output_parse(report)

    assert parsed.status == ParseStatus.TRUNCATED
    assert parsed.output is None


def test_a_whole_object_followed_by_cut_prose_still_counts_when_the_reply_hit_max_tokens():
    text = ModelText(WHOLE_PLAN + "\n\nExplanation: first I will look at", finish_reason="length")

    result = model_output_parse(text, PlannerOutput)
    status, plan, _detail = result.status, result.output, result.detail

    assert status == "ok"
    assert isinstance(plan, PlannerOutput) and plan.services == ["payment-service"]


def test_a_reply_cut_before_any_json_is_truncated_rather_than_invalid():
    text = ModelText("Sure, here is the verdict you asked for:", finish_reason="length")

    assert model_output_parse(text, VerifierOutput).status == "truncated"
    assert model_output_parse(str(text), VerifierOutput).status == "invalid_json"


def test_braces_in_prose_before_a_complete_object_do_not_hide_it():
    text = 'Query {service} first, then: {"plan_version": "planner_v1", "services": ["mysql"]}'

    result = model_output_parse(text, PlannerOutput)
    status, plan, _ = result.status, result.output, result.detail

    assert status == "ok" and isinstance(plan, PlannerOutput) and plan.services == ["mysql"]


def test_a_raw_newline_inside_a_string_is_read_not_rejected():
    # a grammar-constrained server lets the model write one
    status, value = json_object_extract('{"notes": "line one\nline two"}')

    assert status == "ok" and value == {"notes": "line one\nline two"}


def test_strings_holding_braces_do_not_confuse_the_cut_detection():
    text = '{"plan_version": "planner_v1", "notes": "look at {pool} and \\"}\\" marks"}'

    result = model_output_parse(text, PlannerOutput)
    status, plan, _ = result.status, result.output, result.detail

    assert status == "ok" and isinstance(plan, PlannerOutput)


@pytest.fixture
def planner(openai_settings):
    return OpenAIProvider.for_role(Role.PLANNER, backoff_base=0.001, sleep=lambda _s: None)


def test_the_provider_marks_a_length_cut_reply_and_records_the_call_as_truncated(
    planner, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text(CUT_PLAN, finish_reason="length"))

    text = agent_answer(planner, Role.PLANNER, planner_request(), recorder=recorder)

    assert isinstance(text, ModelText) and text.cut
    assert model_output_parse(text, PlannerOutput).status == "truncated"
    (row,) = LLMCall.objects.filter(session=session)
    assert row.status == "truncated"


def test_a_scripted_turn_can_replay_a_cut_reply(recorder, session):
    provider = ScriptedProvider({"planner": [{"content": CUT_PLAN, "finish_reason": "length"}]})

    text = agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)

    assert model_output_parse(text, PlannerOutput).status == "truncated"
    assert LLMCall.objects.get(session=session).status == "truncated"
