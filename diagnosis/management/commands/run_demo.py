"""Start web and worker together on the embedded defaults; Ctrl-C stops both.

The children's start-up chatter goes to log files under VAR_DIR; the URL and the
demo logins are printed last, once the web answers /healthz and the worker is
ready, and flushed whatever stdout is (a terminal, a pipe, a file).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.celery import broker_folders_ensure

READY_TIMEOUT_SECONDS = 120
WORKER_READY_MARK = "ready."


def _web_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback)
            return response.status == 200
    except OSError:
        return False


def _worker_ready(log: Path) -> bool:
    try:
        return WORKER_READY_MARK in log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


class Command(BaseCommand):
    help = "Migrate, create demo data, then run gunicorn and a Celery worker until Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("DEMO_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8000")))
        parser.add_argument("--workers", type=int, default=2, help="Celery worker concurrency")

    def say(self, text: str = "") -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def handle(self, *args: Any, host: str, port: int, workers: int, **options: Any) -> None:
        var = Path(settings.VAR_DIR)
        var.mkdir(parents=True, exist_ok=True)
        broker_folders_ensure()
        self.say("Preparing the database, static files and demo data…")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        logins = io.StringIO()
        call_command("demo_setup", stdout=logins)
        web_log, worker_log = var / "demo-web.log", var / "demo-worker.log"
        worker_log.write_text("", encoding="utf-8")
        python = sys.executable
        web_cmd = [
            python, "-m", "gunicorn", "config.wsgi", "--bind", f"{host}:{port}",
            "--workers", "2", "--threads", "4", "--access-logfile", "-",
        ]  # fmt: skip
        worker_cmd = [
            python, "-m", "celery", "-A", "config", "worker", "--beat", "--loglevel", "INFO",
            "--concurrency", str(workers), "--without-mingle", "--without-gossip",
            "--schedule", str(var / "celerybeat-schedule"),
        ]  # fmt: skip
        children: list[subprocess.Popen] = []
        with (
            open(web_log, "a", encoding="utf-8") as web_out,
            open(worker_log, "a", encoding="utf-8") as worker_out,
        ):
            for cmd, out in ((web_cmd, web_out), (worker_cmd, worker_out)):
                children.append(
                    subprocess.Popen(
                        cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            self._wait_ready(
                children, f"http://{host}:{port}/healthz", worker_log, lambda: stopping
            )
            self.say(self.style.SUCCESS(f"\nRootproof is running: http://{host}:{port}/"))
            self.say(f"Audit (admin): http://{host}:{port}/admin/")
            self.say(f"Logs: {web_log} and {worker_log}\n")
            self.say("Demo accounts (user / password) and environments:")
            self.say(logins.getvalue().rstrip())
            self.say("\nCtrl-C stops web and worker.")
            while not stopping and all(child.poll() is None for child in children):
                time.sleep(0.5)
            for name, child in zip(("web", "worker"), children, strict=True):
                if child.poll() is not None and not stopping:
                    self.stderr.write(f"{name} exited ({child.returncode}); see the logs")
        finally:
            self._stop(children)
        self.say("Stopped web and worker.")

    def _wait_ready(
        self,
        children: list[subprocess.Popen[bytes]],
        health_url: str,
        worker_log: Path,
        stopping: Callable[[], bool],
    ) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not (_web_ready(health_url) and _worker_ready(worker_log)):
            if stopping():
                return
            if any(child.poll() is not None for child in children):
                raise CommandError("web or worker exited during start-up; see the logs in var/")
            if time.monotonic() > deadline:
                raise CommandError(
                    f"web or worker not ready after {READY_TIMEOUT_SECONDS} s; see the logs"
                )
            time.sleep(0.5)

    @staticmethod
    def _stop(children: list[subprocess.Popen[bytes]]) -> None:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
