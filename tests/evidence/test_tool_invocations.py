"""Every call becomes a tool_invocation row; bad input is an error row, never an exception."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from diagnosis.evidence import tools
from diagnosis.evidence.invoke import InvocationCounter, tool_invoke, tool_specs
from diagnosis.evidence.tools.base import ToolDefinition
from diagnosis.evidence.tools.query_logs.clustering import LogClusterer
from diagnosis.models import ToolInvocation


def _invoke(session, tool_name, arguments, attempt=1):
    return tool_invoke(session=session, attempt=attempt, tool_name=tool_name, arguments=arguments)


def test_tool_specs_describe_the_three_tools_for_function_calling():
    specs = tool_specs()
    assert [s["function"]["name"] for s in specs] == list(tools.tool_names())
    by_name = {s["function"]["name"]: s["function"]["parameters"] for s in specs}
    assert set(by_name["query_logs"]["properties"]) == {
        "service",
        "query",
        "level",
        "start",
        "end",
        "limit",
    }
    assert set(by_name["query_metrics"]["properties"]) == {
        "service",
        "metric",
        "labels",
        "start",
        "end",
        "step",
    }
    assert by_name["lookup_knowledge"]["required"] == ["query"]
    assert all(p["additionalProperties"] is False for p in by_name.values())


def test_an_unknown_argument_becomes_an_error_invocation_naming_it(session):
    result = _invoke(session, "query_logs", {"service": "pay", "severity": "ERROR"})
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == ToolInvocation.Status.ERROR
    assert "'severity'" in row.output
    assert "allowed arguments: service, query, level, start, end, limit" in row.output
    assert row.arguments == {"service": "pay", "severity": "ERROR"}
    assert row.summary == {"error": row.error}


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("query_logs", {"limit": "three"}, "argument 'limit' of query_logs must be an integer"),
        ("query_logs", {"start": "yesterday"}, "is not an RFC 3339 time"),
        ("query_metrics", {"service": "pay", "step": "soon"}, "is not a duration"),
        ("query_metrics", {"labels": ["pool"]}, "must be an object of label to value"),
        ("lookup_knowledge", {}, "argument 'query' of lookup_knowledge is required"),
        ("lookup_knowledge", {"query": "x", "k": "5"}, "must be an integer"),
        ("query_logs", {"limit": 2.5}, "must be an integer"),
        ("query_logs", {"query": "/(unclosed/"}, "not a valid regular expression"),
    ],
)
def test_invalid_arguments_become_error_invocations_with_an_actionable_message(
    session, tool, arguments, expected
):
    result = _invoke(session, tool, arguments)
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "error"
    assert expected in row.output
    assert result.output == row.output


def test_arguments_that_are_not_an_object_and_unknown_tools_are_error_rows(session):
    not_object = _invoke(session, "query_logs", ["service", "pay"])
    unknown = _invoke(session, "query_spans", {"service": "pay"})
    rows = list(ToolInvocation.objects.filter(session=session).order_by("sequence"))
    assert [r.status for r in rows] == ["error", "error"]
    assert "arguments must be a JSON object, got list" in not_object.output
    assert rows[0].arguments == {}
    assert "unknown tool 'query_spans'" in unknown.output
    assert "query_metrics, query_logs, query_traces, lookup_knowledge" in unknown.output


def test_arguments_given_as_a_json_string_are_read_as_an_object(session):
    result = _invoke(session, "query_logs", '{"service": "pay", "level": "ERROR"}')
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "ok"
    assert row.arguments == {"service": "pay", "level": "ERROR"}


def test_trace_refs_follow_call_order_across_attempts(session):
    calls = [
        ("query_logs", {"service": "pay"}, 1),
        ("query_metrics", {"bogus": 1}, 1),
        ("lookup_knowledge", {"query": "连接池"}, 1),
        ("query_metrics", {"service": "pay"}, 2),
    ]
    results = [_invoke(session, tool, args, attempt) for tool, args, attempt in calls]
    rows = list(ToolInvocation.objects.filter(session=session).order_by("sequence"))
    assert [r.trace_ref for r in rows] == ["trace-1", "trace-2", "trace-3", "trace-4"]
    assert [r.sequence for r in rows] == [1, 2, 3, 4]
    assert [r.attempt for r in rows] == [1, 1, 1, 2]
    assert [r.trace_ref for r in results] == ["trace-1", "trace-2", "trace-3", "trace-4"]
    assert [r.invocation_id for r in results] == [r.pk for r in rows]
    assert all(r.started_at is not None for r in rows)


def test_outputs_are_bounded_with_the_original_size_and_a_truncation_flag(session, settings):
    settings.TOOL_OUTPUT_MAX_CHARS = 1000
    result = _invoke(session, "query_logs", {"limit": 20})
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.truncated is True
    assert len(row.output) <= 1000
    assert row.output_size > 1000
    assert f"of {row.output_size} characters shown]" in row.output
    # Whatever was cut from the output was cut from the summary too.
    for template in row.summary["templates"]:
        assert template["line"] in row.output
        assert all(sample in row.output for sample in template["samples"])
    assert row.summary["omitted"] >= 1


def test_a_short_output_is_stored_whole_and_unflagged(session):
    result = _invoke(session, "query_metrics", {"service": "gateway"})
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.truncated is False
    assert row.output_size == len(row.output)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("query_metrics", {"service": "pay"}),
        ("query_metrics", {"metric": "pool_active"}),
        ("query_logs", {}),
        ("query_logs", {"service": "pay", "level": "ERROR", "limit": 5}),
        ("lookup_knowledge", {"query": "连接池耗尽 超时"}),
        ("lookup_knowledge", {"query": "roll back a release"}),
    ],
)
def test_every_summary_line_and_sample_occurs_verbatim_in_the_output(session, tool, arguments):
    result = _invoke(session, tool, arguments)
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "ok"
    assert row.summary == result.summary
    entries = row.summary.get("series") or row.summary.get("templates") or []
    for entry in entries:
        assert entry["line"] in row.output
        for sample in entry.get("samples", []):
            assert sample in row.output
    for chunk in row.summary.get("chunks", []):
        assert chunk["text"] in row.output
        header = f"=== {chunk['chunk_id']} | {chunk['document_title']} / {chunk['heading']} ==="
        assert header in row.output
    assert entries or row.summary.get("chunks")


def test_an_empty_result_is_no_data_with_a_line_saying_so(session):
    result = _invoke(session, "query_logs", {"service": "pay", "query": "no such text anywhere"})
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "no_data"
    assert "no data: no log lines matched" in row.output
    metrics = _invoke(session, "query_metrics", {"service": "nobody"})
    assert metrics.status == "no_data"
    assert "no data: no series matched" in metrics.output


def test_a_backend_exception_becomes_an_error_row(session, monkeypatch):
    def broken(call):
        raise RuntimeError("disk on fire")

    definition = tools.TOOLS["query_logs"]
    monkeypatch.setitem(
        tools.TOOLS,
        "query_logs",
        ToolDefinition(
            name=definition.name,
            description=definition.description,
            args=definition.args,
            run=broken,
            empty_summary=definition.empty_summary,
        ),
    )
    result = _invoke(session, "query_logs", {"service": "pay"})
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "error"
    assert "RuntimeError: disk on fire" in row.error


def test_a_file_backend_past_the_timeout_gives_a_timeout_row(session, settings, monkeypatch):
    import time

    settings.TOOL_TIMEOUT_SECONDS = 0.2
    real_add = LogClusterer.add_fields

    def slow_add(self, *args, **kwargs):
        time.sleep(0.002)
        return real_add(self, *args, **kwargs)

    monkeypatch.setattr(LogClusterer, "add_fields", slow_add)
    result = _invoke(session, "query_logs", {"service": "pay"})
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "timeout"
    assert "timed out after 0.2s" in row.output
    assert row.summary == {"error": row.error}


def test_times_default_to_the_session_window(session):
    session.context = {
        "now": "2026-03-02T10:40:00Z",
        "window": {"start": "2026-03-02T10:15:00Z", "end": "2026-03-02T10:35:00Z"},
    }
    session.save()
    result = _invoke(session, "query_metrics", {"service": "pay"})
    assert result.summary["window"] == {
        "start": "2026-03-02T10:15:00Z",
        "end": "2026-03-02T10:35:00Z",
    }
    # Four windows of baseline right before the window.
    assert result.summary["baseline"] == {
        "start": "2026-03-02T08:55:00Z",
        "end": "2026-03-02T10:15:00Z",
    }


def test_without_a_session_window_the_last_30_minutes_before_the_pack_now_are_used(session):
    result = _invoke(session, "query_logs", {"service": "pay"})
    assert result.summary["window"] == {
        "start": "2026-03-02T10:10:00Z",
        "end": "2026-03-02T10:40:00Z",
    }


def test_explicit_start_and_end_override_the_session_window(session):
    result = _invoke(
        session,
        "query_logs",
        {"service": "pay", "start": "2026-03-02T09:00:00+01:00", "end": "2026-03-02T08:30:00Z"},
    )
    assert result.summary["window"] == {
        "start": "2026-03-02T08:00:00Z",
        "end": "2026-03-02T08:30:00Z",
    }


def _counted(session, counter, n):
    return tool_invoke(
        session=session,
        attempt=1,
        tool_name="query_logs",
        arguments={"query": f"pool {n}"},
        counter=counter,
    )


def test_a_runner_counts_its_invocations_after_the_first(session):
    counter = InvocationCounter()
    _counted(session, counter, 0)
    with CaptureQueriesContext(connection) as ctx:
        second = _counted(session, counter, 1)
    assert second.trace_ref == "trace-2"
    assert not [q for q in ctx.captured_queries if q["sql"].startswith("SELECT")]
    inserts = [q for q in ctx.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1


@pytest.mark.django_db(transaction=True)
def test_in_autocommit_each_counted_invocation_is_one_insert(session):
    counter = InvocationCounter()
    _counted(session, counter, 0)
    with CaptureQueriesContext(connection) as ctx:
        _counted(session, counter, 1)
    assert [q["sql"].split()[0] for q in ctx.captured_queries] == ["INSERT"]


def test_a_taken_over_session_continues_the_numbering_without_a_duplicate(session):
    first, second = InvocationCounter(), InvocationCounter()  # the old and the new worker
    refs = [_counted(session, first, n).trace_ref for n in range(2)]
    refs.append(_counted(session, second, 2).trace_ref)  # takes over: reads the last
    refs.append(_counted(session, first, 3).trace_ref)  # the old one, still alive, clashes
    refs.append(_counted(session, second, 4).trace_ref)
    assert refs == [f"trace-{n}" for n in range(1, 6)]
    rows = ToolInvocation.objects.filter(session=session).order_by("sequence")
    assert [r.sequence for r in rows] == [1, 2, 3, 4, 5]
    assert [r.arguments["query"] for r in rows] == [f"pool {n}" for n in range(5)]


def test_a_counter_that_guessed_no_earlier_rows_still_takes_the_next_free_number(session):
    _counted(session, InvocationCounter(), 0)
    assert _counted(session, InvocationCounter(last=0), 1).trace_ref == "trace-2"
