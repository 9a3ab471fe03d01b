"""Out-of-range arguments are clamped (and the output says so); absent sources are gaps."""

from __future__ import annotations

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation

CONTEXT = {
    "now": "2026-03-02T10:40:00Z",
    "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
}


def _invoke(session, tool, arguments):
    session.context = CONTEXT
    session.save()
    result = tool_invoke(session=session, attempt=1, tool_name=tool, arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


def test_a_limit_above_the_maximum_is_clamped_and_the_output_says_so(session):
    row = _invoke(session, "query_logs", {"service": "pay", "limit": 100})
    assert row.status == "ok"
    assert row.summary["clamped"] == {
        "limit": {"given": 100, "used": 20, "reason": "allowed 1 to 20"}
    }
    assert "clamped: limit given 100, used 20 (allowed 1 to 20)" in row.output.splitlines()[1]
    assert row.arguments == {"service": "pay", "limit": 100}
    assert row.summary["templates"], "the call still answers"


def test_a_k_below_the_minimum_is_clamped(session):
    row = _invoke(session, "lookup_knowledge", {"query": "连接池", "k": -3})
    assert row.status == "ok"
    assert row.summary["clamped"]["k"]["used"] == 1
    assert len(row.summary["chunks"]) == 1


def test_a_reversed_time_range_is_swapped_and_said(session):
    row = _invoke(
        session,
        "query_metrics",
        {"metric": "pool_active", "start": "2026-03-02T10:40:00Z", "end": "2026-03-02T10:00:00Z"},
    )
    assert row.status == "ok"
    assert row.summary["window"] == CONTEXT["window"]
    assert row.summary["clamped"]["start"]["used"] == "2026-03-02T10:00:00Z"
    assert "clamped: start given 2026-03-02T10:40:00Z, used 2026-03-02T10:00:00Z" in row.output


def test_a_huge_range_is_cut_to_31_days_ending_where_asked(session):
    row = _invoke(
        session,
        "query_metrics",
        {"metric": "pool_active", "start": "2020-01-01T00:00:00Z", "end": "2026-03-02T10:40:00Z"},
    )
    assert row.status in {"ok", "no_data"}
    assert row.summary["clamped"]["start"] == {
        "given": "2020-01-01T00:00:00Z",
        "used": "2026-01-30T10:40:00Z",
        "reason": "at most 31 days",
    }


def test_a_step_longer_than_the_window_is_clamped_to_the_window(session):
    row = _invoke(session, "query_metrics", {"metric": "pool_active", "step": "1d"})
    assert row.summary["clamped"]["step"]["given"] == "24h"
    assert row.summary["clamped"]["step"]["used"] == "40m"
    assert "clamped: step given 24h, used 40m" in row.output


def test_an_argument_in_range_is_not_reported_as_clamped(session):
    row = _invoke(session, "query_logs", {"service": "pay", "limit": 20})
    assert "clamped" not in row.summary
    assert "clamped:" not in row.output


def test_unknown_keys_and_wrong_types_stay_errors(session):
    unknown = _invoke(session, "query_logs", {"service": "pay", "limt": 100})
    wrong = _invoke(session, "query_logs", {"service": "pay", "limit": "100"})
    assert unknown.status == wrong.status == "error"
    assert "unknown argument(s) 'limt'" in unknown.output
    assert "must be an integer" in wrong.output


def test_a_live_environment_without_sources_gives_no_data_with_the_reason(owner, db):
    environment = Environment.objects.create(
        slug="bare", name="Bare", kind=Environment.Kind.LIVE, services=["pay"]
    )
    session = DiagnosisSession.objects.create(
        owner=owner, environment=environment, original_query="q", context=CONTEXT
    )
    logs = _invoke(session, "query_logs", {"service": "pay"})
    metrics = _invoke(session, "query_metrics", {"service": "pay"})
    assert logs.status == metrics.status == "no_data"
    assert logs.summary["missing_source"] == "logs"
    assert metrics.summary["missing_source"] == "metrics"
    assert "no data: no logs source configured for environment bare" in logs.output
    assert metrics.summary["reason"] == "no metrics source configured for environment bare"
    assert logs.error == metrics.error == ""


def test_a_pack_without_log_files_gives_no_data_not_an_error(session, pack_dir):
    import shutil

    shutil.rmtree(pack_dir / "logs")
    row = _invoke(session, "query_logs", {"service": "pay"})
    assert row.status == "no_data"
    assert row.summary["missing_source"] == "logs"
    assert row.summary["templates"] == []
