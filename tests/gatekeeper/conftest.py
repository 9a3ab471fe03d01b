"""A realistic incident session (payment-service connection-pool exhaustion) and helpers."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.utils import timezone

from diagnosis.models import DiagnosisSession, Environment, ToolInvocation

LOGS_OUTPUT = """\
query_logs service=payment-service
window 2026-03-02T10:00:00Z .. 2026-03-02T10:20:00Z, baseline 2026-03-02T09:40:00Z .. 2026-03-02T10:00:00Z
totals: 1342 lines in the window (ERROR 1192, WARN 150), 12 lines in the baseline, 4 templates
[1] NEW ERROR payment-service HikariPool-1 - Connection is not available, request timed out after <*>ms.: 1187 in window, 0 in baseline, first seen 10:04:12Z, last seen 10:19:58Z
  sample: 2026-03-02T10:04:12.331Z ERROR payment-service HikariPool-1 - Connection is not available, request timed out after 30000ms.
  sample: 2026-03-02T10:11:40.002Z ERROR payment-service POST /api/pay 504 upstream
request timeout (order_id=A-9917)
[2] WARN payment-service Slow query detected: “SELECT * FROM payments WHERE status = 'PENDING'” took <*> ms: 150 in window, 12 in baseline, surge 12.5x
  sample: 2026-03-02T10:03:55.120Z WARN payment-service Slow query detected: “SELECT * FROM payments WHERE status = 'PENDING'” took 8421 ms
[3] ERROR payment-service 支付网关 响应 超时，已重试 3 次: 5 in window, 0 in baseline
  sample: 2026-03-02T10:06:01Z ERROR payment-service 支付网关 响应 超时，已重试 3 次
[4] ERROR payment-service retry budget exhausted — giving up after 3 attempts: 4 in window, 0 in baseline
  sample: 2026-03-02T10:07:30Z ERROR payment-service 告警：ＣＰＵ使用率超过９０％ retry budget exhausted — giving up after 3 attempts
