"""Shared set-up for benchmark scripts: Django on the database named by DATABASE_URL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def django_apps_setup() -> None:
    """Load Django's apps without touching a database: what a bench of one tool needs (the
    tool registry loads the models)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("SECRET_KEY", "bench-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def django_setup(*, default_db: str) -> None:
    """Point Django at a PostgreSQL benchmark database (created if missing) and migrate."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{default_db}")
    os.environ.setdefault("SECRET_KEY", "bench-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    name = os.environ["DATABASE_URL"].rsplit("/", 1)[-1]
    if os.environ["DATABASE_URL"].startswith("postgres"):
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {name}"],
            capture_output=True,
            check=False,
        )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
