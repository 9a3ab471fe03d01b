"""The openai provider against a loopback OpenAI-compatible server, with the real SDK."""

from __future__ import annotations

import json
import socket

import pytest

from diagnosis.llm.base import LLMError, Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.models import LLMCall
from tests.llm.conftest import TEST_API_KEY
from tests.llm.requests import composer_input, planner_request, verifier_payload
from tests.support.agents import agent_answer
from tests.support.openai_server import HUGE_CHARS, Reply

PLAN = {"plan_version": "planner_v1", "services": ["payment-service"], "tools": ["query_logs"]}
EVIDENCE = {
    "answer_version": "executor_evidence_v2",
    "claims": [
        {
            "claim_id": "claim-1",
            "claim_type": "symptom",
            "claim_text": "payment-service 出现连接池耗尽日志。",
            "support_level": "direct",
            "evidence_bindings": [
                {
                    "source_type": "tool_trace",
                    "source_id": "trace-1",
                    "tool_name": "query_logs",
                    "evidence_excerpt": "Connection is not available",
                }
            ],
        }
    ],
    "hypotheses": [],
    "recommended_actions": [],
    "missing_info": [],
}


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def provider_for(openai_settings, sleeps):
    def build(role: Role) -> OpenAIProvider:
        return OpenAIProvider.for_role(role, backoff_base=0.001, sleep=sleeps.append)

    return build


def calls(session) -> list[LLMCall]:
    return list(LLMCall.objects.filter(session=session).order_by("sequence"))


def statuses(session) -> list[str]:
    return [c.status for c in calls(session)]


# --- Executor: the tool loop ------------------------------------------------------


def test_the_executor_runs_two_tool_calls_from_one_turn_and_returns_the_final_json(
    ask_executor, provider_for, openai_server, session, fake_tools
):
    openai_server.enqueue(
        Reply.tools(
            ("query_logs", {"service": "payment-service", "level": "ERROR"}),
            ("query_metrics", {"service": "payment-service", "metric": "hikaricp"}),
        ),
        Reply.text(EVIDENCE),
    )

    answer = ask_executor(provider_for(Role.EXECUTOR))

    assert json.loads(answer) == EVIDENCE
    assert fake_tools.calls == [
        ("query_logs", {"service": "payment-service", "level": "ERROR"}),
        ("query_metrics", {"service": "payment-service", "metric": "hikaricp"}),
    ]
    first, second = openai_server.chat_requests
    assert [t["function"]["name"] for t in first["tools"]] == ["query_logs", "query_metrics"]
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_0", "call_1"]
    assert tool_messages[0]["content"].startswith("[trace-1 ok]\npayment-service ERROR HikariPool")
    assert tool_messages[1]["content"].startswith("[trace-2 ok]\nhikaricp_connections_active")
    rows = calls(session)
    assert [(r.role, r.provider, r.status) for r in rows] == [
        ("executor", "openai", "ok"),
        ("executor", "openai", "ok"),
    ]
    assert rows[0].model == "fake-executor-model"
    assert rows[0].request["tools"] == ["query_logs", "query_metrics"]
    assert rows[1].raw_response and rows[1].tokens_in > 0 and rows[1].tokens_out > 0


def test_malformed_tool_arguments_reach_the_tool_runner_as_the_raw_string(
    ask_executor, provider_for, openai_server, session, fake_tools
):
    openai_server.enqueue(Reply.tools(("query_logs", '{"service": "pay')), Reply.text(EVIDENCE))

    ask_executor(provider_for(Role.EXECUTOR))

    assert fake_tools.calls == [("query_logs", '{"service": "pay')]
    tool_message = openai_server.chat_requests[1]["messages"][-1]
    assert tool_message["content"].startswith("[trace-1 error]")
    assert statuses(session) == ["ok", "ok"]


def test_tools_are_withdrawn_after_the_round_limit_and_the_final_json_is_asked_for(
    ask_executor, provider_for, openai_server, session, fake_tools, settings
):
    settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS = 1
    openai_server.enqueue(
        Reply.tools(("query_logs", {"service": "payment-service"})),
        Reply.text(EVIDENCE),
    )

    answer = ask_executor(provider_for(Role.EXECUTOR))

    assert json.loads(answer)["answer_version"] == "executor_evidence_v2"
    last_request = openai_server.chat_requests[-1]
    assert "tools" not in last_request
    assert last_request["messages"][-1]["role"] == "user"
    assert "executor_evidence_v2" in last_request["messages"][-1]["content"]
    assert len(fake_tools.calls) == 1


