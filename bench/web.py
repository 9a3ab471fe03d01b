"""Chat pages under load: the conversation page and the progress partial, gunicorn + PostgreSQL.

Seeds one conversation of answered questions (claims, bindings, tool outputs, metric
summaries; the latest answer shows its evidence inline) and one running session with
progress events, logs a user in, starts gunicorn on loopback and drives each URL with
20 concurrent clients. Prints p50/p95 latency and requests per second per URL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_webbench \
        .venv/bin/python bench/web.py
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._django import django_setup  # noqa: E402

django_setup(default_db="rootproof_webbench")

import httpx  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import (  # noqa: E402
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
)
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from chat.models import Conversation  # noqa: E402
from tests.chat.factories import environment_make, session_make  # noqa: E402

USER = "bench-web"


@transaction.atomic
def seed(*, turns: int):
    """A fresh conversation of ``turns`` answered questions and one running session."""
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=USER)
    Conversation.objects.filter(owner=user).delete()
    environment = environment_make(slug="bench-web")
    conversation = Conversation.objects.create(
        owner=user, environment=environment, title="支付超时 (bench)"
    )
    start = timezone.now() - timedelta(hours=3)
    for index in range(turns):
        session_make(
            conversation=conversation,
            question=f"payment-service 超时，第 {index + 1} 次追问",
            created_at=start + timedelta(minutes=index),
        )
    watching = Conversation.objects.create(owner=user, environment=environment, title="running")
    running = session_make(conversation=watching, status="running", question="还在跑")
    return user, conversation, running


def session_cookie(user) -> str:
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return store.session_key


def queries_per_request(*, user, paths: dict[str, tuple[str, dict]]) -> dict[str, int]:
    client = Client()
    client.force_login(user)
    counts = {}
    for name, (path, headers) in paths.items():
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(path, headers=headers)
        assert response.status_code == 200, (path, response.status_code)
        counts[name] = len(ctx.captured_queries)
    return counts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gunicorn_start(*, workers: int, threads: int) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, DEBUG="0", LOG_LEVEL="WARNING")
    process = subprocess.Popen(
        [
            str(ROOT / ".venv" / "bin" / "gunicorn"),
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/healthz", timeout=2)
            return process, base
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit("gunicorn did not start")


def load(*, base: str, cookie: str, path: str, headers: dict, clients: int, seconds: float):
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client_loop(_: int) -> None:
        nonlocal errors
        mine: list[float] = []
        bad = 0
        cookies = {settings.SESSION_COOKIE_NAME: cookie}
        with httpx.Client(base_url=base, cookies=cookies, headers=headers) as http:
            while time.monotonic() < stop_at:
                t0 = time.perf_counter()
                response = http.get(path, timeout=30)
                mine.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    bad += 1
        with lock:
            latencies.extend(mine)
            errors += bad

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client_loop, range(clients)))
    elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[max(0, int(len(latencies) * 0.95) - 1)] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="answered questions on the page")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) * 2 + 1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    user, conversation, running = seed(turns=args.turns)
    htmx = {"HX-Request": "true"}
    scenarios = {
        f"GET conversation page ({args.turns} answers)": (
            reverse("chat:conversation_detail", args=[conversation.pk]),
            {},
        ),
        "GET progress partial (running, HTMX)": (
            reverse("chat:session_progress", args=[running.public_id]),
            htmx,
        ),
    }
    counts = queries_per_request(user=user, paths=scenarios)
    print(f"database: {connection.vendor}; {args.turns} answered questions in the conversation")
    print("queries per request:", ", ".join(f"{k}: {v}" for k, v in counts.items()))
    cookie = session_cookie(user)

    process, base = gunicorn_start(workers=args.workers, threads=args.threads)
    try:
        print(
            f"gunicorn: {args.workers} workers × {args.threads} threads; "
            f"{args.clients} concurrent clients, {args.seconds:.0f}s per URL"
        )
        first_path, first_headers = next(iter(scenarios.values()))
        load(  # warm every worker's connection, imports and templates
            base=base,
            cookie=cookie,
            path=first_path,
            headers=first_headers,
            clients=args.clients,
            seconds=3,
        )
        print(f"{'url':<44} {'p50 ms':>8} {'p95 ms':>8} {'req/s':>8} {'errors':>7}")
        for name, (path, headers) in scenarios.items():
            result = load(
                base=base,
                cookie=cookie,
                path=path,
                headers=headers,
                clients=args.clients,
                seconds=args.seconds,
            )
            print(
                f"{name:<44} {result['p50_ms']:>8.1f} {result['p95_ms']:>8.1f} "
                f"{result['rps']:>8.1f} {result['errors']:>7}"
            )
    finally:
        process.terminate()
        process.wait(timeout=15)


if __name__ == "__main__":
    main()
