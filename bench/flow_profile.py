"""Where one session's non-model time and queries go: the worker's run, in-process.

Runs sessions on the mini-pool pack (as ``bench/flow.py`` does) against the loopback
OpenAI-compatible server with no model latency, the first as a warm-up, then prints the
queries of one session grouped by statement and table, and the functions that took the
time (cProfile, summed over the measured sessions).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootproof_bench \
    .venv/bin/python bench/flow_profile.py --sessions 10
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._django import django_setup

django_setup(default_db="rootproof_bench")

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402

from bench._mini_pool import mini_pool_owner_environment  # noqa: E402
from diagnosis.flow.run import diagnosis_run  # noqa: E402
from diagnosis.services import diagnosis_submit  # noqa: E402
from tests.support.openai_roles import role_responder  # noqa: E402
from tests.support.openai_server import openai_server_running  # noqa: E402

_TABLE = re.compile(r'(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', re.IGNORECASE)


# Statements that read or write no row: transaction control and session settings.
_CONTROL = {"SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT", "SET", "RESET"}


def _query_kind(sql: str) -> str:
    verb = sql.split(None, 1)[0].upper() if sql.strip() else "?"
    if verb in _CONTROL:
        return verb
    table = _TABLE.search(sql)
    lock = " FOR UPDATE" if "FOR UPDATE" in sql.upper() else ""
    return f"{verb} {table.group(1) if table else '?'}{lock}"


def _session_run(question: str) -> list[dict[str, str]]:
    """One session submitted and run as the worker runs it; its queries."""
    owner, environment = mini_pool_owner_environment("bench")
    session = diagnosis_submit(
        question=question, environment=environment, owner=owner, enqueue=False
    )
    with CaptureQueriesContext(connection) as ctx:
        diagnosis_run(session_id=session.pk)
    return ctx.captured_queries


def _report_queries(queries: list[dict[str, str]], *, in_order: bool) -> None:
    kinds = Counter(_query_kind(q["sql"]) for q in queries)
    rows = sum(count for kind, count in kinds.items() if kind not in _CONTROL)
    print(f"queries in one session: {len(queries)} ({rows} read or write rows)")
    for kind, count in kinds.most_common():
        print(f"  {count:>4}  {kind}")
    if in_order:
        print("in order:")
        for query in queries:
            print(f"  {query['sql'][:150]}")


def _report_profile(profile: cProfile.Profile, *, top: int) -> None:
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10, help="measured sessions")
    parser.add_argument("--top", type=int, default=45, help="functions shown")
    parser.add_argument("--sql", action="store_true", help="also list one session's queries")
    args = parser.parse_args()
    # keep_alive: one connection reused, as a real model server does
    with openai_server_running(responder=role_responder, latency=0.0, keep_alive=True) as server:
        llm = {"provider": "openai", "base_url": server.base_url, "api_key": "k"}
        roles = {role: {**values, **llm} for role, values in settings.LLM_ROLE_SETTINGS.items()}
        with override_settings(
            LLM_PROVIDER="openai",
            LLM_BASE_URL=server.base_url,
            LLM_API_KEY="k",
            LLM_ROLE_SETTINGS=roles,
        ):
            _sessions_profiled(args)


def _sessions_profiled(args: argparse.Namespace) -> None:
    _session_run("warm-up")
    profile = cProfile.Profile()
    started = time.monotonic()
    queries: list[dict[str, str]] = []
    for n in range(args.sessions):
        profile.enable()
        queries = _session_run(f"payment-service 超时 #{n}")
        profile.disable()
    elapsed = time.monotonic() - started
    print(f"{elapsed / args.sessions:.3f}s per session in-process (profiled)")
    _report_queries(queries, in_order=args.sql)
    _report_profile(profile, top=args.top)


if __name__ == "__main__":
    main()
