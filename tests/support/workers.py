"""Real Celery worker processes for tests and benchmarks (Redis/RabbitMQ + PostgreSQL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def real_stack_available() -> bool:
    return connection.vendor == "postgresql" and not settings.CELERY_BROKER_URL.startswith(
        "filesystem://"
    )


def worker_env(*, queue: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    db = connection.settings_dict
    url = (
        f"postgres://{db['USER'] or 'postgres'}"
        f"{':' + db['PASSWORD'] if db.get('PASSWORD') else ''}"
        f"@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": "worker-test-secret",
            "DEBUG": "false",
            "DATABASE_URL": url,
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "CELERY_QUEUE": queue,
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update(extra or {})
    return env


def worker_start(
    *, env: dict[str, str], concurrency: int = 1, name: str = "w1"
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--loglevel",
            "WARNING",
            "--concurrency",
            str(concurrency),
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"{name}@%h",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def worker_kill(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    process.wait(timeout=30)


def wait_until(predicate: Callable[[], bool], *, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
