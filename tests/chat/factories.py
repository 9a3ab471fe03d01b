"""Sessions as the flow leaves them, built from the real contracts (shape of flow/run.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from chat.models import Conversation
from diagnosis.contracts import (
    Decision,
    ExecutorEvidenceV2,
    GatekeeperReport,
    VerifierOutput,
)
from diagnosis.flow.composer_filter import composer_input_build
from diagnosis.flow.parsing import executor_output_parse
from diagnosis.models import DiagnosisSession, Environment, SessionEvent, ToolInvocation
from tests.support.gatekeeper import gatekeeper_run

WINDOW = {"start": "2026-03-02T10:20:00Z", "end": "2026-03-02T10:50:00Z"}
BASELINE = {"start": "2026-03-02T08:20:00Z", "end": "2026-03-02T10:20:00Z"}

METRIC_LINE = (
    'payment-service db_pool_active_connections{pool="main"}: window max 50 at '
    "2026-03-02T10:31:00Z, window min 12, window mean 47.2, baseline mean 11.8, ratio 4x, "
    "change point 2026-03-02T10:22:00Z, anomaly score 41 (up)"
)
TREND_LINE = (
    'payment-service db_pool_active_connections{pool="main"} trend, mean per 12m30s from '
    "2026-03-02T08:20:00Z: 11.5 | 12 | 11.8 | 12.1 | 11.7 | 11.9 | 12 | 11.6 | 11.8 | 12 | 48 | 50"
)
METRIC_OUTPUT = "\n".join(
    [
        'query_metrics metric=db_pool_active_connections service="payment-service"',
        "window 2026-03-02T10:20:00Z to 2026-03-02T10:50:00Z; baseline 2026-03-02T08:20:00Z to "
        "2026-03-02T10:20:00Z; step 1m",
        "1 series matched, most anomalous first:",
        METRIC_LINE,
        TREND_LINE,
    ]
)
LOG_LINE = (
    "payment-service ERROR x412 first 2026-03-02T10:22:05Z last 2026-03-02T10:49:58Z: "
    "HikariPool-1 - Connection is not available, request timed out after 30000ms"
)


def environment_make(slug: str = "demo-pool") -> Environment:
    return Environment.objects.get_or_create(
        slug=slug,
        defaults={"name": "支付连接池耗尽（演示）", "services": ["payment-service"]},
    )[0]


def conversation_make(*, owner, environment: Environment | None = None) -> Conversation:
    return Conversation.objects.create(
        owner=owner, environment=environment or environment_make(), title="支付超时"
    )


def _executor_output(log_line: str) -> ExecutorEvidenceV2:
    return ExecutorEvidenceV2.model_validate(
        {
            "claims": [
                {
                    "claim_id": "c1",
                    "claim_type": "observation",
                    "claim_text": "payment-service 的数据库连接池在 10:22 后打满（50/50）",
                    "entity": "payment-service",
                    "support_level": "direct",
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": "trace-1",
                            "tool_name": "query_metrics",
                            "evidence_excerpt": "window max 50 at 2026-03-02T10:31:00Z",
                        }
                    ],
                },
                {
                    "claim_id": "c2",
                    "claim_type": "observation",
                    "claim_text": "payment-service 日志出现大量获取连接超时",
                    "entity": "payment-service",
                    "support_level": "direct",
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": "trace-2",
                            "tool_name": "query_logs",
                            "evidence_excerpt": log_line.split(": ", 1)[1][:60],
                        }
                    ],
                },
                {
                    "claim_id": "c3",
                    "claim_type": "root_cause",
                    "claim_text": "根因是 mysql 主库磁盘故障",
                    "entity": "mysql",
                    "support_level": "inferred",
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": "trace-2",
                            "tool_name": "query_logs",
                            "evidence_excerpt": "disk failure on mysql-primary",
                        }
                    ],
                },
            ],
            "hypotheses": [
                {"hypothesis_text": "连接泄漏导致连接池耗尽", "basis": "连接数持续不回落"}
            ],
            "missing_info": ["没有 mysql 慢查询日志"],
            "recommended_actions": [
                {"action_text": "检查 payment-service 连接池上限与泄漏", "reason": "连接池已打满"}
            ],
        }
    )


def session_make(
    *,
    conversation: Conversation,
    question: str = "支付服务为什么超时？",
    status: str = DiagnosisSession.Status.COMPLETED,
    log_line: str = LOG_LINE,
    answer: str | None = None,
    created_at: datetime | None = None,
) -> DiagnosisSession:
    """A session in the given status; a completed one carries invocations and evaluation."""
    now = timezone.now()
    session = DiagnosisSession.objects.create(
        owner=conversation.owner,
        environment=conversation.environment,
        conversation=conversation,
        original_query=question,
        status=status,
        stage=DiagnosisSession.Stage.DONE
        if status != DiagnosisSession.Status.RUNNING
        else DiagnosisSession.Stage.EXECUTOR,
        started_at=now - timedelta(seconds=12),
        context={"window": WINDOW, "history": []},
    )
    if created_at:
        DiagnosisSession.objects.filter(pk=session.pk).update(created_at=created_at)
    if status == DiagnosisSession.Status.RUNNING:
        SessionEvent.objects.create(session=session, sequence=1, kind="stage", stage="planner")
        SessionEvent.objects.create(
            session=session,
            sequence=2,
            kind="tool_call",
            stage="executor",
            message="query_metrics",
            data={"arguments": {"metric": "db_pool_active_connections", "service": "payment"}},
        )
        SessionEvent.objects.create(
            session=session,
            sequence=3,
            kind="tool_result",
            stage="executor",
            message="trace-1 query_metrics: ok",
            data={"trace_ref": "trace-1", "status": "ok", "invocation_id": 1},
        )
        SessionEvent.objects.create(
            session=session,
            sequence=4,
            kind="tool_call",
            stage="executor",
            message="query_logs",
            data={"arguments": {"service": "payment-service", "query": "timeout"}},
        )
        return session
    if status == DiagnosisSession.Status.FAILED:
        session.final_answer = "**诊断未能完成**"
        session.error = "LLMError: boom"
        session.finished_at = now
        session.save()
        return session

    started = datetime(2026, 3, 2, 10, 55, tzinfo=UTC)
    ToolInvocation.objects.create(
        session=session,
        sequence=1,
        trace_ref="trace-1",
        tool_name="query_metrics",
        arguments={"metric": "db_pool_active_connections", "service": "payment-service"},
        status="ok",
        output=METRIC_OUTPUT,
        output_size=len(METRIC_OUTPUT),
        summary={
            "window": WINDOW,
            "baseline": BASELINE,
            "step": "1m",
            "series": [
                {
                    "service": "payment-service",
                    "metric": "db_pool_active_connections",
                    "labels": {"pool": "main", "service": "payment-service"},
                    "rate": False,
                    "window_max": 50,
                    "line": METRIC_LINE,
                    "trend_line": TREND_LINE,
                }
            ],
            "omitted": 0,
        },
        started_at=started,
        duration_ms=40,
    )
    log_output = "\n".join(
        [
            'query_logs service="payment-service" query="timeout"',
            "window 2026-03-02T10:20:00Z to 2026-03-02T10:50:00Z",
            "2 templates matched:",
            log_line,
            "payment-service WARN x3 first 2026-03-02T10:40:00Z: slow response from bank-gateway",
        ]
    )
    ToolInvocation.objects.create(
        session=session,
        sequence=2,
        trace_ref="trace-2",
        tool_name="query_logs",
        arguments={"service": "payment-service", "query": "timeout"},
        status="ok",
        output=log_output,
        output_size=len(log_output),
        summary={},
        started_at=started,
        duration_ms=25,
    )
    executor_output = _executor_output(log_line)
    gatekeeper = GatekeeperReport.model_validate(
        {
            "parse_status": "parsed_v2",
            "claims": [
                {"claim_id": "c1", "verdict": "accepted", "valid_bindings": 1},
                {"claim_id": "c2", "verdict": "accepted", "valid_bindings": 1},
                {
                    "claim_id": "c3",
                    "verdict": "demoted",
                    "findings": [
                        {
                            "code": "excerpt_not_found",
                            "binding": 0,
                            "detail": "excerpt not in trace-2 output",
                        }
                    ],
                },
            ],
            "counts": {"claims": 3, "accepted": 2, "demoted": 1},
        }
    )
    verifier = VerifierOutput.model_validate(
        {
            "decision": "PASS",
            "claim_checks": [
                {"claim_id": "c1", "classification": "direct_observation"},
                {"claim_id": "c2", "classification": "reasonable_inference"},
                {
                    "claim_id": "c3",
                    "classification": "unsupported",
                    "reason": "没有任何磁盘相关证据",
                },
            ],
            "summary": "连接池耗尽有直接证据",
        }
    )
    filtered = composer_input_build(
        question=question,
        language="zh-CN",
        decision=Decision.PASS,
        executor_output=executor_output,
        gatekeeper=gatekeeper,
        verifier=verifier,
    )
    session.executor_structured_output = executor_output.model_dump(mode="json")
    session.executor_output_parse_status = "parsed_v2"
    session.self_evaluation = {
        "attempts": [{"attempt": 1, "routed_decision": "PASS"}],
        "gatekeeper": gatekeeper.model_dump(mode="json"),
        "verifier_evaluation": {
            "status": "parsed",
            "decision": "PASS",
            "routed_decision": "PASS",
            "claim_checks": [c.model_dump(mode="json") for c in verifier.claim_checks],
            "placements": filtered.placements,
            "disagreements": filtered.disagreements,
            "composer_output": {"status": "ok", "source": "composer"},
        },
        "composer_input": filtered.composer_input.model_dump(mode="json"),
    }
    session.decision = "PASS"
    session.final_answer = (
        answer
        if answer is not None
        else "**结论**：payment-service 的数据库连接池在 10:22 后打满（50/50）。\n\n"
        "- 日志出现大量获取连接超时\n\n"
        "**可能的原因（待证实）**\n\n- 连接泄漏导致连接池耗尽（依据：连接数持续不回落）\n\n"
        "**缺少的信息**\n\n- 没有 mysql 慢查询日志\n\n"
        "**建议的下一步**\n\n- 检查 payment-service 连接池上限与泄漏\n"
    )
    session.answer_source = "composer"
    session.attempt_count = 1
    session.finished_at = now
    session.save()
    return session


def session_recheck(
    session: DiagnosisSession, *, claims: list[dict], checks: list[dict]
) -> DiagnosisSession:
    """``session`` with ``claims`` re-checked by the real Gatekeeper v2, the Verifier's
    ``checks`` and the Composer filter's placements recorded (a LOW_CONFID run)."""
    raw = json.dumps({"answer_version": "executor_evidence_v2", "claims": claims})
    parsed = executor_output_parse(raw)
    session.executor_structured_output = parsed.raw_object
    report = gatekeeper_run(session=session, parsed=parsed)
    verifier = VerifierOutput.model_validate({"decision": "LOW_CONFID", "claim_checks": checks})
    filtered = composer_input_build(
        question=session.original_query,
        language="zh-CN",
        decision=Decision.LOW_CONFID,
        executor_output=parsed.output,
        gatekeeper=report,
        verifier=verifier,
    )
    evaluation = dict(session.self_evaluation)
    evaluation["gatekeeper"] = report.model_dump(mode="json")
    evaluation["verifier_evaluation"] = {
        **evaluation["verifier_evaluation"],
        "claim_checks": [c.model_dump(mode="json") for c in verifier.claim_checks],
        "placements": filtered.placements,
    }
    evaluation["composer_input"] = filtered.composer_input.model_dump(mode="json")
    session.self_evaluation = evaluation
    session.save()
    return session
