"""REST API under load: GET /api/v1/diagnoses/{id} and the list, on gunicorn + PostgreSQL.

Seeds 10,000 finished sessions (claims, bindings, events, invocations, usage) for one
user, checks that the queries per request do not grow with the page size, starts
gunicorn on loopback and drives it with 20 concurrent clients. Prints p50/p95 latency
and requests per second per endpoint.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_bench .venv/bin/python bench/api.py
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The benchmark measures the API, not its rate limit.
os.environ["API_RATE_LIMIT"] = "100000000/min"

from bench._django import django_setup  # noqa: E402
from bench._http import gunicorn_start, http_load  # noqa: E402

django_setup(default_db="rootproof_bench")

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from diagnosis.api.services import api_key_create  # noqa: E402
from diagnosis.models import (  # noqa: E402
    DiagnosisSession,
    Environment,
    SessionEvent,
    ToolInvocation,
)

USER = "bench-api"
BATCH = 1000


def _evaluation(trace_ids: dict[str, int]) -> tuple[dict, dict]:
    structured = {
        "answer_version": "executor_evidence_v2",
        "claims": [
            {
                "claim_id": f"claim-{n}",
                "claim_type": "symptom",
                "claim_text": f"payment-service 出现请求超时日志 #{n}。",
                "entity": "payment-service",
                "support_level": "direct",
                "evidence_bindings": [
                    {
                        "source_type": "tool_trace",
                        "source_id": "trace-1",
                        "tool_name": "query_logs",
                        "source_invocation_ids": [trace_ids["trace-1"]],
                        "evidence_excerpt": "request timeout after 5000ms",
                    }
                ],
            }
            for n in range(1, 5)
        ],
        "hypotheses": [{"hypothesis_text": "连接池配置过小", "basis": "runbook"}],
        "recommended_actions": [{"action_text": "检查连接池", "reason": "超时"}],
        "missing_info": ["数据库指标"],
    }
    evaluation = {
        "gatekeeper": {
            "claims": [
                {
                    "claim_id": f"claim-{n}",
                    "verdict": "accepted",
                    "valid_bindings": 1,
                    "findings": [],
                }
                for n in range(1, 5)
            ],
            "counts": {"claims": 4, "accepted": 4, "demoted": 0},
        },
        "verifier_evaluation": {
            "claim_checks": [
                {"claim_id": f"claim-{n}", "classification": "direct_observation", "reason": "ok"}
                for n in range(1, 5)
            ],
            "placements": {f"claim-{n}": "allowed_claim" for n in range(1, 5)},
            "composer_output": {"status": "ok", "source": "composer", "final_answer": "…"},
        },
        "composer_input": {
            "decision": "PASS",
            "language": "zh-CN",
            "question": "q",
            "allowed_claims": [],
            "allowed_hypotheses": [{"text": "连接池配置过小", "basis": "runbook"}],
            "missing_info": ["数据库指标"],
            "recommended_actions": [{"text": "检查连接池", "reason": "超时"}],
        },
    }
    return structured, evaluation


STAGES = ["queued", "planner", "executor", "gatekeeper", "verifier", "composer", "done"]


def _sessions(
    *, user: Any, environment: Environment, first: int, size: int, now: datetime
) -> list[DiagnosisSession]:
    """``size`` finished sessions numbered from ``first``, each a minute older."""
    return [
        DiagnosisSession(
            owner=user,
            environment=environment,
            source=random.choice(["api", "alert", "chat"]),
            original_query=f"payment-service 为什么超时？#{first + i}",
            status="completed",
            stage="done",
            decision=random.choice(["PASS", "LOW_CONFID", "REJECT"]),
            answer_source="composer",
            final_answer="**结论**\n\npayment-service 出现请求超时日志。\n" * 5,
            attempt_count=1,
            started_at=now - timedelta(minutes=first + i, seconds=30),
            finished_at=now - timedelta(minutes=first + i),
            llm_usage={"total": {"calls": 4, "tokens_in": 4000, "tokens_out": 900}},
        )
        for i in range(size)
    ]


def _invocations(rows: list[DiagnosisSession], now: datetime) -> list[ToolInvocation]:
    """Three tool calls per session: one query_logs, two query_metrics."""
    return [
        ToolInvocation(
            session=row,
            sequence=seq,
            trace_ref=f"trace-{seq}",
            tool_name="query_logs" if seq == 1 else "query_metrics",
            arguments={"service": "payment-service"},
            status="ok",
            output="payment-service ERROR request timeout after 5000ms count=42\n" * 20,
            output_size=1240,
            started_at=now,
        )
        for row in rows
        for seq in (1, 2, 3)
    ]


def _seed_batch(
    *, user: Any, environment: Environment, first: int, size: int, now: datetime
) -> None:
    """One transaction: the sessions, their invocations, claims bound to them, events."""
    with transaction.atomic():
        rows = DiagnosisSession.objects.bulk_create(
            _sessions(user=user, environment=environment, first=first, size=size, now=now)
        )
        invocations = ToolInvocation.objects.bulk_create(_invocations(rows, now))
        by_session: dict[int, dict[str, int]] = {}
        for invocation in invocations:
            by_session.setdefault(invocation.session_id, {})[invocation.trace_ref] = invocation.pk
        for row in rows:
            row.executor_structured_output, row.self_evaluation = _evaluation(by_session[row.pk])
        DiagnosisSession.objects.bulk_update(
            rows, ["executor_structured_output", "self_evaluation"], batch_size=BATCH
        )
        SessionEvent.objects.bulk_create(
            [
                SessionEvent(session=row, sequence=seq, kind="stage", stage=stage, message=stage)
                for row in rows
                for seq, stage in enumerate(STAGES, start=1)
            ]
        )


def seed(*, sessions: int):
    user, _ = get_user_model().objects.get_or_create(username=USER)
    environment, _ = Environment.objects.get_or_create(slug="bench-api", defaults={"name": "bench"})
    have = DiagnosisSession.objects.filter(owner=user).count()
    now = timezone.now()
    started = time.monotonic()
    while have < sessions:
        size = min(BATCH, sessions - have)
        _seed_batch(user=user, environment=environment, first=have, size=size, now=now)
        have += size
    if time.monotonic() - started > 1:
        print(f"seeded to {have} sessions in {time.monotonic() - started:.1f}s")
    # Fresh planner statistics, as autovacuum would leave them on a live database.
    with connection.cursor() as cursor:
        for table in ("diagnosis_session", "diagnosis_sessionevent", "tool_invocation"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    return user


def queries_per_request(*, key: str, public_id: str) -> dict[str, int]:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    client.get("/api/v1/diagnoses?page_size=1")  # last_used_at written once, outside the count
    counts = {}
    for size in (1, 20, 100):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(f"/api/v1/diagnoses?page_size={size}")
        assert response.status_code == 200 and len(response.json()["results"]) == size
        counts[f"list page_size={size}"] = len(ctx.captured_queries)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(f"/api/v1/diagnoses/{public_id}").status_code == 200
    counts["detail"] = len(ctx.captured_queries)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) * 2 + 1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    user = seed(sessions=args.sessions)
    key = api_key_create(owner=user, name=f"bench {timezone.now():%H:%M:%S}").key
    ids = [
        str(p)
        for p in DiagnosisSession.objects.filter(owner=user).values_list("public_id", flat=True)[
            :2000
        ]
    ]
    counts = queries_per_request(key=key, public_id=ids[0])
    total = DiagnosisSession.objects.filter(owner=user).count()
    print(f"sessions for {USER}: {total}; database: {connection.vendor}")
    print("queries per request:", ", ".join(f"{k}: {v}" for k, v in counts.items()))
    list_counts = [v for k, v in counts.items() if k.startswith("list")]
    print("constant in page size:", "yes" if len(set(list_counts)) == 1 else "NO")

    process, base = gunicorn_start(workers=args.workers, threads=args.threads)
    try:
        print(
            f"gunicorn: {args.workers} workers × {args.threads} threads; "
            f"{args.clients} concurrent clients, {args.seconds:.0f}s per endpoint"
        )
        scenarios = {
            "GET /api/v1/diagnoses/{id}": [f"/api/v1/diagnoses/{i}" for i in ids],
            "GET /api/v1/diagnoses (page 20)": ["/api/v1/diagnoses"],
            "GET /api/v1/diagnoses?status=completed&decision=PASS": [
                "/api/v1/diagnoses?status=completed&decision=PASS"
            ],
        }
        # warm every worker's connection and imports
        auth = {"headers": {"Authorization": f"Bearer {key}"}}
        http_load(
            base=base,
            paths=scenarios["GET /api/v1/diagnoses (page 20)"],
            clients=args.clients,
            seconds=2,
            **auth,
        )
        print(f"{'endpoint':58} {'req':>7} {'err':>4} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
        for name, paths in scenarios.items():
            r = http_load(
                base=base, paths=paths, clients=args.clients, seconds=args.seconds, **auth
            )
            print(
                f"{name:58} {r['requests']:>7} {r['errors']:>4} {r['rps']:>8.1f} "
                f"{r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f}"
            )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)


if __name__ == "__main__":
    main()
