"""tool_trace_summary stays under its token budget whatever the raw output size."""

from __future__ import annotations

import json

from django.utils import timezone

from diagnosis.contracts import TraceSummaryEntry
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.flow.trace_summary import trace_summary_build
from diagnosis.models import ToolInvocation
from diagnosis.tokens import estimate_tokens


def _tokens(entries):
    return estimate_tokens(json.dumps(entries, ensure_ascii=False))


def test_each_entry_carries_the_top_facts_of_its_invocation(session):
    tool_invoke(session=session, attempt=1, tool_name="query_logs", arguments={"service": "pay"})
    tool_invoke(session=session, attempt=1, tool_name="query_logs", arguments={"nope": 1})
    entries = trace_summary_build(session=session)
    assert [e["trace_ref"] for e in entries] == ["trace-1", "trace-2"]
    assert set(entries[0]) == {
        "trace_ref",
        "invocation_id",
        "tool_name",
        "arguments",
        "status",
        "summary",
    }
    assert "NEW (absent from the baseline)" in entries[0]["summary"]
    assert entries[1]["status"] == "error"
    assert "unknown argument(s) 'nope'" in entries[1]["summary"]


def test_a_huge_output_stays_under_the_budget(session):
    huge = "x" * 5_000_000
    for sequence in range(1, 41):
        ToolInvocation.objects.create(
            session=session,
            sequence=sequence,
            trace_ref=f"trace-{sequence}",
            tool_name="query_logs",
            arguments={"query": "y" * 10_000},
            status="ok",
            output=huge,
            output_size=len(huge) * 10,
            truncated=True,
            summary={"templates": [{"line": "第" * 5000}] * 50, "total_window": 1},
            started_at=timezone.now(),
        )
    entries = trace_summary_build(session=session, token_budget=2000)
    assert _tokens(entries) <= 2000
    assert entries[-1]["trace_ref"] == "trace-40"
    assert entries[-1]["summary"] != "[detail dropped to fit the token budget]"
    dropped = [e for e in entries if "budget]" in e["summary"]]
    assert dropped, "older entries lose their detail first"


def test_a_tiny_budget_drops_the_oldest_and_every_entry_keeps_its_contract(session):
    for sequence in range(1, 200):
        ToolInvocation.objects.create(
            session=session,
            sequence=sequence,
            trace_ref=f"trace-{sequence}",
            tool_name="lookup_knowledge",
            status="ok",
            output="x",
            started_at=timezone.now(),
        )
    entries = trace_summary_build(session=session, token_budget=300)
    assert _tokens(entries) <= 300
    validated = [TraceSummaryEntry.model_validate(e) for e in entries]
    ids = set(ToolInvocation.objects.filter(session=session).values_list("pk", flat=True))
    assert all(e.invocation_id in ids for e in validated)
    assert "earlier invocation(s) omitted" in entries[0]["summary"]
    assert entries[-1]["trace_ref"] == "trace-199"


def test_a_session_over_its_trace_budget_still_reaches_an_answer(session, settings):
    from diagnosis.flow.run import diagnosis_run

    settings.TRACE_SUMMARY_TOKEN_BUDGET = 200
    session.context = {
        "now": "2026-03-02T10:40:00Z",
        "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:01:00Z"},
    }
    session.save()
    for sequence in range(1, 60):
        ToolInvocation.objects.create(
            session=session,
            attempt=0,
            sequence=sequence,
            trace_ref=f"trace-{sequence}",
            tool_name="query_metrics",
            arguments={"service": f"svc-{sequence}"},
            status="ok",
            output="y",
            summary={"series": [{"line": f"svc-{sequence} m: up since …"}], "omitted": 0},
            started_at=timezone.now(),
        )
    finished = diagnosis_run(session_id=session.id)
    assert finished is not None
    assert finished.status == "completed", finished.error
    assert finished.final_answer
