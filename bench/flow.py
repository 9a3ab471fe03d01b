"""Flow throughput against the loopback OpenAI-compatible server with a fixed model latency.

Reports sessions per minute with 1, 2 and 4 worker processes against the ideal
(workers × 60 / (model calls per session × latency)), the non-model overhead per
session (latency 0), and model calls, tokens and tool calls per session; each line ends
with the machine's 1-minute load average when it was measured (the figures move with it).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/13 .venv/bin/python bench/flow.py

The Executor calls ``query_logs`` once; ``--metrics-calls N`` makes it call
``query_metrics`` N times as well, in the same turn (the sessions' model calls stay 5).

``--prometheus`` (N defaults to 3 then) measures the same with live metrics: a real
Prometheus (tests/support/prometheus.py) is started on the mini-pool pack's .om files and
the sessions run in a live environment ``bench-mini-pool-prometheus`` pointing at it (a
live environment reads metrics from Prometheus only, and logs from Loki only: no Loki is
installed, so its logs come from the loopback stub in tests/support/observability_stubs.py,
made-up lines, one new connection per call). The sessions get the pack's ``now`` and
window, as the files environment gives them. Prometheus' own request count is printed
against the query_metrics calls, and Prometheus is stopped at the end, also on an error or
Ctrl-C. ``--per-call-client`` puts the code before the shared HTTP client back inside the
workers (``httpx.get`` per call; bench/per_call_client/sitecustomize.py), for comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")

from bench._django import django_setup

django_setup(default_db="rootproof_bench")

from django.db.models import Avg, Count, Q, Sum  # noqa: E402

from bench._mini_pool import (  # noqa: E402
    PACK,
    mini_pool_live_environment,
    mini_pool_owner_environment,
)
from config.celery import app  # noqa: E402
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation  # noqa: E402
from diagnosis.services import diagnosis_submit, environment_context  # noqa: E402
from tests.support.observability_stubs import observability_stub_running  # noqa: E402
from tests.support.openai_roles import request_role, role_responder  # noqa: E402
from tests.support.openai_server import Reply, openai_server_running  # noqa: E402
from tests.support.prometheus import own_metric, prometheus_running  # noqa: E402
from tests.support.workers import wait_until, worker_env, worker_kill, worker_start  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PER_CALL_CLIENT = Path(__file__).resolve().parent / "per_call_client"

# What an Executor looking at a pool exhaustion would ask, cycled: one service, one
# metric, the fleet sweep, the database.
METRICS_CALLS: tuple[dict[str, Any], ...] = (
    {"service": "payment-service"},
    {"metric": "hikaricp_connections_active"},
    {},
    {"service": "mysql"},
)

QUERY_RANGE = 'prometheus_http_requests_total{code="200",handler="/api/v1/query_range"}'
ACCEPTED = 'net_conntrack_listener_conn_accepted_total{listener_name="http"}'


@dataclass
class Bench:
    """Where and how the sessions run: the same for every measurement of one invocation."""

    owner: Any
    environment: Any
    context: dict[str, Any]
    responder: Callable[[dict[str, Any]], Reply]
    worker_extra: dict[str, str] = field(default_factory=dict)
    prometheus_url: str = ""


def _responder(metrics_calls: int) -> Callable[[dict[str, Any]], Reply]:
    """role_responder, its Executor also calling query_metrics ``metrics_calls`` times in
    its first turn (after query_logs, whose output it still cites)."""
    if not metrics_calls:
        return role_responder
    extra = [("query_metrics", METRICS_CALLS[i % len(METRICS_CALLS)]) for i in range(metrics_calls)]

    def respond(body: dict[str, Any]) -> Reply:
        reply = role_responder(body)
        if request_role(body) == "executor" and reply.tool_calls:
            return Reply.tools(*reply.tool_calls, *extra)
        return reply

    return respond


def _prometheus_counts(bench: Bench) -> tuple[float, float]:
    """Prometheus' own count of range queries answered and connections accepted."""
    if not bench.prometheus_url:
        return 0.0, 0.0
    return own_metric(bench.prometheus_url, QUERY_RANGE), own_metric(bench.prometheus_url, ACCEPTED)


