"""Load: 200 diagnoses from 50 concurrent API clients, gunicorn + 2 Celery workers.

Stack: gunicorn on loopback, PostgreSQL, Redis as broker and shared cache, two Celery
worker processes, the `openai` provider against the loopback OpenAI-compatible server
with a small model latency. Each client POSTs /api/v1/diagnoses with its own
Idempotency-Key and retries the same request on connection errors, timeouts, 429 and
5xx. A share of first attempts is cut short on purpose (a read timeout shorter than
the request), so retries of requests the server already accepted really happen.

Every submission must end exactly once as a completed session: sessions are counted
by idempotency key (none lost, none duplicated). Reports throughput (completed
sessions per minute, first submission to last completion) and p50/p95/max time from
submission to completion.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_load \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/10 .venv/bin/python bench/load.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/10")
os.environ.setdefault("CACHE_URL", os.environ["CELERY_BROKER_URL"].rsplit("/", 1)[0] + "/9")
# 50 clients share one key: the benchmark measures the flow, not the API's rate limit.
os.environ["API_RATE_LIMIT"] = "100000/min"

from bench._django import django_setup  # noqa: E402
from bench._http import gunicorn_start  # noqa: E402

django_setup(default_db="rootproof_load")

import httpx  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db.models import Count  # noqa: E402

from diagnosis.api.services import api_key_create  # noqa: E402
from diagnosis.models import DiagnosisSession, Environment  # noqa: E402
from tests.support.openai_roles import role_responder  # noqa: E402
from tests.support.openai_server import openai_server_running  # noqa: E402
from tests.support.workers import wait_until, worker_env, worker_kill, worker_start  # noqa: E402

PACK = ROOT / "tests" / "flow" / "fixtures" / "mini-pool"
RETRYABLE = (httpx.TransportError,)  # connect/read/write errors and timeouts


@dataclass
class Submission:
    key: str
    submitted_at: float = 0.0  # wall clock of the first attempt
    attempts: int = 0
    statuses: list[int | str] = field(default_factory=list)
    public_id: str = ""
    replayed: bool = False  # the server answered from an earlier attempt with this key


def submit(
    *, client: httpx.Client, sub: Submission, cut_short: bool, max_attempts: int, question: str
) -> Submission:
    body = {"question": question, "environment": "load-mini-pool"}
    sub.submitted_at = time.time()
    for attempt in range(1, max_attempts + 1):
        sub.attempts = attempt
        # The first attempt of some submissions gives up before the answer arrives.
        timeout = 0.005 if cut_short and attempt == 1 else 30.0
        try:
            response = client.post(
                "/api/v1/diagnoses",
                json=body,
                headers={"Idempotency-Key": sub.key},
                timeout=timeout,
            )
        except RETRYABLE as exc:
            sub.statuses.append(type(exc).__name__)
            time.sleep(min(0.1 * 2**attempt, 2.0))
            continue
        sub.statuses.append(response.status_code)
        if response.status_code == 202:
            sub.public_id = response.json()["id"]
            sub.replayed = response.headers.get("Idempotent-Replayed") == "true"
            return sub
        if response.status_code == 429 or response.status_code >= 500:
            time.sleep(min(0.1 * 2**attempt, 2.0))
            continue
        return sub  # a 4xx other than 429 is not worth retrying
    return sub


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--diagnoses", type=int, default=200)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--web-threads", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--cut-short", type=float, default=0.1, help="share of first attempts")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args()


def _api_key() -> str:
    """The load user's key, with the mini-pool environment its diagnoses name."""
    owner, _ = get_user_model().objects.get_or_create(username="load")
    Environment.objects.update_or_create(
        slug="load-mini-pool",
        defaults={
            "name": "load",
            "pack_path": str(PACK),
            "services": ["payment-service", "order-service", "mysql"],
        },
    )
    return api_key_create(owner=owner, name="load").key


def _submit_all(
    *, base: str, key: str, args: argparse.Namespace, subs: list[Submission], cut: set[int]
) -> tuple[float, bool]:
    """Every submission from ``args.clients`` threads, then the wait for every session to
    end: (seconds the submissions took, whether all ended within ``args.timeout``)."""
    lock = threading.Lock()
    local = threading.local()
    clients: list[httpx.Client] = []

    def client_for_thread() -> httpx.Client:
        """One connection pool per client thread, like 50 separate integrations."""
        client = getattr(local, "client", None)
        if client is None:
            client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"})
            local.client = client
            with lock:
                clients.append(client)
        return client

    def work(index: int) -> Submission:
        return submit(
            client=client_for_thread(),
            sub=subs[index],
            cut_short=index in cut,
            max_attempts=8,
            question=f"payment-service 为什么超时？#{index}",
        )

    try:
        started = time.time()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            list(pool.map(work, range(len(subs))))
        submitted_in = time.time() - started
        keys = [s.key for s in subs]
        finished = wait_until(
            lambda: (
                DiagnosisSession.objects.filter(idempotency_key__in=keys)
                .exclude(status__in=["queued", "running"])
                .count()
                >= len(keys)
            ),
            timeout=args.timeout,
            interval=0.25,
        )
    finally:
        for client in clients:
            client.close()
    return submitted_in, finished


