"""Benchmark: query_traces' fleet view over generated OTLP/JSON files vs ``wc -l`` and
``zcat | wc -l`` on the same, equally warm files.

    .venv/bin/python bench/traces.py                  # 256 MB and 1 GB, plain and gzip
    .venv/bin/python bench/traces.py --size-mb 200    # one size

The files hold requests down a 12-service call chain with fan-out (a server span per
service and a client span per call, one ExportTraceServiceRequest a line, several traces a
line as a Collector batches them), spread over the baseline and the window; one service
turns slow in the window. They are generated once under /tmp and reused. Each
measurement runs in a fresh subprocess so its peak RSS is its own (flat in the file size:
the scan keeps figures per service and minute, and open traces in a bounded buffer).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._django import django_apps_setup  # noqa: E402

django_apps_setup()

from diagnosis.evidence.common import Deadline, QueryWindow  # noqa: E402
from diagnosis.evidence.tools.query_traces.files import traces_scan_files  # noqa: E402
from diagnosis.evidence.tools.query_traces.scan import TraceFilter  # noqa: E402

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
WINDOW_START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
END = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
CHANGE = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
# caller -> callees: a gateway, two tiers and their stores
CALLS = {
    "gateway": ["cart", "order", "search"],
    "order": ["payment", "stock", "user"],
    "cart": ["price", "user"],
    "payment": ["ledger", "mysql"],
    "stock": ["redis"],
    "search": ["index"],
}
SLOW = "ledger"
TRACES_PER_LINE = 4


def _span(trace: str, span: str, parent: str, name: str, kind: int, start: int, end: int) -> str:
    # built as text: the generator must outrun the reader it measures
    parent_field = f'"parentSpanId":"{parent}",' if parent else ""
    return (
        f'{{"traceId":"{trace}","spanId":"{span}",{parent_field}"name":"{name}","kind":{kind},'
        f'"startTimeUnixNano":"{start}","endTimeUnixNano":"{end}","status":{{}}}}'
    )


def _trace(rng: random.Random, t_ns: int, by_service: dict[str, list[str]]) -> None:
    trace = f"{rng.getrandbits(128):032x}"

    def serve(service: str, parent: str, start: int) -> int:
        own = int(rng.uniform(1, 4) * 1e6) + (
            200_000_000 if service == SLOW and start > CHANGE_NS else 0
        )
        span_id = f"{rng.getrandbits(64):016x}"
        cursor = start + own // 3
        for callee in CALLS.get(service, ()):
            client = f"{rng.getrandbits(64):016x}"
            end = serve(callee, client, cursor + 200_000)
            by_service[service].append(
                _span(trace, client, span_id, f"call {callee}", 3, cursor, end + 200_000)
            )
            cursor = end + 200_000
        finish = cursor + own - own // 3
        by_service[service].append(
            _span(trace, span_id, parent, f"{service} handle", 2, start, finish)
        )
        return finish

    serve("gateway", "", t_ns)


CHANGE_NS = int(CHANGE.timestamp() * 1e9)


def _line(rng: random.Random, t_ns: int, step_ns: int) -> str:
    by_service: dict[str, list[str]] = {
        s: [] for s in {*CALLS, *(c for cs in CALLS.values() for c in cs)}
    }
    for k in range(TRACES_PER_LINE):
        _trace(rng, t_ns + k * step_ns // TRACES_PER_LINE, by_service)
    resources = ",".join(
        '{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"'
        + name
        + '"}}]},"scopeSpans":[{"scope":{"name":"bench"},"spans":['
        + ",".join(spans)
        + "]}]}"
        for name, spans in sorted(by_service.items())
        if spans
    )
    return '{"resourceSpans":[' + resources + "]}\n"


def generate(path: Path, size_mb: int) -> None:
    """A plain file of about ``size_mb`` MB spread evenly over the baseline and window."""
    rng = random.Random(7)
    probe = _line(rng, int(START.timestamp() * 1e9), 10**9)
    lines = max(size_mb * 1024 * 1024 // len(probe), 1)
    span_ns = int((END - START).total_seconds() * 1e9)
    step = span_ns // lines
    t0 = int(START.timestamp() * 1e9)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(lines):
            handle.write(_line(rng, t0 + i * step, step))


def _files(size_mb: int) -> tuple[Path, Path]:
    plain = Path(f"/tmp/rootproof-bench-traces-{size_mb}mb.jsonl")
    packed = Path(f"{plain}.gz")
    # written under a temporary name and renamed: a run stopped half-way leaves no file
    # that a later run would take for a whole one
    if not plain.exists():
        partial = plain.with_name(plain.name + ".part")
        generate(partial, size_mb)
        partial.rename(plain)
    if not packed.exists():
        partial = packed.with_name(packed.name + ".part")
        with plain.open("rb") as src, gzip.open(partial, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        partial.rename(packed)
    return plain, packed


def _measure(path: Path) -> None:
    """(child) one fleet view over ``path``: seconds, peak RSS, what it found."""
    window = QueryWindow.around(start=WINDOW_START, end=END)
    started = time.perf_counter()
    result = traces_scan_files(
        files=(path,),
        window=window,
        service="",
        shown=TraceFilter(),
        limit=5,
        deadline=Deadline.after(3600),
        description="bench",
        notes=[],
    )
    seconds = time.perf_counter() - started
    services = result.summary["services"]
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "spans": result.summary["totals"]["spans"],
                "first": services[0]["service"] if services else None,
            }
        )
    )


def _timed(command: str) -> float:
    started = time.perf_counter()
    subprocess.run(["bash", "-c", command], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _measure(args.measure)
        return
    print(f"load: {os.getloadavg()}")
    print(
        "| file | MB on disk | MB of JSON | spans | fleet view s | MB/s (JSON) | wc s "
        "| peak RSS MB | first |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for size in args.size_mb:
        plain, packed = _files(size)
        json_mb = plain.stat().st_size / 1024 / 1024
        for path, count in ((plain, f"wc -l < {plain}"), (packed, f"zcat {packed} | wc -l")):
            _timed(f"cat {path} > /dev/null")  # equally warm: both read it once before
            wc = _timed(count)
            child = subprocess.run(
                [sys.executable, __file__, "--measure", str(path)],
                check=True,
                capture_output=True,
                text=True,
            )
            got = json.loads(child.stdout.strip().splitlines()[-1])
            print(
                f"| {path.name} | {path.stat().st_size / 1024 / 1024:.0f} | {json_mb:.0f} | "
                f"{got['spans']:,} | {got['seconds']:.1f} | {json_mb / got['seconds']:.1f} | "
                f"{wc:.2f} | {got['rss_mb']:.0f} | {got['first']} |"
            )
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
