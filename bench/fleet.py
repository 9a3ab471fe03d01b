"""Cost of one diagnosis as the fleet grows: generated systems with one injected fault.

For 10, 50, 200 and 1,000 services (scenarios/_generator/fleet.py, a random call graph,
deterministic seed, generated into a temporary folder) it runs one offline session per
size through the real flow and prints tool calls, model calls, tokens and seconds per
session, and whether the injected root cause ranked first.

    DATABASE_URL=sqlite:////tmp/fleet-bench.sqlite3 .venv/bin/python bench/fleet.py
    .venv/bin/python bench/fleet.py --sizes 10 50 --seed 3

Aim (issue 13): at 1,000 services at most 40 tool calls and at most twice the tokens of
the 10-service case.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scenarios" / "_generator"))

from bench._django import django_setup  # noqa: E402

django_setup(default_db="rootproof_bench")

from fleet import fleet_pack_write  # noqa: E402

from diagnosis.evaluation import pack_evaluate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200, 1000])
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--kind", default="latency")
    args = parser.parse_args()
    print("| services | tool calls | model calls | tokens | seconds | root first | ranked first |")
    print("|---:|---:|---:|---:|---:|:---|:---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            pack = fleet_pack_write(
                out=Path(folder) / f"fleet-{size}", services=size, seed=args.seed, kind=args.kind
            )
            started = time.monotonic()
            result = pack_evaluate(path=pack.path, provider="offline")
            seconds = time.monotonic() - started
            first = result.root_cause_candidates[:1] == [pack.root]
            print(
                f"| {size} | {result.tool_calls} | {result.llm_calls} | {result.tokens} "
                f"| {seconds:.1f} | {'yes' if first else 'no'} ({pack.kind}, depth {pack.depth}) "
                f"| {(result.root_cause_candidates or ['-'])[0]} (root {pack.root}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
