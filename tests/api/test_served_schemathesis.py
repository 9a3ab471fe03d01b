"""Schemathesis over real HTTP against gunicorn, as an integrator runs it.

The in-process tests (``test_schema.py``) call the WSGI app; this one starts gunicorn on
the production settings (``tests/api/served.py``: its own SQLite database and broker, a
rate limit) and runs the ``schemathesis`` CLI at it with the project's config
(``tests/api/schemathesis.toml``: an API key and the Alertmanager receiver's token, only
the schema's own links) and hooks (``schemathesis_hooks.py``: the run never revokes its
own key and posts alerts to the real receiver). Every check and every phase run; the
client keeps under the server's rate limit; the run must end with no failure, no error,
no warning, and the stateful phase must follow every link the schema declares.

It skips, saying why, where gunicorn cannot run (no fork, a sandbox without sockets); in CI
(``ROOTPROOF_CI=1``) that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnosis.api.schema import LINKS
from diagnosis.api.urls import OPERATIONS
from tests.api.served import ServerUnavailable, gunicorn_serving, served_env, world_seed
from tests.support.prometheus import free_port

CONFIG = Path(__file__).with_name("schemathesis.toml")
# The server lets a key through 1200 requests a minute; the client sends at most 15 a
# second (900 a minute), so no answer is a 429 and a run with a 429 warns (and fails).
SERVER_RATE_LIMIT = "1200/min"
CLIENT_RATE_LIMIT = "15/s"
# Examples per operation and phase: ~700 cases, about a minute at the client's rate.
MAX_EXAMPLES = "10"
SEED = "20261202"  # a run is reproducible: the same cases each time
RUN_TIMEOUT_SECONDS = 600
LINKS_LINE = re.compile(r"API Links:\s+(\d+) covered / (\d+) selected / (\d+) total")


def _gunicorn_missing() -> str:
    try:
        import gunicorn  # noqa: F401
    except ImportError as exc:
        return f"gunicorn is not installed: {exc}"
    if not hasattr(os, "fork"):
        return "gunicorn needs fork()"
    return ""


def _cannot_serve(reason: str) -> None:
    """Skip locally; in CI (ROOTPROOF_CI=1) a server that cannot start is a failure, since a
    broken production setting would otherwise pass unseen as a skip."""
    if os.environ.get("ROOTPROOF_CI") == "1":
        pytest.fail(f"gunicorn could not serve the API in CI: {reason}")
    pytest.skip(f"gunicorn could not serve the API: {reason}")


@pytest.fixture
def served(tmp_path: Path) -> Any:
    """The served API and its world, or a skip that says why it cannot be served."""
    if reason := _gunicorn_missing():
        _cannot_serve(reason)
    env = served_env(var_dir=tmp_path, rate_limit=SERVER_RATE_LIMIT)
    try:
        world = world_seed(env=env)
        with gunicorn_serving(env=env, port=free_port()) as base:
            yield base, world, env
    except ServerUnavailable as exc:
        _cannot_serve(str(exc))


def _cli(base: str, world: dict[str, Any], env: dict[str, str], reports: Path) -> str:
    run_env = {
        **env,
        "ROOTPROOF_API_KEY": world["key"],
        "ROOTPROOF_RECEIVER_TOKEN": world["receiver_token"],
        "ROOTPROOF_SERVED_WORLD": str(Path(env["ROOTPROOF_VAR_DIR"]) / "world.json"),
        "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks",
    }
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "--no-color",
        "run", f"{base}/api/schema/", "--checks", "all", "--max-examples", MAX_EXAMPLES,
        "--rate-limit", CLIENT_RATE_LIMIT, "--seed", SEED, "--workers", "1",
        "--report", "json", "--report-dir", str(reports),
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=reports.parent,  # schemathesis keeps its cache in the working folder
        env=run_env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    return done.stdout + done.stderr


def test_schemathesis_over_http_finds_nothing_and_follows_every_link(served, tmp_path) -> None:
    base, world, env = served
    output = _cli(base, world, env, tmp_path / "reports")
    (report_path,) = (tmp_path / "reports").glob("*.json")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    print(output[-3000:])  # the run's own summary, for whoever reads the log

    assert report["failures"] == [] and report["errors"] == [], output
    assert {name: found for name, found in report["warnings"].items() if found} == {}, output
    assert report["exit_code"] == 0, output
    assert report["operations"]["tested"] == len(OPERATIONS)
    phases = {name: phase["status"] for name, phase in report["phases"].items()}
    assert {phases[name] for name in ("coverage", "fuzzing", "stateful")} == {"success"}, phases
    links = LINKS_LINE.search(output)
    assert links, output
    declared = sum(len(enabled) for enabled in LINKS.values())
    assert tuple(int(n) for n in links.groups()) == (declared, declared, declared), output
