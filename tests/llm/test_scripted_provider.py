"""The scripted provider replays role responses from a pack folder or a script."""

from __future__ import annotations

import json

import pytest

from diagnosis.llm.base import LLMError, Role
from diagnosis.llm.scripted import ScriptedProvider, ScriptError
from diagnosis.models import LLMCall
from tests.llm.requests import composer_input, executor_request, planner_request, verifier_payload
from tests.support.agents import agent_answer

EVIDENCE = {"answer_version": "executor_evidence_v2", "claims": []}
QUERY_LOGS = {"tool_calls": [{"name": "query_logs", "arguments": {"service": "payment-service"}}]}


def rows(session):
    return list(
        LLMCall.objects.filter(session=session)
        .order_by("sequence")
        .values_list("role", "provider", "status")
    )


def _write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_it_replays_a_pack_scripted_folder_turn_by_turn(
    ask_executor, tmp_path, recorder, session, fake_tools
):
    folder = tmp_path / "scripted"
    _write(folder, "planner.json", {"content": '{"plan_version": "planner_v1"}'})
    _write(folder, "executor-1.json", QUERY_LOGS)
    _write(
        folder,
        "executor-2.json",
        {"tool_calls": [{"name": "query_metrics", "arguments": {"service": "mysql"}}]},
    )
    _write(folder, "executor-3.json", {"content": json.dumps(EVIDENCE)})
    _write(folder, "verifier.json", {"content": '{"decision": "PASS"}'})
    _write(folder, "composer.json", {"content": '{"answer_version": "composer_v1"}'})
    provider = ScriptedProvider.from_folder(folder)

    plan = agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)
    evidence = ask_executor(provider)
    verdict = agent_answer(provider, Role.VERIFIER, verifier_payload(), recorder=recorder)
    answer = agent_answer(provider, Role.COMPOSER, composer_input(), recorder=recorder)

    assert plan == '{"plan_version": "planner_v1"}'
    assert json.loads(evidence) == EVIDENCE
    assert verdict == '{"decision": "PASS"}'
    assert answer == '{"answer_version": "composer_v1"}'
    assert fake_tools.calls == [
        ("query_logs", {"service": "payment-service"}),
        ("query_metrics", {"service": "mysql"}),
    ]
    assert rows(session) == [
        ("planner", "scripted", "ok"),
        ("executor", "scripted", "ok"),
        ("executor", "scripted", "ok"),
        ("executor", "scripted", "ok"),
        ("verifier", "scripted", "ok"),
        ("composer", "scripted", "ok"),
    ]
    assert [role for role, _ in provider.asked] == [
        Role.PLANNER,
        Role.EXECUTOR,
        Role.VERIFIER,
        Role.COMPOSER,
    ]
    assert provider.asked[1][1].question == executor_request().question


def test_executor_turns_continue_across_a_retry(ask_executor, session):
    provider = ScriptedProvider(
        {"executor": [QUERY_LOGS, {"content": "first attempt"}, {"content": "second attempt"}]}
    )

    first = ask_executor(provider)
    second = ask_executor(
        provider, executor_request(attempt=2, retry_context={"instructions": "query mysql"})
    )

    assert (first, second) == ("first attempt", "second attempt")
    assert provider.asked[1][1].retry_context == {"instructions": "query mysql"}
    assert provider.remaining(Role.EXECUTOR) == 0


def test_a_role_without_turns_goes_to_the_fallback(recorder, session, stub_provider):
    provider = ScriptedProvider({"verifier": ['{"decision": "REJECT"}']}, fallback=stub_provider)

    plan = agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)
    verdict = agent_answer(provider, Role.VERIFIER, verifier_payload(), recorder=recorder)

    assert json.loads(plan)["notes"] == "stub"
    assert verdict == '{"decision": "REJECT"}'
    assert stub_provider.calls == ["plan"]
    assert [role for role, _ in provider.asked] == [Role.PLANNER, Role.VERIFIER]


def test_when_executor_turns_run_out_mid_investigation_the_fallback_carries_on(
    ask_executor, session, fake_tools, stub_provider
):
    provider = ScriptedProvider({"executor": [QUERY_LOGS]}, fallback=stub_provider)

    evidence = ask_executor(provider)

    assert json.loads(evidence)["notes"] == "stub"
    assert stub_provider.calls == ["execute"]
    assert len(fake_tools.calls) == 2  # the scripted call, then the fallback's own


def test_running_out_without_a_fallback_is_a_recorded_llm_error(recorder, session):
    provider = ScriptedProvider({"composer": []})

    with pytest.raises(LLMError) as error:
        agent_answer(provider, Role.COMPOSER, composer_input(), recorder=recorder)

    assert error.value.status == "error"
    assert rows(session) == [("composer", "scripted", "error")]


def test_a_scripted_failure_turn_replays_a_failed_call(recorder, session):
    provider = ScriptedProvider({"planner": [{"error": "timeout", "message": "slow model"}]})

    with pytest.raises(LLMError) as error:
        agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)

    assert error.value.status == "timeout"
    assert rows(session) == [("planner", "scripted", "timeout")]


def test_an_empty_scripted_answer_is_recorded_as_empty(recorder, session):
    provider = ScriptedProvider({"verifier": ["   "]})

    with pytest.raises(LLMError) as error:
        agent_answer(provider, Role.VERIFIER, verifier_payload(), recorder=recorder)

    assert error.value.status == "empty"
    assert rows(session) == [("verifier", "scripted", "empty")]


def test_raw_string_tool_arguments_reach_the_tool_runner_unchanged(
    ask_executor, session, fake_tools
):
    provider = ScriptedProvider(
        {"executor": [{"tool_calls": [{"name": "query_logs", "arguments": "{broken"}]}, "done"]}
    )

    ask_executor(provider)

    assert fake_tools.calls == [("query_logs", "{broken")]


def test_a_file_holding_the_answer_itself_or_a_list_of_turns_is_accepted(tmp_path, recorder):
    folder = tmp_path / "scripted"
    _write(folder, "planner.json", {"plan_version": "planner_v1", "services": ["mysql"]})
    _write(folder, "verifier.json", [{"content": "one"}, {"content": "two"}])
    provider = ScriptedProvider.from_folder(folder)

    assert json.loads(agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder))[
        "services"
    ] == ["mysql"]
    assert provider.remaining(Role.VERIFIER) == 2


def test_a_file_that_is_not_json_is_a_script_error_naming_the_file(tmp_path):
    folder = tmp_path / "scripted"
    folder.mkdir()
    (folder / "executor-1.json").write_text("{not json", encoding="utf-8")

    with pytest.raises(ScriptError, match="executor-1.json"):
        ScriptedProvider.from_folder(folder)


def test_a_missing_folder_sends_every_role_to_the_fallback(tmp_path, recorder, stub_provider):
    provider = ScriptedProvider.from_folder(tmp_path / "absent", fallback=stub_provider)

    agent_answer(provider, Role.COMPOSER, composer_input(), recorder=recorder)

    assert stub_provider.calls == ["compose"]
    assert all(provider.remaining(role) == 0 for role in Role)


def test_executor_files_are_ordered_by_number_not_by_name(ask_executor, tmp_path):
    folder = tmp_path / "scripted"
    for number in range(1, 12):
        _write(folder, f"executor-{number}.json", {"content": f"turn {number}"})
    provider = ScriptedProvider.from_folder(folder)

    answers = [ask_executor(provider) for _ in range(3)]

    assert answers == ["turn 1", "turn 2", "turn 3"]
