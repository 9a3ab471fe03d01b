"""Evidence backends that stop, hang or raise, and a database that drops a write.

Sessions run through the `openai` provider against the loopback model server;
a live environment points at loopback Prometheus/Loki stubs.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from diagnosis.evidence import invoke
from diagnosis.flow.trace_summary import trace_summary_build
from diagnosis.models import DiagnosisSession, Environment, LLMCall, ToolInvocation
from diagnosis.services import SAFE_FAILURE_ANSWER, sessions_reap_stale
from tests.reliability.conftest import is_raw_json
from tests.support.observability_stubs import LOKI_ERROR, observability_stub_running
from tests.support.openai_faults import UFA_MARKER, executor_turns_responder, faulty_responder
from tests.support.openai_roles import role_responder

METRICS = ("query_metrics", {"service": "payment-service"})
LOGS = ("query_logs", {"service": "payment-service", "level": "ERROR"})
KNOWLEDGE = ("lookup_knowledge", {"query": "连接池耗尽"})


@pytest.fixture
def live_env(db):
    def make(*, prometheus_url: str = "", loki_url: str = "") -> Environment:
        return Environment.objects.create(
            slug="live-shop",
            name="Live shop",
            kind=Environment.Kind.LIVE,
            prometheus_url=prometheus_url,
            loki_url=loki_url,
            services=["payment-service"],
        )

    return make


def _rows(session):
    return list(ToolInvocation.objects.filter(session=session).order_by("sequence"))


def _verdicts(session) -> dict[str, dict]:
    return {c["claim_id"]: c for c in session.self_evaluation["gatekeeper"]["claims"]}


def _codes(verdict: dict) -> set[str]:
    return {f["code"] for f in verdict["findings"]}


def _assert_safe(session) -> None:
    assert session.status in DiagnosisSession.TERMINAL_STATUSES
    assert session.final_answer.strip() and not is_raw_json(session.final_answer)
    assert UFA_MARKER not in session.final_answer


def test_prometheus_stopping_mid_session_becomes_an_error_row_and_a_recorded_gap(
    openai_run, live_env, monkeypatch
):
    real_invoke = invoke.tool_invoke
    with observability_stub_running() as prometheus, observability_stub_running() as loki:
        env = live_env(prometheus_url=prometheus.url, loki_url=loki.url)

        def invoke_then_stop_prometheus(**kwargs):
            result = real_invoke(**kwargs)
            if kwargs["tool_name"] == "query_metrics":
                prometheus.stop()
            return result

        monkeypatch.setattr(invoke, "tool_invoke", invoke_then_stop_prometheus)
        session, _ = openai_run(
            executor_turns_responder([[METRICS], [METRICS, LOGS]]), environment=env
        )

    assert session.status == DiagnosisSession.Status.COMPLETED, session.error
    _assert_safe(session)
    rows = _rows(session)
    assert [(r.trace_ref, r.tool_name, r.status) for r in rows] == [
        ("trace-1", "query_metrics", "ok"),
        ("trace-2", "query_metrics", "error"),
        ("trace-3", "query_logs", "ok"),
    ]
    assert "cannot reach Prometheus" in rows[1].error
    assert LOKI_ERROR in rows[2].output
    verdicts = _verdicts(session)
    assert verdicts["claim-1"]["verdict"] == "accepted"
    assert verdicts["claim-2"]["verdict"] == "demoted"
    assert "invocation_failed" in _codes(verdicts["claim-2"])
    assert verdicts["claim-3"]["verdict"] == "accepted"
    composer_input = session.self_evaluation["composer_input"]
    assert {c["claim_id"] for c in composer_input["allowed_claims"]} == {"claim-1", "claim-3"}
    # a claim on a failed call is a gap worded by the evidence it lacks (gatekeeper_v2)
    assert any("引用的工具调用没有成功返回数据" in item for item in composer_input["missing_info"])
    summary = {entry["trace_ref"]: entry for entry in trace_summary_build(session=session)}
    assert summary["trace-2"]["status"] == "error"
    verifier_request = LLMCall.objects.get(session=session, role="verifier").request
    assert "cannot reach Prometheus" in str(verifier_request)


def test_a_slow_loki_becomes_a_timeout_row_within_the_tool_timeout(openai_run, live_env, settings):
    settings.TOOL_TIMEOUT_SECONDS = 0.3
    with observability_stub_running(delay=3.0) as loki:
        env = live_env(loki_url=loki.url)
        session, _ = openai_run(executor_turns_responder([[LOGS]]), environment=env)

    assert session.status == DiagnosisSession.Status.COMPLETED, session.error
    _assert_safe(session)
    [row] = _rows(session)
    assert row.status == ToolInvocation.Status.TIMEOUT
    assert "did not answer within 0.3s" in row.error
    assert "invocation_failed" in _codes(_verdicts(session)["claim-1"])
    assert session.self_evaluation["composer_input"]["allowed_claims"] == []


# where each tool's definition calls its backend
BACKEND_MODULES = {
    "logs_from_files": "diagnosis.evidence.tools.query_logs.definition",
    "metrics_query": "diagnosis.evidence.tools.query_metrics.definition",
    "knowledge_lookup": "diagnosis.evidence.tools.lookup_knowledge.definition",
}


@pytest.mark.parametrize(
    "backend,call",
    [("logs_from_files", LOGS), ("metrics_query", METRICS), ("knowledge_lookup", KNOWLEDGE)],
)
def test_a_tool_backend_that_raises_becomes_an_error_row_and_the_flow_goes_on(
    openai_run, monkeypatch, backend, call
):
    def explode(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(f"{BACKEND_MODULES[backend]}.{backend}", explode)
    session, _ = openai_run(executor_turns_responder([[call], [LOGS]]))

    assert session.status == DiagnosisSession.Status.COMPLETED, session.error
    _assert_safe(session)
    first = _rows(session)[0]
    assert (first.tool_name, first.status) == (call[0], "error")
    assert "backend failed: RuntimeError: disk on fire" in first.error
    assert "invocation_failed" in _codes(_verdicts(session)["claim-1"])
    roles = set(LLMCall.objects.filter(session=session).values_list("role", flat=True))
    assert {"verifier", "composer"} <= roles


# --- the database drops a write -------------------------------------------------------------


class _WriteDrop:
    """A statement wrapper: a write (UPDATE or INSERT) for which ``when(sql, params)`` holds
    raises OperationalError, as a dropped connection does; once, or from then on with
    ``stays_down`` until ``back()``. At the statement, so that it does not matter which
    ORM call (``save``, ``update``, ``bulk_create``) issues the write."""

    def __init__(self, when, *, stays_down: bool = False) -> None:
        self.when = when
        self.stays_down = stays_down
        self.dropped: list[str] = []
        self.down = False

    def back(self) -> None:
        self.down = self.stays_down = False

    def __call__(self, execute, sql, params, many, context):
        write = sql.lstrip().upper().startswith(("UPDATE", "INSERT"))
        if write and (self.down or (not self.dropped and self.when(sql, params or ()))):
            self.dropped.append(sql[:80])
            self.down = self.stays_down
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)


def _session_update(*columns: str, without: tuple[str, ...] = ()):
    """An UPDATE of the session row that writes every one of ``columns`` and none of ``without``."""

    def when(sql: str, params) -> bool:
        return (
            sql.startswith('UPDATE "diagnosis_session"')
            and all(f'"{c}" =' in sql for c in columns)
            and not any(f'"{c}" =' in sql for c in without)
        )

    return when


def _insert(table: str, value: str | None = None):
    """An INSERT into ``table`` (of a row carrying ``value``)."""

    def when(sql: str, params) -> bool:
        return sql.startswith(f'INSERT INTO "{table}"') and (value is None or value in params)

    return when


WRITES = {
    "plan": _session_update("plan"),
    "executor output": _session_update("executor_final_answer"),
    "attempt record": _session_update("self_evaluation", without=("decision",)),
    "final answer": _session_update("decision"),
    "tool invocation": _insert("tool_invocation"),
    "llm call": _insert("diagnosis_llmcall", "verifier"),
    "progress event": _insert("diagnosis_sessionevent", "tool_result"),
}


def _assert_no_half_written_attempt(session) -> None:
    rows = _rows(session)
    by_ref = {r.trace_ref: r for r in rows}
    for attempt in session.self_evaluation.get("attempts", []):
        # role_responder's Executor calls query_logs once per attempt.
        assert any(r.attempt == attempt["attempt"] for r in rows), attempt
        for verdict in attempt["gatekeeper"]["claims"]:
            if verdict["verdict"] == "accepted":
                claim = next(
                    c
                    for c in attempt["structured_output"]["claims"]
                    if c["claim_id"] == verdict["claim_id"]
                )
                for binding in claim["evidence_bindings"]:
                    assert binding["source_id"] in by_ref
    assert [r.sequence for r in rows] == list(range(1, len(rows) + 1))


# Transactional: as in a worker, no test transaction around the run, which a failed
# statement inside it would poison for every later query.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("write", list(WRITES))
def test_a_dropped_database_write_ends_the_session_cleanly(openai_run, write):
    drop = _WriteDrop(WRITES[write])
    with connection.execute_wrapper(drop):
        session, _ = openai_run(faulty_responder(None, None))

    assert drop.dropped, f"the {write} write was never attempted"
    session.refresh_from_db()
    _assert_safe(session)
    assert session.status == DiagnosisSession.Status.FAILED
    assert session.final_answer == SAFE_FAILURE_ANSWER["zh"]
    assert session.answer_source == "fallback"
    assert "OperationalError" in session.error
    assert session.decision == ""  # a completed-looking half write never survives
    assert session.finished_at is not None
    _assert_no_half_written_attempt(session)


@pytest.mark.django_db(transaction=True)
def test_what_a_dropped_stage_write_carried_is_still_recorded_on_the_failed_session(openai_run):
    # The UPDATE entering the Gatekeeper carries the Executor's output (deferred to it).
    drop = _WriteDrop(_session_update("executor_final_answer"))
    with connection.execute_wrapper(drop):
        session, _ = openai_run(faulty_responder(None, None))
    assert drop.dropped
    session.refresh_from_db()
    assert session.status == DiagnosisSession.Status.FAILED
    assert session.executor_final_answer  # kept for review, not lost with the write
    assert session.executor_output_parse_status


@pytest.mark.django_db(transaction=True)
def test_a_session_whose_database_stays_down_is_failed_by_the_reaper_later(openai_run, settings):
    drop = _WriteDrop(_session_update("executor_final_answer"), stays_down=True)
    with connection.execute_wrapper(drop):
        with pytest.raises(OperationalError):
            openai_run(role_responder)
        session = DiagnosisSession.objects.get()
        assert session.status == DiagnosisSession.Status.RUNNING  # nobody could write the end
        drop.back()  # the database is back
    later = timezone.now() + timedelta(seconds=settings.DIAGNOSIS_STALE_AFTER_SECONDS + 1)
    assert sessions_reap_stale(now=later) == 1
    session.refresh_from_db()
    assert session.status == DiagnosisSession.Status.FAILED
    assert "worker_lost" in session.error
    assert session.final_answer == SAFE_FAILURE_ANSWER["zh"]
    _assert_no_half_written_attempt(session)