def _submit(bench: Bench, question: str) -> int:
    return diagnosis_submit(
        question=question,
        environment=bench.environment,
        owner=bench.owner,
        context=dict(bench.context),
    ).pk


def _timed_sessions(bench: Bench, sessions: int) -> dict[str, Any]:
    """One warm-up session (worker start-up is not measured), then ``sessions`` timed."""
    warm = _submit(bench, "warm-up")
    wait_until(
        lambda: DiagnosisSession.objects.filter(pk=warm, status="completed").exists(),
        timeout=120,
    )
    queries, accepted = _prometheus_counts(bench)
    started = time.monotonic()
    ids = [_submit(bench, f"payment-service 超时 #{n}") for n in range(sessions)]
    finished = wait_until(
        lambda: (
            DiagnosisSession.objects.filter(pk__in=ids)
            .exclude(status__in=["queued", "running"])
            .count()
            == len(ids)
        ),
        timeout=600,
        interval=0.05,
    )
    elapsed = time.monotonic() - started
    queries_after, accepted_after = _prometheus_counts(bench)
    return {
        "ids": ids,
        "finished": finished,
        "elapsed": elapsed,
        "prometheus_queries": queries_after - queries,
        # Less the two later reads' own connections (each read is a new one).
        "prometheus_connections": accepted_after - accepted - 2,
    }


def _run(*, bench: Bench, workers: int, sessions: int, latency: float) -> dict[str, Any]:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    # keep_alive: the workers reuse one connection to the model, as with a real model server
    with openai_server_running(
        responder=bench.responder, latency=latency, keep_alive=True
    ) as server:
        env = worker_env(
            queue=queue,
            extra={
                "LLM_PROVIDER": "openai",
                "LLM_BASE_URL": server.base_url,
                "LLM_API_KEY": "k",
                **bench.worker_extra,
            },
        )
        procs = [worker_start(env=env, name=f"b{i}") for i in range(workers)]
        try:
            timed = _timed_sessions(bench, sessions)
        finally:
            for proc in procs:
                worker_kill(proc)
    return _summary(workers=workers, timed=timed)


def _summary(*, workers: int, timed: dict[str, Any]) -> dict[str, Any]:
    ids, elapsed = timed["ids"], timed["elapsed"]
    rows = DiagnosisSession.objects.filter(pk__in=ids)
    calls = LLMCall.objects.filter(session__in=ids)
    tokens = calls.aggregate(i=Sum("tokens_in"), o=Sum("tokens_out"))
    durations = [s.duration_seconds for s in rows if s.duration_seconds is not None]
    tools = list(
        ToolInvocation.objects.filter(session__in=ids)
        .values("tool_name")
        .annotate(
            n=Count("id"),
            ms=Avg("duration_ms"),
            ok=Count("id", filter=Q(status=ToolInvocation.Status.OK)),
        )
        .order_by("tool_name")
    )
    return {
        "workers": workers,
        "sessions": len(ids),
        "completed": rows.filter(status="completed").count(),
        "finished": timed["finished"],
        "elapsed_s": round(elapsed, 2),
        "sessions_per_min": round(len(ids) * 60 / elapsed, 1),
        "calls_per_session": round(calls.count() / len(ids), 2),
        "tokens_per_session": round(((tokens["i"] or 0) + (tokens["o"] or 0)) / len(ids)),
        "mean_session_s": round(statistics.mean(durations), 3) if durations else None,
        "tools": tools,
        "prometheus_queries": round(timed["prometheus_queries"]),
        "prometheus_connections": round(timed["prometheus_connections"]),
    }


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _tools_line(result: dict[str, Any], bench: Bench) -> str:
    """Per tool: calls a session, how many were ok, their mean time; with Prometheus, the
    range queries it answered and the connections it accepted in the same span."""
    sessions = result["sessions"]
    tools = ", ".join(
        f"{t['tool_name']} {t['n'] / sessions:g} a session ({t['ok']}/{t['n']} ok, "
        f"{t['ms']:.1f} ms each)"
        for t in result["tools"]
    )
    line = f"    {result['completed']}/{sessions} completed; {tools}"
    if bench.prometheus_url:
        line += (
            f"; Prometheus answered {result['prometheus_queries']} range queries "
            f"over {result['prometheus_connections']} new connections"
        )
    return line