def _run_stack(
    *, key: str, queue: str, args: argparse.Namespace, subs: list[Submission], cut: set[int]
) -> tuple[float, bool]:
    """The model server, Celery workers and gunicorn up for the submissions, then down."""
    with openai_server_running(responder=role_responder, latency=args.latency) as server:
        extra = {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": server.base_url,
            "LLM_API_KEY": "k",
            "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "API_RATE_LIMIT": os.environ["API_RATE_LIMIT"],
            "CACHE_URL": os.environ["CACHE_URL"],
        }
        env = worker_env(queue=queue, extra=extra)
        workers = [worker_start(env=env, name=f"load{i}") for i in range(args.workers)]
        try:
            web, base = gunicorn_start(env=env, workers=args.web_workers, threads=args.web_threads)
        except BaseException:
            for proc in workers:
                worker_kill(proc)
            raise
        try:
            return _submit_all(base=base, key=key, args=args, subs=subs, cut=cut)
        finally:
            worker_kill(web)
            for proc in workers:
                worker_kill(proc)


def _figures(
    *,
    args: argparse.Namespace,
    subs: list[Submission],
    cut: set[int],
    run: str,
    submitted_in: float,
    finished: bool,
) -> dict[str, Any]:
    """What the sessions in the database say about the submissions."""
    rows = DiagnosisSession.objects.filter(idempotency_key__in=[s.key for s in subs])
    per_key = Counter(dict(rows.values_list("idempotency_key").annotate(n=Count("id"))))
    by_key = {s.idempotency_key: s for s in rows.filter(status="completed")}
    lost = [s.key for s in subs if per_key[s.key] == 0]
    duplicated = [k for k, n in per_key.items() if n > 1]
    completed = [s for s in subs if s.key in by_key]
    mismatched = [s.key for s in completed if str(by_key[s.key].public_id) != s.public_id]
    latencies = sorted(by_key[s.key].finished_at.timestamp() - s.submitted_at for s in completed)
    run_times = [
        (by_key[s.key].finished_at - by_key[s.key].started_at).total_seconds() for s in completed
    ]
    first = min(s.submitted_at for s in subs)
    last = max((by_key[s.key].finished_at.timestamp() for s in completed), default=first)
    statuses = Counter(str(code) for s in subs for code in s.statuses)
    return {
        "diagnoses": args.diagnoses,
        "clients": args.clients,
        "celery_workers": args.workers,
        "gunicorn": f"{args.web_workers} workers x {args.web_threads} threads",
        "model_latency_s": args.latency,
        "first_attempts_cut_short": len(cut),
        "http_attempts": sum(s.attempts for s in subs),
        "retried_submissions": sum(s.attempts > 1 for s in subs),
        "answered_as_replay": sum(s.replayed for s in subs),
        "answers": dict(sorted(statuses.items())),
        "sessions_created": sum(per_key.values()),
        "completed": len(completed),
        "not_completed": rows.exclude(status="completed").count(),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "id_mismatches": len(mismatched),
        "all_finished": finished,
        "submission_phase_s": round(submitted_in, 1),
        "wall_s": round(last - first, 1),
        "throughput_per_min": round(len(completed) * 60 / (last - first), 1) if completed else 0,
        "latency_p50_s": round(statistics.median(latencies), 2) if latencies else None,
        "latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2)
        if latencies
        else None,
        "latency_max_s": round(latencies[-1], 2) if latencies else None,
        "run_in_worker_p50_s": round(statistics.median(run_times), 2) if run_times else None,
        "run": run,
        "at": datetime.now().isoformat(timespec="seconds"),
    }


def main() -> None:
    args = _arguments()
    rng = random.Random(args.seed)
    key = _api_key()
    run = uuid.uuid4().hex[:8]
    subs = [Submission(key=f"load-{run}-{n}") for n in range(args.diagnoses)]
    cut = set(rng.sample(range(args.diagnoses), int(args.diagnoses * args.cut_short)))
    submitted_in, finished = _run_stack(key=key, queue=f"load-{run}", args=args, subs=subs, cut=cut)
    figures = _figures(
        args=args, subs=subs, cut=cut, run=run, submitted_in=submitted_in, finished=finished
    )
    width = max(len(k) for k in figures)
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, ensure_ascii=False))
    ok = (
        not figures["lost"]
        and not figures["duplicated"]
        and not figures["id_mismatches"]
        and figures["completed"] == args.diagnoses
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
