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
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._django import django_setup  # noqa: E402
from bench._http import gunicorn_start, http_load  # noqa: E402

django_setup(default_db="rootproof_webbench")

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
        cookies = {settings.SESSION_COOKIE_NAME: cookie}
        http_load(  # warm every worker's connection, imports and templates
            base=base,
            paths=[first_path],
            clients=args.clients,
            seconds=3,
            cookies=cookies,
            headers=first_headers,
        )
        print(f"{'url':<44} {'p50 ms':>8} {'p95 ms':>8} {'req/s':>8} {'errors':>7}")
        for name, (path, headers) in scenarios.items():
            result = http_load(
                base=base,
                paths=[path],
                clients=args.clients,
                seconds=args.seconds,
                cookies=cookies,
                headers=headers,
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