def _measure(args: argparse.Namespace, bench: Bench) -> None:
    counts = [int(w) for w in args.workers.split(",") if w]
    if counts:
        print(f"model latency {args.latency}s per call")
        print(
            "workers  sessions  sessions/min  ideal/min  ratio  calls/session  tokens/session  load"
        )
    for workers in counts:
        result = _run(
            bench=bench,
            workers=workers,
            sessions=workers * args.sessions_per_worker,
            latency=args.latency,
        )
        ideal = workers * 60 / (result["calls_per_session"] * args.latency)
        print(
            f"{workers:>7}  {result['sessions']:>8}  {result['sessions_per_min']:>12}  "
            f"{ideal:>9.1f}  {result['sessions_per_min'] / ideal:>5.2f}  "
            f"{result['calls_per_session']:>13}  {result['tokens_per_session']:>14}  "
            f"{_load()}"
        )
        print(_tools_line(result, bench))
    overhead = _run(bench=bench, workers=1, sessions=args.overhead_sessions, latency=0.0)
    print(
        f"non-model overhead per session (latency 0, 1 worker): "
        f"{overhead['elapsed_s'] / overhead['sessions']:.3f}s wall, "
        f"{overhead['mean_session_s']}s inside the worker (load {_load()})"
    )
    print(_tools_line(overhead, bench))


@contextmanager
def _bench(args: argparse.Namespace) -> Iterator[Bench]:
    """The files environment, or a live one on a Prometheus (and the Loki stub) that is
    stopped when the block ends, however it ends."""
    owner, files_environment = mini_pool_owner_environment("bench")
    # The pack's now and window: what the files environment's sessions get by themselves.
    context = environment_context(environment=files_environment)
    responder = _responder(args.metrics_calls)
    extra = {"PYTHONPATH": f"{PER_CALL_CLIENT}{os.pathsep}{ROOT}"} if args.per_call_client else {}
    if not args.prometheus:
        yield Bench(owner, files_environment, context, responder, extra)
        return
    with (
        tempfile.TemporaryDirectory(prefix="rootproof-flow-prometheus-") as work,
        prometheus_running(PACK, Path(work) / "prometheus") as prometheus,
        observability_stub_running() as loki,
    ):
        environment = mini_pool_live_environment(
            "bench", prometheus_url=prometheus.url, loki_url=loki.url
        )
        yield Bench(owner, environment, context, responder, extra, prometheus.url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--sessions-per-worker", type=int, default=6)
    parser.add_argument("--workers", default="1,2,4", help='"" measures the overhead only')
    parser.add_argument("--overhead-sessions", type=int, default=10)
    parser.add_argument("--prometheus", action="store_true", help="metrics from a real Prometheus")
    parser.add_argument("--metrics-calls", type=int, help="query_metrics calls a session")
    parser.add_argument("--per-call-client", action="store_true", help="httpx.get per call")
    args = parser.parse_args()
    if args.metrics_calls is None:
        args.metrics_calls = 3 if args.prometheus else 0
    with _bench(args) as bench:
        print(
            f"environment {bench.environment.slug}; a session's Executor calls query_logs "
            f"once and query_metrics {args.metrics_calls} times"
            + ("; workers use httpx.get per call" if args.per_call_client else "")
        )
        _measure(args, bench)


if __name__ == "__main__":
    main()
