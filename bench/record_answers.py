"""Record what the flow produces for scenario packs, to prove a restructuring changes none of it.

Each pack runs as a real session (as ``manage.py evaluate`` runs it: the same submit, the
same flow, the same persistence) in each asked language, and one JSON file per pack and
language is written: the Executor's raw and structured output and its parse status, the
plan, the decision, the final answer and its source, the self-evaluation, the tool calls
(name, arguments, status, trace reference) and every LLMCall row (role, provider, model,
tokens, status, request, raw response). What changes from run to run (ids, clocks,
latencies, durations) is left out, so two recordings of the same code are byte-identical.

    .venv/bin/python bench/record_answers.py --out /tmp/after scenarios scenarios/public
    diff -r /tmp/before /tmp/after

The database is a temporary SQLite file unless DATABASE_URL names another.
``--provider openai-loopback`` runs every role through the ``openai`` provider against
the loopback OpenAI-compatible server and its role-aware responder
(tests/support/openai_roles.py), so the recorded LLMCall requests are the bodies sent on
the wire. ``RECORD_ROOT`` runs another checkout's code (the recording before a change):

    RECORD_ROOT=/path/to/before .venv/bin/python bench/record_answers.py --out /tmp/before …
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("RECORD_ROOT") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))
_TMP = tempfile.mkdtemp(prefix="record-answers-")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{_TMP}/record.sqlite3")

from bench._django import django_setup  # noqa: E402

django_setup(default_db="unused")

from django.conf import settings  # noqa: E402

from diagnosis.evidence.pack_check import pack_load  # noqa: E402
from diagnosis.evidence.packs import pack_discover  # noqa: E402
from diagnosis.evidence.services import environment_sync_from_pack  # noqa: E402
from diagnosis.flow.run import diagnosis_run  # noqa: E402
from diagnosis.models import DiagnosisSession  # noqa: E402
from diagnosis.services import diagnosis_submit  # noqa: E402
from tests.support.openai_roles import role_responder  # noqa: E402
from tests.support.openai_server import openai_server_running  # noqa: E402

LOOPBACK = "openai-loopback"


def _packs_under(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found.extend([path] if (path / "scenario.yaml").is_file() else pack_discover([path]))
    return found


# An OpenAI-style response's clock (the loopback server's time of the reply).
_CREATED = re.compile(r'"created": \d+')


def session_record(session: DiagnosisSession) -> dict[str, Any]:
    """What a finished session holds, without what changes between two runs."""
    return {
        "status": session.status,
        "stage": session.stage,
        "decision": session.decision,
        "root_cause_status": session.root_cause_status,
        "plan": session.plan,
        "executor_final_answer": session.executor_final_answer,
        "executor_structured_output": session.executor_structured_output,
        "executor_output_parse_status": session.executor_output_parse_status,
        "self_evaluation": session.self_evaluation,
        "final_answer": session.final_answer,
        "answer_source": session.answer_source,
        "error": session.error,
        "tool_calls": [
            {
                "trace_ref": i.trace_ref,
                "tool": i.tool_name,
                "arguments": i.arguments,
                "status": i.status,
                "summary": i.summary,
            }
            for i in session.invocations.order_by("id")
        ],
        "llm_calls": [
            {
                "sequence": c.sequence,
                "attempt": c.attempt,
                "role": c.role,
                "provider": c.provider,
                "model": c.model,
                "tokens_in": c.tokens_in,
                "tokens_out": c.tokens_out,
                "status": c.status,
                "error": c.error,
                "request": c.request,
                "raw_response": _CREATED.sub('"created": 0', c.raw_response or "")
                or c.raw_response,
            }
            for c in session.llm_calls.order_by("sequence")
        ],
    }


def pack_record(*, path: Path, language: str, provider: str | None) -> dict[str, Any]:
    pack = pack_load(path, check_data=False)
    environment = environment_sync_from_pack(path=path)
    session = diagnosis_submit(
        question=pack.question,
        environment=environment,
        requested_by="record",
        source=DiagnosisSession.Source.API,
        language=language,
        provider=provider,
        enqueue=False,
    )
    finished = diagnosis_run(session_id=session.id) or DiagnosisSession.objects.get(pk=session.pk)
    return {"pack": pack.id, "language": language, **session_record(finished)}


def _packs_record(args: argparse.Namespace, *, provider: str | None) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in _packs_under(args.paths):
        for language in args.languages.split(","):
            record = pack_record(path=path, language=language, provider=provider)
            name = f"{record['pack']}.{language}.json"
            text = json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True, default=str)
            (out / name).write_text(text + "\n", encoding="utf-8")
            print(name, record["status"], record["decision"], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("paths", nargs="+", help="pack folders, or folders of packs")
    parser.add_argument("--out", required=True, help="folder for one JSON file per pack")
    parser.add_argument("--languages", default="zh-CN,en", help="comma-separated")
    parser.add_argument("--provider", default="offline", help=f"offline, scripted or {LOOPBACK}")
    args = parser.parse_args()
    if args.provider != LOOPBACK:
        _packs_record(args, provider=args.provider)
        return
    with openai_server_running(responder=role_responder) as server:
        settings.LLM_ROLE_SETTINGS = {
            role: {"provider": "openai", "base_url": server.base_url, "api_key": "k", "model": "m"}
            for role in settings.LLM_ROLES
        }
        _packs_record(args, provider="openai")


if __name__ == "__main__":
    main()
