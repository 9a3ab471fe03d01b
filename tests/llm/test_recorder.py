"""One LLMCall row per model call, bounded and without credentials."""

from __future__ import annotations

import pytest

from diagnosis.llm.base import Role
from diagnosis.llm.recorder import MESSAGE_MAX_CHARS, llm_call_recorder
from diagnosis.models import DiagnosisSession, LLMCall


def _record(recorder, **overrides):
    values = {
        "role": Role.PLANNER,
        "provider": "openai",
        "model": "m",
        "request": {"messages": [{"role": "user", "content": "hi"}]},
        "raw_response": "{}",
        "tokens_in": 3,
        "tokens_out": 1,
        "latency_ms": 12,
        "status": "ok",
    }
    recorder(**{**values, **overrides})


def test_rows_are_numbered_per_session_and_carry_the_current_attempt(session, environment):
    attempt = {"n": 1}
    recorder = llm_call_recorder(session=session, attempt_getter=lambda: attempt["n"])
    other = DiagnosisSession.objects.create(environment=environment, original_query="other")
    other_recorder = llm_call_recorder(session=other, attempt_getter=lambda: 1)

    _record(recorder)
    _record(other_recorder)
    attempt["n"] = 2
    _record(recorder, role=Role.EXECUTOR)

    rows = list(LLMCall.objects.filter(session=session).values_list("sequence", "attempt", "role"))
    assert rows == [(1, 1, "planner"), (2, 2, "executor")]
    assert LLMCall.objects.get(session=other).sequence == 1


def test_long_messages_are_truncated_but_the_full_request_size_is_kept(recorder, session):
    long_text = "日志" * 10_000
    _record(recorder, request={"messages": [{"role": "tool", "content": long_text}]})

    row = LLMCall.objects.get(session=session)
    stored = row.request["messages"][0]["content"]
    assert len(stored) < MESSAGE_MAX_CHARS + 100
    assert "truncated: 20000 chars" in stored
    assert row.request_chars > 20_000


def test_credentials_are_never_stored(recorder, session, settings):
    settings.LLM_API_KEY = "sk-live-abcdefghijklmnop"
    _record(
        recorder,
        request={"api_key": "sk-live-abcdefghijklmnop", "headers": {"Authorization": "Bearer x"}},
        raw_response="Incorrect API key provided: sk-live-abcdefghijklmnop",
        error="key sk-live-abcdefghijklmnop refused",
        status="rejected",
    )

    row = LLMCall.objects.get(session=session)
    assert row.request == {"api_key": "[redacted]", "headers": {"Authorization": "[redacted]"}}
    assert "sk-live" not in row.raw_response + row.error


def test_an_unknown_status_is_stored_as_error_with_the_original_named(recorder, session):
    _record(recorder, status="weird", error="boom")

    row = LLMCall.objects.get(session=session)
    assert (row.status, row.error) == ("error", "[status weird] boom")


@pytest.mark.django_db
def test_after_the_first_call_each_recorded_call_is_one_insert(session):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from diagnosis.llm.recorder import llm_call_recorder

    record = llm_call_recorder(session=session, attempt_getter=lambda: 1)
    call = dict(provider="openai", model="m", request={}, raw_response="{}", tokens_in=1,
                tokens_out=1, latency_ms=1, status="ok")  # fmt: skip
    record(role="planner", **call)
    with CaptureQueriesContext(connection) as ctx:
        record(role="executor", **call)
    inserts = [q for q in ctx.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1 and not any("MAX(" in q["sql"] for q in ctx.captured_queries)
    assert list(session.llm_calls.values_list("sequence", flat=True).order_by("sequence")) == [1, 2]


@pytest.mark.django_db
def test_a_first_run_records_its_first_call_with_one_insert(session):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    record = llm_call_recorder(session=session, attempt_getter=lambda: 1, last=0)
    with CaptureQueriesContext(connection) as ctx:
        _record(record)
    assert [q["sql"][:6] for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"]] == ["INSERT"]
    assert list(session.llm_calls.values_list("sequence", flat=True)) == [1]


@pytest.mark.django_db
def test_a_wrong_guess_of_the_last_sequence_reads_it_and_reuses_no_number(session):
    llm_call_recorder(session=session, attempt_getter=lambda: 1)(
        role=Role.PLANNER, provider="openai", model="m", request={}, raw_response="{}",
        tokens_in=1, tokens_out=1, latency_ms=1, status="ok",
    )  # fmt: skip
    record = llm_call_recorder(session=session, attempt_getter=lambda: 2, last=0)
    _record(record, role=Role.EXECUTOR)
    _record(record, role=Role.VERIFIER)
    rows = list(session.llm_calls.order_by("sequence").values_list("sequence", "role"))
    assert rows == [(1, "planner"), (2, "executor"), (3, "verifier")]
