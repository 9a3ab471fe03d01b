"""Flow throughput against the loopback OpenAI-compatible server with a fixed model latency.

Reports sessions per minute with 1, 2 and 4 worker processes against the ideal
(workers × 60 / (model calls per session × latency)), the non-model overhead per
session (latency 0), and model calls and tokens per session; each line ends with the
machine's 1-minute load average when it was measured (the figures move with it).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/13 .venv/bin/python bench/flow.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")

from bench._django import django_setup

django_setup(default_db="rootproof_bench")

from django.db.models import Sum  # noqa: E402

from bench._mini_pool import mini_pool_owner_environment  # noqa: E402
from config.celery import app  # noqa: E402
from diagnosis.models import DiagnosisSession, LLMCall  # noqa: E402
from diagnosis.services import diagnosis_submit  # noqa: E402
from tests.support.openai_roles import role_responder  # noqa: E402
from tests.support.openai_server import openai_server_running  # noqa: E402
from tests.support.workers import wait_until, worker_env, worker_kill, worker_start  # noqa: E402


def _run(*, workers: int, sessions: int, latency: float, environment, owner) -> dict:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    with openai_server_running(responder=role_responder, latency=latency) as server:
        env = worker_env(
            queue=queue,
            extra={"LLM_PROVIDER": "openai", "LLM_BASE_URL": server.base_url, "LLM_API_KEY": "k"},
        )
        procs = [worker_start(env=env, name=f"b{i}") for i in range(workers)]
        try:
            # Warm up: one session so worker start-up is not measured.
            warm = diagnosis_submit(question="warm-up", environment=environment, owner=owner)
            wait_until(
                lambda: DiagnosisSession.objects.filter(pk=warm.pk, status="completed").exists(),
                timeout=120,
            )
            started = time.monotonic()
            ids = [
                diagnosis_submit(
                    question=f"payment-service 超时 #{n}", environment=environment, owner=owner
                ).pk
                for n in range(sessions)
            ]
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
        finally:
            for proc in procs:
                worker_kill(proc)
    rows = DiagnosisSession.objects.filter(pk__in=ids)
    completed = rows.filter(status="completed").count()
    calls = LLMCall.objects.filter(session__in=ids)
    tokens = calls.aggregate(i=Sum("tokens_in"), o=Sum("tokens_out"))
    per_session_calls = calls.count() / len(ids)
    durations = [s.duration_seconds for s in rows if s.duration_seconds is not None]
    return {
        "workers": workers,
        "sessions": len(ids),
        "completed": completed,
        "finished": finished,
        "elapsed_s": round(elapsed, 2),
        "sessions_per_min": round(len(ids) * 60 / elapsed, 1),
        "calls_per_session": round(per_session_calls, 2),
        "tokens_per_session": round(((tokens["i"] or 0) + (tokens["o"] or 0)) / len(ids)),
        "mean_session_s": round(statistics.mean(durations), 3) if durations else None,
    }


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--sessions-per-worker", type=int, default=6)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    owner, environment = mini_pool_owner_environment("bench")
    print(f"model latency {args.latency}s per call")
    print("workers  sessions  sessions/min  ideal/min  ratio  calls/session  tokens/session  load")
    for workers in [int(w) for w in args.workers.split(",")]:
        result = _run(
            workers=workers,
            sessions=workers * args.sessions_per_worker,
            latency=args.latency,
            environment=environment,
            owner=owner,
        )
        ideal = workers * 60 / (result["calls_per_session"] * args.latency)
        print(
            f"{workers:>7}  {result['sessions']:>8}  {result['sessions_per_min']:>12}  "
            f"{ideal:>9.1f}  {result['sessions_per_min'] / ideal:>5.2f}  "
            f"{result['calls_per_session']:>13}  {result['tokens_per_session']:>14}  "
            f"{_load()}"
        )
    overhead = _run(workers=1, sessions=10, latency=0.0, environment=environment, owner=owner)
    print(
        f"non-model overhead per session (latency 0, 1 worker): "
        f"{overhead['elapsed_s'] / overhead['sessions']:.3f}s wall, "
        f"{overhead['mean_session_s']}s inside the worker (load {_load()})"
    )


if __name__ == "__main__":
    main()
