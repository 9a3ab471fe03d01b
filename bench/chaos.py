"""Worker crashes: SIGKILL a Celery worker in the middle of sessions, again and again.

Two worker processes on PostgreSQL and Redis run sessions through the `openai`
provider against the loopback server, whose latency makes a session take a few
seconds. Each round submits a few sessions, waits until one is mid-flow, SIGKILLs
the process group of the worker running it and starts a replacement. Redis gives
the unacknowledged task to another worker after CELERY_VISIBILITY_TIMEOUT seconds;
that worker takes the session over (its runner is dead) as a new attempt. At the
end the reaper runs with its clock a day ahead, for whatever redelivery missed.

Reports sessions submitted, completed, failed (and whether with the safe answer),
still running (must be 0), restarts, attempts with duplicated invocation rows (must
be 0), and how long the last orphaned session took to finish after the last kill.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_chaos \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/12 .venv/bin/python bench/chaos.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/12")

from bench._django import django_setup

django_setup(default_db="rootproof_chaos")

from django.utils import timezone  # noqa: E402

from bench._mini_pool import mini_pool_owner_environment  # noqa: E402
from config.celery import app  # noqa: E402
from diagnosis.models import DiagnosisSession, Environment  # noqa: E402
from diagnosis.services import diagnosis_submit, sessions_reap_stale  # noqa: E402
from tests.support.crashes import CrashReport, crash_report, sessions_mid_flow  # noqa: E402
from tests.support.openai_roles import role_responder  # noqa: E402
from tests.support.openai_server import openai_server_running  # noqa: E402
from tests.support.workers import wait_until, worker_env, worker_kill, worker_start  # noqa: E402


def _unfinished(ids: list[int]) -> int:
    return DiagnosisSession.objects.filter(pk__in=ids, status__in=["queued", "running"]).count()


def _wait_for_victim(
    ids: list[int], workers: list, *, killed: set[int], rng: random.Random, timeout: float
):
    """A mid-flow session and its worker; sessions not killed before come first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        candidates = sessions_mid_flow(session_ids=ids, workers=workers)
        fresh = [c for c in candidates if c[0].pk not in killed]
        if fresh or candidates:
            return rng.choice(fresh or candidates)
        time.sleep(0.1)
    return None


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-round", type=int, default=3, help="sessions submitted per kill")
    parser.add_argument("--latency", type=float, default=0.8, help="seconds per model call")
    parser.add_argument("--visibility-timeout", type=int, default=5)
    parser.add_argument("--pause", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args()


@dataclass
class Rounds:
    """What the kill rounds did: sessions submitted, kills, and the drain after the last."""

    ids: list[int] = field(default_factory=list)
    kills: int = 0
    killed: set[int] = field(default_factory=set)
    missed_rounds: int = 0
    drained: bool = False
    drain_seconds: float = 0.0


def _kill_rounds(
    *,
    args: argparse.Namespace,
    env: dict[str, str],
    owner: Any,
    environment: Environment,
    rng: random.Random,
) -> Rounds:
    """Submit, wait for a mid-flow session, SIGKILL its worker, start a replacement; then
    wait for redelivery to finish every session."""
    rounds = Rounds()
    workers = [worker_start(env=env, name=f"c{i}") for i in range(args.workers)]
    spawned = args.workers
    try:
        while rounds.kills < args.kills:
            for _ in range(args.per_round):
                rounds.ids.append(
                    diagnosis_submit(
                        question=f"payment-service 超时 #{len(rounds.ids)}",
                        environment=environment,
                        owner=owner,
                    ).pk
                )
            target = _wait_for_victim(
                rounds.ids, workers, killed=rounds.killed, rng=rng, timeout=60
            )
            if target is None:
                rounds.missed_rounds += 1
                continue
            time.sleep(rng.uniform(0.0, args.latency))  # vary where in the flow it dies
            session, victim = target
            worker_kill(victim)
            rounds.kills += 1
            rounds.killed.add(session.pk)
            workers.remove(victim)
            workers.append(worker_start(env=env, name=f"c{spawned}"))
            spawned += 1
            print(
                f"kill {rounds.kills:>2}: session {session.pk} at {session.stage}, "
                f"{_unfinished(rounds.ids)} unfinished",
                flush=True,
            )
            # Let work go on between kills, so sessions also finish while others die.
            time.sleep(rng.uniform(args.pause / 2, args.pause * 1.5))
        last_kill = time.monotonic()
        rounds.drained = wait_until(
            lambda: _unfinished(rounds.ids) == 0, timeout=args.drain_timeout
        )
        rounds.drain_seconds = time.monotonic() - last_kill
    finally:
        for proc in workers:
            worker_kill(proc)
    return rounds


def _figures(
    *, args: argparse.Namespace, rounds: Rounds, reaped: int, report: CrashReport, wall: float
) -> dict[str, Any]:
    return {
        "kills": rounds.kills,
        "distinct_sessions_killed": len(rounds.killed),
        "rounds_without_a_session_to_kill": rounds.missed_rounds,
        "workers": args.workers,
        "model_latency_s": args.latency,
        "visibility_timeout_s": args.visibility_timeout,
        "submitted": report.submitted,
        "completed": report.completed,
        "failed": report.failed,
        "failed_with_safe_answer": report.failed_with_safe_answer,
        "queued": report.queued,
        "still_running": report.still_running,
        "sessions_restarted": report.sessions_restarted,
        "restarts": report.restarts,
        "reaped_at_the_end": reaped,
        "attempts_with_duplicated_invocations": report.attempts_with_duplicates,
        "unsafe_answers": len(report.unsafe_answers),
        "drained_by_redelivery": rounds.drained,
        "drain_after_last_kill_s": round(rounds.drain_seconds, 1),
        "wall_s": round(wall, 1),
    }


def main() -> None:
    args = _arguments()
    rng = random.Random(args.seed)
    owner, environment = mini_pool_owner_environment("chaos")
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    started = time.monotonic()
    with openai_server_running(responder=role_responder, latency=args.latency) as server:
        env = worker_env(
            queue=queue,
            extra={
                "LLM_PROVIDER": "openai",
                "LLM_BASE_URL": server.base_url,
                "LLM_API_KEY": "k",
                "LLM_MAX_RETRIES": "0",
                "CELERY_VISIBILITY_TIMEOUT": str(args.visibility_timeout),
            },
        )
        rounds = _kill_rounds(args=args, env=env, owner=owner, environment=environment, rng=rng)
    reaped = sessions_reap_stale(now=timezone.now() + timedelta(days=1))
    report = crash_report(session_ids=rounds.ids)
    figures = _figures(
        args=args, rounds=rounds, reaped=reaped, report=report, wall=time.monotonic() - started
    )
    width = max(len(k) for k in figures)
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    ok = (
        report.still_running == 0
        and report.queued == 0
        and report.attempts_with_duplicates == 0
        and report.failed_with_safe_answer == report.failed
        and not report.unsafe_answers
    )
    if report.duplicated:
        print("duplicated:", report.duplicated)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