"""  # noqa: E501

METRICS_OUTPUT = """\
query_metrics service=payment-service step=60s
hikaricp_connections_active{pool="main",service="payment-service"}: window max 50 at 10:04:00Z, min 12, mean 47.3; baseline mean 14.1; ratio 3.35; change point 10:03:30Z; anomaly 0.97
hikaricp_connections_pending{pool="main",service="payment-service"}: window max 118 at 10:08:00Z, mean 86.0; baseline mean 0; anomaly 0.95
container_cpu_usage_percent{service="payment-service"}: window max 325% at 10:05:00Z; baseline mean 41%; ratio 7.9
http_server_requests_seconds_p99{uri="/api/pay"}: window max 30.2 at 10:06:00Z; baseline mean 0.41
"""  # noqa: E501

KNOWLEDGE_OUTPUT = """\
=== kb-payment-pool-exhaustion | 支付服务连接池耗尽 / 处置步骤 ===
当 HikariCP 活跃连接数达到 maximumPoolSize 时，新请求会等待 connectionTimeout（默认 30000ms）后失败。
处置：先扩大连接池或限流，再排查慢查询。
=== kb-payment-slow-query | 慢查询排查 / 常见原因 ===
PENDING 状态订单全表扫描会导致慢查询，需要为 status 字段建立索引。
"""  # noqa: E501

KNOWLEDGE_SUMMARY = {
    "query": "连接池耗尽",
    "chunks": [
        {
            "chunk_id": "kb-payment-pool-exhaustion",
            "title": "支付服务连接池耗尽",
            "heading": "处置步骤",
            "text": "当 HikariCP 活跃连接数达到 maximumPoolSize 时…",
        },
        {
            "chunk_id": "kb-payment-slow-query",
            "title": "慢查询排查",
            "heading": "常见原因",
            "text": "PENDING 状态订单全表扫描会导致慢查询…",
        },
    ],
}

ERROR_OUTPUT = 'error: Loki returned 502 Bad Gateway for query {service="payment-gateway"}'
TIMEOUT_OUTPUT = 'timeout: Prometheus did not answer within 15s (query up{job="payment-db"})'
NO_DATA_OUTPUT = 'no data: no series matched db_replication_lag_seconds{service="payment-db"}'

OTHER_SESSION_LOGS = """\
query_logs service=inventory-service
[1] NEW ERROR inventory-service Deadlock found when trying to get lock; try restarting transaction: 42 in window
"""  # noqa: E501


# the logs and metrics were queried for payment-service: that argument binds the name
PAYMENT = {"service": "payment-service"}


@dataclass
class Incident:
    session: DiagnosisSession
    other_session: DiagnosisSession
    logs: ToolInvocation
    metrics: ToolInvocation
    knowledge: ToolInvocation
    errored: ToolInvocation
    timed_out: ToolInvocation
    no_data: ToolInvocation
    other_logs: ToolInvocation


def invocation_create(session, sequence, tool_name, status, output, summary=None, arguments=None):
    return ToolInvocation.objects.create(
        arguments=arguments or {},
        session=session,
        sequence=sequence,
        trace_ref=f"trace-{sequence}",
        tool_name=tool_name,
        status=status,
        output=output,
        output_size=len(output),
        summary=summary or {},
        started_at=timezone.now(),
    )


@pytest.fixture
def incident(db, owner, outsider) -> Incident:
    env = Environment.objects.create(slug="demo-payment", name="payment demo")
    session = DiagnosisSession.objects.create(
        owner=owner,
        environment=env,
        original_query="payment-service 从 10 点开始大量超时，原因是什么？",
        self_evaluation={"history": [{"attempt": 1}]},
    )
    other = DiagnosisSession.objects.create(
        owner=outsider, environment=env, original_query="inventory-service 死锁？"
    )
    ok = ToolInvocation.Status.OK
    return Incident(
        session=session,
        other_session=other,
        logs=invocation_create(session, 1, "query_logs", ok, LOGS_OUTPUT, arguments=PAYMENT),
        metrics=invocation_create(
            session, 2, "query_metrics", ok, METRICS_OUTPUT, arguments={**PAYMENT, "step": "60s"}
        ),
        knowledge=invocation_create(
            session,
            3,
            "lookup_knowledge",
            ok,
            KNOWLEDGE_OUTPUT,
            KNOWLEDGE_SUMMARY,
            arguments={"query": "payment-service 连接池耗尽"},
        ),
        errored=invocation_create(
            session, 4, "query_logs", ToolInvocation.Status.ERROR, ERROR_OUTPUT
        ),
        timed_out=invocation_create(
            session, 5, "query_metrics", ToolInvocation.Status.TIMEOUT, TIMEOUT_OUTPUT
        ),
        no_data=invocation_create(
            session, 6, "query_metrics", ToolInvocation.Status.NO_DATA, NO_DATA_OUTPUT
        ),
        other_logs=invocation_create(other, 1, "query_logs", ok, OTHER_SESSION_LOGS),
    )


def binding(source_id="trace-1", excerpt="", **extra):
    data = {
        "source_type": extra.pop("source_type", "tool_trace"),
        "source_id": source_id,
        "evidence_excerpt": excerpt,
    }
    data.update(extra)
    return data


def claim(claim_id="claim-1", bindings=(), **extra):
    data = {
        "claim_id": claim_id,
        "claim_type": extra.pop("claim_type", "symptom"),
        "claim_text": extra.pop("claim_text", "payment-service 出现连接池超时。"),
        "entity": "payment-service",
        "support_level": extra.pop("support_level", "direct"),
        "evidence_bindings": list(bindings),
    }
    data.update(extra)
    return data


def executor_json(*claims, **extra) -> str:
    data = {
        "answer_version": "executor_evidence_v2",
        "claims": list(claims),
        "hypotheses": [],
        "recommended_actions": [],
        "missing_info": [],
    }
    data.update(extra)
    return json.dumps(data, ensure_ascii=False)
