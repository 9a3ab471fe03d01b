"""Start web and worker together on the embedded defaults; Ctrl-C stops both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Migrate, create demo data, then run gunicorn and a Celery worker until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("DEMO_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8000")))
        parser.add_argument("--workers", type=int, default=2, help="Celery worker concurrency")

    def handle(self, *args, host: str, port: int, workers: int, **options):
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        from config.celery import broker_folders_ensure

        broker_folders_ensure()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("demo_setup", stdout=self.stdout)
        python = sys.executable
        children = [
            subprocess.Popen(
                [
                    python,
                    "-m",
                    "gunicorn",
                    "config.wsgi",
                    "--bind",
                    f"{host}:{port}",
                    "--workers",
                    "2",
                    "--threads",
                    "4",
                    "--access-logfile",
                    "-",
                ],
                start_new_session=True,
            ),
            subprocess.Popen(
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--beat",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    str(workers),
                    "--without-mingle",
                    "--without-gossip",
                    "--schedule",
                    str(settings.VAR_DIR / "celerybeat-schedule"),
                ],
                start_new_session=True,
            ),
        ]
        self.stdout.write(self.style.SUCCESS(f"\nRootproof is running: http://{host}:{port}/"))
        self.stdout.write(
            f"Audit (admin): http://{host}:{port}/admin/   Ctrl-C stops web and worker.\n"
        )
        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping and all(child.poll() is None for child in children):
                time.sleep(0.5)
        finally:
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
        self.stdout.write("Stopped web and worker.")
