"""Benchmark: tool_trace_summary size (tokens) as the raw tool output grows 10 KB → 100 MB.

    .venv/bin/python bench/trace_summary.py

Each step stores a session of real-looking invocations (query_logs, query_metrics,
lookup_knowledge) whose raw output and summary grow with the step, then builds the
Verifier's trace summary. The token count must stay flat (under the budget).
Uses DATABASE_URL if set, else a throwaway SQLite file under /tmp.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "sqlite:////tmp/rootproof-bench-trace.sqlite3")

from bench._django import django_setup  # noqa: E402

django_setup(default_db="rootproof_bench_trace")

from django.conf import settings  # noqa: E402
from django.utils import timezone  # noqa: E402

from diagnosis.flow.trace_summary import trace_summary_build  # noqa: E402
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation  # noqa: E402
from diagnosis.tokens import estimate_tokens  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)


def _template_line(i: int) -> str:
    return (
        f'payment-service ERROR template "HikariPool-<NUM> - Connection is not available '
        f'#{i}": {1000 - i % 900} in window, 0 in baseline, NEW (absent from the baseline), '
        "surge 2490x, first seen 2026-03-02T10:16:53Z, last seen 2026-03-02T10:39:58Z"
    )


def _series_line(i: int) -> str:
    return (
        f'payment-service hikaricp_connections_pending{{pod="p-{i}"}}: window max 98 at '
        "2026-03-02T10:39:00Z, window min 0, window mean 41.12, baseline mean 0.008, "
        "ratio 4934.6x, change point 2026-03-02T10:17:00Z, anomaly score 1000 (up)"
    )


def _invocations(size: int) -> list[dict]:
    """Raw outputs of ``size`` characters with as many summary lines as fit in them."""
    logs_lines = [_template_line(i) for i in range(max(size // 240, 1))]
    metric_lines = [_series_line(i) for i in range(max(size // 220, 1))]
    chunk_text = "连接池耗尽时先看慢查询与长事务。" * max(size // 16, 1)
    return [
        {
            "tool_name": "query_logs",
            "arguments": {"service": "payment-service", "level": "ERROR"},
            "output": ("\n".join(logs_lines))[:size],
            "summary": {
                "total_window": 1998,
                "total_baseline": 24,
                "templates": [{"line": line, "samples": []} for line in logs_lines],
                "omitted": 0,
            },
        },
        {
            "tool_name": "query_metrics",
            "arguments": {"service": "payment-service"},
            "output": ("\n".join(metric_lines))[:size],
            "summary": {"series": [{"line": line} for line in metric_lines], "omitted": 0},
        },
        {
            "tool_name": "lookup_knowledge",
            "arguments": {"query": "连接池 超时"},
            "output": chunk_text[:size],
            "summary": {
                "query": "连接池 超时",
                "chunks": [
                    {
                        "chunk_id": f"kb-x-{i}",
                        "document_title": "手册",
                        "heading": "处理",
                        "text": "",
                    }
                    for i in range(max(size // 50_000, 1))
                ],
            },
        },
    ]


def main() -> None:
    environment, _ = Environment.objects.get_or_create(
        slug="bench-trace", defaults={"name": "bench", "kind": "scenario"}
    )
    budget = settings.TRACE_SUMMARY_TOKEN_BUDGET
    print(f"TRACE_SUMMARY_TOKEN_BUDGET = {budget}; 6 invocations per session (2 attempts)")
    print(f"{'raw output':>12} {'raw tokens/call':>16} {'summary tokens':>15} {'build ms':>9}")
    for size in SIZES:
        session = DiagnosisSession.objects.create(environment=environment, original_query="bench")
        sequence = 0
        for attempt in (1, 2):
            for spec in _invocations(size):
                sequence += 1
                ToolInvocation.objects.create(
                    session=session,
                    attempt=attempt,
                    sequence=sequence,
                    trace_ref=f"trace-{sequence}",
                    tool_name=spec["tool_name"],
                    arguments=spec["arguments"],
                    status="ok",
                    output=spec["output"],
                    output_size=len(spec["output"]),
                    summary=spec["summary"],
                    started_at=timezone.now(),
                )
        raw_tokens = estimate_tokens(_invocations(size)[0]["output"])
        started = time.perf_counter()
        entries = trace_summary_build(session=session)
        elapsed = (time.perf_counter() - started) * 1000
        tokens = estimate_tokens(json.dumps(entries, ensure_ascii=False))
        label = f"{size / 1_000_000:g} MB" if size >= 1_000_000 else f"{size // 1000} KB"
        print(f"{label:>12} {raw_tokens:>16} {tokens:>15} {elapsed:>9.0f}")
        assert tokens <= budget, "trace summary exceeded its budget"
        session.delete()


if __name__ == "__main__":
    main()
