"""Tool calls as real OpenAI-compatible servers send them, and tool_choice per role.

The raw shapes below are what llama-cpp-python's server (chatml-function-calling)
returned when probed by hand: ids built from the tool name, ``arguments`` a JSON
string that may hold a raw newline, an HTTP 500 for ``tool_choice: "required"``.
"""

from __future__ import annotations

import json

import pytest

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.llm.base import LLMError, Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.models import LLMCall, ToolInvocation
from tests.support.openai_server import FakeOpenAIServer, Reply, response_format_kind

EVIDENCE = {
    "answer_version": "executor_evidence_v2",
    "claims": [],
    "hypotheses": [],
    "recommended_actions": [],
    "missing_info": ["没有找到证据"],
}


def raw_call(name, arguments, call_id: str | None = "call_x"):
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return call


@pytest.fixture
def server(openai_settings):
    started = FakeOpenAIServer().start()
    for role in openai_settings.LLM_ROLE_SETTINGS.values():
        role["base_url"] = started.base_url
    yield started
    started.stop()


def executor(**options) -> OpenAIProvider:
    return OpenAIProvider.for_role(
        Role.EXECUTOR, backoff_base=0.001, sleep=lambda _s: None, **options
    )


def test_tool_choice_auto_is_sent_with_the_tools(ask_executor, server):
    server.enqueue(
        Reply.tools(("query_logs", {"service": "payment-service"})), Reply.text(EVIDENCE)
    )

    ask_executor(executor())

    # the model answered on its second tool turn: no extra answer call was needed
    assert [r["tool_choice"] for r in server.chat_requests] == ["auto", "auto"]


def test_arguments_holding_a_raw_newline_inside_a_json_string_reach_the_tool_as_an_object(
    ask_executor, server, fake_tools
):
    # as llama-cpp-python sent it: a grammar lets the model write a raw newline in a string
    arguments = '{"service": "payment-service", "query": "timed out\nafter"}'
    server.enqueue(
        Reply(content=None, raw_tool_calls=[raw_call("query_logs", arguments, "call__0_q")]),
        Reply.text(EVIDENCE),
    )

    ask_executor(executor())

    assert fake_tools.calls == [
        ("query_logs", {"service": "payment-service", "query": "timed out\nafter"})
    ]
    assistant = server.chat_requests[1]["messages"][-2]
    assert assistant["tool_calls"][0]["id"] == "call__0_q"
    assert assistant["content"] == ""  # llama-cpp-python refuses a null content


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param({"service": "payment-service"}, {"service": "payment-service"}, id="object"),
        pytest.param(None, {}, id="null"),
        pytest.param("", {}, id="empty string"),
        pytest.param(
            json.dumps(json.dumps({"service": "mysql"})), {"service": "mysql"}, id="double-encoded"
        ),
        pytest.param('{"service": "mysql"} trailing', '{"service": "mysql"} trailing', id="junk"),
        pytest.param("[1, 2]", "[1, 2]", id="not an object"),
    ],
)
def test_arguments_in_any_shape_are_read_or_passed_on_for_an_error_row(
    ask_executor, server, fake_tools, arguments, expected
):
    server.enqueue(
        Reply(content=None, raw_tool_calls=[raw_call("query_logs", arguments)]),
        Reply.text(EVIDENCE),
    )

    ask_executor(executor())

    assert fake_tools.calls == [("query_logs", expected)]


def test_calls_without_ids_get_ids_that_their_results_answer(ask_executor, server):
    server.enqueue(
        Reply(
            content=None,
            raw_tool_calls=[
                raw_call("query_logs", "{}", call_id=None),
                raw_call("query_metrics", "{}", call_id=None),
            ],
        ),
        Reply.text(EVIDENCE),
    )

    ask_executor(executor())

    messages = server.chat_requests[1]["messages"]
    ids = [call["id"] for call in messages[-3]["tool_calls"]]
    assert ids == ["call_0_0", "call_0_1"]
    assert [m["tool_call_id"] for m in messages[-2:]] == ids


def test_an_unknown_or_nameless_tool_becomes_an_error_invocation_row_not_a_crash(
    ask_executor, server, session
):
    def runner(name, arguments):
        return tool_invoke(session=session, attempt=1, tool_name=name, arguments=arguments)

    server.enqueue(
        Reply(
            content=None,
            raw_tool_calls=[raw_call("restart_database", "{}"), raw_call("", "{}", call_id="c2")],
        ),
        Reply.text(EVIDENCE),
    )

    answer = ask_executor(executor(), tools=runner)

    assert json.loads(answer)["missing_info"] == ["没有找到证据"]
    rows = list(ToolInvocation.objects.filter(session=session).order_by("sequence"))
    assert [(r.tool_name, r.status) for r in rows] == [("restart_database", "error"), ("", "error")]
    assert "unknown tool" in rows[0].error