def test_a_model_that_calls_tools_after_they_were_withdrawn_gets_an_empty_status(
    ask_executor, provider_for, openai_server, session, fake_tools, settings
):
    settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS = 1
    openai_server.enqueue(
        Reply.tools(("query_logs", {"service": "payment-service"})),
        Reply.tools(("query_logs", {"service": "order-service"})),
    )

    with pytest.raises(LLMError) as error:
        ask_executor(provider_for(Role.EXECUTOR))

    assert error.value.status == "empty"
    assert statuses(session) == ["ok", "empty"]
    assert len(fake_tools.calls) == 1


# --- structured output (more in test_structured_output.py) -------------------------


def test_the_planner_asks_for_its_contract_schema_and_returns_the_content(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text(PLAN))

    answer = agent_answer(
        provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder
    )

    assert json.loads(answer) == PLAN
    (request,) = openai_server.chat_requests
    response_format = request["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "planner_v1"
    assert "services" in response_format["json_schema"]["schema"]["required"]
    assert request["model"] == "fake-planner-model"
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert "payment-service 从 10:20 开始大量超时" in request["messages"][1]["content"]
    (row,) = calls(session)
    assert (row.role, row.status, row.attempt, row.sequence) == ("planner", "ok", 1, 1)
    # the row names the schema; the schema itself is the code's, not stored per call
    assert row.request["response_format"]["json_schema"]["name"] == "planner_v1"
    assert "schema" not in row.request["response_format"]["json_schema"]


def test_the_verifier_and_composer_send_only_their_payloads(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(
        Reply.text({"verifier_version": "verifier_v2", "decision": "PASS"}),
        Reply.text({"answer_version": "composer_v1", "final_answer": "结论"}),
    )

    agent_answer(provider_for(Role.VERIFIER), Role.VERIFIER, verifier_payload(), recorder=recorder)
    agent_answer(
        provider_for(Role.COMPOSER), Role.COMPOSER, composer_input("en"), recorder=recorder
    )

    verifier_request, composer_request = openai_server.chat_requests
    assert '"tool_trace_summary"' in verifier_request["messages"][1]["content"]
    assert '"allowed_claims"' in composer_request["messages"][1]["content"]
    assert "`en`" in composer_request["messages"][0]["content"]
    assert [(r.role, r.status) for r in calls(session)] == [("verifier", "ok"), ("composer", "ok")]


# --- failures and retries ----------------------------------------------------------


def test_a_429_is_retried_after_its_retry_after_and_then_succeeds(
    provider_for, openai_server, recorder, session, sleeps
):
    openai_server.enqueue(Reply.failing("429", retry_after="2"), Reply.text(PLAN))

    answer = agent_answer(
        provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder
    )

    assert json.loads(answer) == PLAN
    assert sleeps == [2.0]
    rows = calls(session)
    assert [r.status for r in rows] == ["error", "ok"]
    assert "429" in rows[0].error


def test_500s_spend_the_retry_budget_and_then_raise_an_llm_error(
    provider_for, openai_server, recorder, session, sleeps, settings
):
    settings.LLM_MAX_RETRIES = 2
    openai_server.enqueue(*[Reply.failing("500") for _ in range(5)])

    with pytest.raises(LLMError) as error:
        agent_answer(
            provider_for(Role.VERIFIER), Role.VERIFIER, verifier_payload(), recorder=recorder
        )

    assert error.value.status == "error"
    assert len(openai_server.chat_requests) == 3
    assert statuses(session) == ["error", "error", "error"]
    assert len(sleeps) == 2


def test_a_client_error_is_not_retried(provider_for, openai_server, recorder, session, sleeps):
    openai_server.enqueue(Reply.failing("401"), Reply.text(PLAN))

    with pytest.raises(LLMError) as error:
        agent_answer(provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    assert error.value.status == "rejected"
    assert len(openai_server.chat_requests) == 1
    assert statuses(session) == ["rejected"]
    assert sleeps == []


def test_a_timeout_is_recorded_and_raised_as_an_llm_error(
    provider_for, openai_server, recorder, session, settings
):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    settings.LLM_MAX_RETRIES = 0
    openai_server.enqueue(Reply.failing("timeout"))

    with pytest.raises(LLMError) as error:
        agent_answer(provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    assert error.value.status == "timeout"
    (row,) = calls(session)
    assert row.status == "timeout"
    assert "timeout" in row.error


def test_a_timeout_then_an_answer_is_retried(
    provider_for, openai_server, recorder, session, settings
):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    openai_server.enqueue(Reply.failing("timeout"), Reply.text(PLAN))

    agent_answer(provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    assert statuses(session) == ["timeout", "ok"]


def test_an_unreachable_server_is_retried_then_an_error(
    openai_settings, recorder, session, sleeps, settings
):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for role_settings in settings.LLM_ROLE_SETTINGS.values():
        role_settings["base_url"] = f"http://127.0.0.1:{port}/v1"
    settings.LLM_MAX_RETRIES = 1
    provider = OpenAIProvider.for_role(Role.PLANNER, backoff_base=0.001, sleep=sleeps.append)

    with pytest.raises(LLMError) as error:
        agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)

    assert error.value.status == "error"
    assert statuses(session) == ["error", "error"]
    assert "connection" in calls(session)[0].error


def test_a_malformed_response_body_is_an_error_row_not_a_crash(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.failing("malformed_json"), Reply.text(PLAN))

    with pytest.raises(LLMError) as error:
        agent_answer(provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    assert error.value.status == "error"
    (row,) = calls(session)
    assert row.status == "error"
    assert row.raw_response.startswith('{"id": "chatcmpl-x"')
    assert "not JSON" in row.error


def test_valid_json_that_is_not_a_chat_completion_is_an_error_row(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.failing("wrong_schema"))

    with pytest.raises(LLMError):
        agent_answer(
            provider_for(Role.COMPOSER), Role.COMPOSER, composer_input(), recorder=recorder
        )

    (row,) = calls(session)
    assert (row.status, row.raw_response) == ("error", '{"result": "ok", "data": [1, 2, 3]}')


def test_model_text_that_is_not_json_is_returned_for_the_parser_to_judge(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text("I think the database is down."))

    answer = agent_answer(
        provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder
    )

    assert answer == "I think the database is down."
    assert statuses(session) == ["ok"]


def test_output_cut_by_the_length_limit_is_recorded_as_truncated_and_still_returned(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text(PLAN, fault="truncated"))

    answer = agent_answer(
        provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder
    )

    assert json.dumps(PLAN).startswith(answer)
    assert answer != json.dumps(PLAN)
    (row,) = calls(session)
    assert row.status == "truncated"


def test_an_empty_answer_is_recorded_as_empty_and_raised(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.failing("empty"))

    with pytest.raises(LLMError) as error:
        agent_answer(
            provider_for(Role.VERIFIER), Role.VERIFIER, verifier_payload(), recorder=recorder
        )

    assert error.value.status == "empty"
    assert statuses(session) == ["empty"]


def test_a_one_megabyte_answer_is_returned_whole_but_stored_bounded(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.failing("huge"))

    answer = agent_answer(
        provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder
    )

    assert len(answer) == HUGE_CHARS
    (row,) = calls(session)
    assert row.status == "ok"
    assert len(row.raw_response) < 201_000
    assert "truncated" in row.raw_response[-100:]


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text("连接池耗尽", fault="invalid_utf8"))

    answer = agent_answer(
        provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder
    )

    assert answer.startswith("连接池耗尽\ufffd")
    assert statuses(session) == ["ok"]


# --- accounting ----------------------------------------------------------------------


def test_tokens_come_from_usage_when_the_server_reports_it(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text(PLAN))

    agent_answer(provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    (row,) = calls(session)
    prompt_chars = len(json.dumps(openai_server.chat_requests[0]["messages"], ensure_ascii=False))
    assert row.tokens_in == prompt_chars // 4
    assert row.tokens_out == len(json.dumps(PLAN)) // 4


def test_tokens_are_estimated_when_the_server_reports_no_usage(
    provider_for, openai_server, recorder, session
):
    openai_server.enqueue(Reply.text(PLAN, usage=False))

    agent_answer(provider_for(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    (row,) = calls(session)
    assert row.tokens_in > len(json.dumps(openai_server.chat_requests[0]["messages"])) // 4
    assert row.tokens_out >= len(json.dumps(PLAN)) // 3


def test_the_api_key_is_sent_to_the_server_but_never_stored(
    provider_for, openai_server, recorder, session
):
    openai_server.responder = lambda body: Reply.failing("401")
    openai_server.enqueue(Reply.text(PLAN))
    provider = provider_for(Role.PLANNER)

    agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)
    with pytest.raises(LLMError):
        agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)

    assert openai_server.requests[0].headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert TEST_API_KEY not in repr(provider)
    for row in calls(session):
        stored = json.dumps([row.request, row.raw_response, row.error, row.model])
        assert TEST_API_KEY not in stored
