"""The API as an integrator meets it: gunicorn serving the production settings over HTTP.

The server runs on its own SQLite database and filesystem broker in a scratch folder
(no worker: submitted diagnoses stay queued), with one web process so that its
in-process rate-limit count is the only one. ``world_seed`` fills the database the way
an operator would before handing out credentials: a user, an environment, a finished
diagnosis, an Alertmanager receiver and two API keys (one for the run, one a decoy the
run may revoke), and prints what a client needs.

Run as ``python -m tests.api.served <var dir>`` it seeds the world in that folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.case import Case

from tests.support.processes import process_stop

ROOT = Path(__file__).resolve().parents[2]
RECEIVER = "prod-am"
WEBHOOK_PREFIX = "/api/v1/integrations/"
READY_TIMEOUT_SECONDS = 60


class ServerUnavailable(RuntimeError):
    """gunicorn could not be started or never answered /healthz."""


def served_env(*, var_dir: Path, rate_limit: str) -> dict[str, str]:
    """The environment of the served API: production settings, its own scratch state."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "CELERY_", "CACHE_", "API_", "DJANGO_"))
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": "served-api-test-secret",
            "DEBUG": "false",
            "ROOTPROOF_VAR_DIR": str(var_dir),
            "DATABASE_URL": f"sqlite:///{var_dir / 'served.sqlite3'}",
            "CELERY_BROKER_URL": "filesystem://",
            "API_RATE_LIMIT": rate_limit,
            "DIAGNOSIS_DEFAULT_ENVIRONMENT": "shop",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def world_seed(*, env: dict[str, str]) -> dict[str, Any]:
    """Migrate the served database and create the world; returns its credentials."""
    var_dir = Path(env["ROOTPROOF_VAR_DIR"])
    for command in (
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        [sys.executable, "-m", "tests.api.served", str(var_dir)],
    ):
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        if done.returncode != 0:
            raise ServerUnavailable(f"{command[-1]}: {done.stderr[-2000:]}")
    return json.loads((var_dir / "world.json").read_text(encoding="utf-8"))


def case_aim(case: Case, *, run_key_id: int, decoy_key_id: int, receiver: str) -> None:
    """Point a schema-valid path at the world: never the run's own key, the real receiver.

    A run that revoked its own key would see nothing but 401 after it; a receiver slug
    made up by the generator names no receiver (401 whatever the body).
    """
    if case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH):
        return
    path = case.path_parameters or {}
    if path.get("key_id") == run_key_id:
        path["key_id"] = decoy_key_id
    if case.operation.path.startswith(WEBHOOK_PREFIX):
        path["receiver"] = receiver


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def gunicorn_serving(*, env: dict[str, str], port: int) -> Iterator[str]:
    """gunicorn on 127.0.0.1:<port> until the block ends; yields its base URL."""
    var_dir = Path(env["ROOTPROOF_VAR_DIR"])
    log = (var_dir / "gunicorn.log").open("w", encoding="utf-8")
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}",
        "--workers", "1", "--threads", "2", "--timeout", "60",
    ]  # fmt: skip
    try:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    except OSError as exc:
        log.close()
        raise ServerUnavailable(f"gunicorn did not start: {exc}") from exc
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not _answers(f"{base}/healthz"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ServerUnavailable(
                    "gunicorn never answered /healthz: "
                    + (var_dir / "gunicorn.log").read_text(encoding="utf-8")[-2000:]
                )
            time.sleep(0.2)
        if process.poll() is not None:  # another server answered on the port
            raise ServerUnavailable(f"gunicorn exited ({process.returncode}) on port {port}")
        yield base
    finally:
        process_stop(process)
        log.close()


def _seed(var_dir: Path) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from diagnosis.alerts.services import alert_receiver_create
    from diagnosis.api.services import api_key_create
    from diagnosis.models import Environment
    from tests.api.conftest import completed_session_make

    user = get_user_model().objects.create_user(username="integrator", password="pw-int-1")
    environment = Environment.objects.create(slug="shop", name="Shop")
    completed_session_make(owner=user, environment=environment)
    _, token = alert_receiver_create(
        slug=RECEIVER, name="Prod", owner=user, environment=environment
    )
    decoy = api_key_create(owner=user, name="decoy")
    run = api_key_create(owner=user, name="schemathesis")
    world = {
        "key": run.key,
        "key_id": run.api_key.pk,
        "decoy_id": decoy.api_key.pk,
        "receiver": RECEIVER,
        "receiver_token": token,
    }
    (var_dir / "world.json").write_text(json.dumps(world), encoding="utf-8")


if __name__ == "__main__":
    _seed(Path(sys.argv[1]))