def test_tool_results_go_back_as_user_messages_for_servers_that_drop_tool_messages(
    ask_executor, server
):
    server.enqueue(
        Reply.tools(("query_logs", {"service": "payment-service"})), Reply.text(EVIDENCE)
    )

    ask_executor(executor(tool_result_role="user"))

    last = server.chat_requests[1]["messages"]
    assert not [m for m in last if m["role"] == "tool"]
    result = [m for m in last if m["role"] == "user" and m["content"].startswith("[trace-1 ok]")]
    assert len(result) == 1


def test_required_is_sent_on_the_first_turn_only(ask_executor, server, settings):
    settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS = 3
    server.enqueue(
        Reply.tools(("query_logs", {})),
        Reply.tools(("query_metrics", {})),
        Reply.text(EVIDENCE),
    )

    ask_executor(executor(tool_choice="required"))

    assert [r.get("tool_choice") for r in server.chat_requests] == ["required", "auto", "auto"]


def test_a_server_that_answers_required_with_a_500_is_asked_with_auto_and_that_is_remembered(
    ask_executor, server, session
):
    server.tool_choices = {"auto", "none"}  # llama-cpp-python's chatml-function-calling
    server.enqueue(
        Reply.tools(("query_logs", {})),
        Reply.text(EVIDENCE),
        Reply.tools(("query_logs", {})),
        Reply.text(EVIDENCE),
    )

    ask_executor(executor(tool_choice="required"))
    ask_executor(executor(tool_choice="required"))

    choices = [r.get("tool_choice") for r in server.chat_requests]
    assert choices == ["required", "auto", "auto", "auto", "auto"]
    statuses = list(LLMCall.objects.filter(session=session).values_list("status", flat=True))
    assert statuses[0] == "rejected" and statuses[1:] == ["ok"] * 4


def test_tool_choice_none_lets_the_model_answer_without_calling(ask_executor, server, fake_tools):
    server.enqueue(Reply.text(EVIDENCE))

    answer = ask_executor(executor(tool_choice="none"))

    assert json.loads(answer) == EVIDENCE
    assert server.chat_requests[0]["tool_choice"] == "none"
    assert fake_tools.calls == []


@pytest.mark.parametrize(
    "stop_reply",
    [
        pytest.param(Reply(content=""), id="no content (llama.cpp's message path)"),
        pytest.param(Reply.text("I have enough evidence now."), id="prose"),
        pytest.param(
            Reply.text('{"answer_version": "executor_evidence_v2", "claims": [{"claim_id": "c'),
            id="cut-off object",
        ),
    ],
)
def test_an_executor_that_stops_calling_tools_without_an_answer_is_asked_for_it_with_the_schema(
    ask_executor, server, session, stop_reply
):
    server.enqueue(Reply.tools(("query_logs", {})), stop_reply, Reply.text(EVIDENCE))

    answer = ask_executor(executor())

    assert json.loads(answer) == EVIDENCE
    last = server.chat_requests[-1]
    assert "tools" not in last
    assert response_format_kind(last["response_format"]) == "json_schema"
    assert last["response_format"]["json_schema"]["name"] == "executor_evidence_v2"
    assert "executor_evidence_v2" in last["messages"][-1]["content"]
    rows = LLMCall.objects.filter(session=session).order_by("sequence")
    assert rows.count() == 3


def test_a_complete_answer_on_a_tool_turn_needs_no_extra_call(ask_executor, server):
    server.enqueue(Reply.tools(("query_logs", {})), Reply.text(EVIDENCE))

    answer = ask_executor(executor())

    assert json.loads(answer) == EVIDENCE
    assert len(server.chat_requests) == 2


def test_an_answer_turn_that_is_empty_too_is_an_llm_error(ask_executor, server):
    server.enqueue(Reply.tools(("query_logs", {})), Reply(content=""), Reply(content=""))

    with pytest.raises(LLMError) as error:
        ask_executor(executor())

    assert error.value.status == "empty"


def test_free_string_arguments_are_bounded_in_the_schema_sent(ask_executor, server):
    server.enqueue(Reply.text(EVIDENCE))

    ask_executor(executor())

    (request,) = server.chat_requests
    service = request["tools"][0]["function"]["parameters"]["properties"]["service"]
    assert service == {"type": "string", "maxLength": 500}
