"""Benchmark: query_logs' file backend over a generated log file vs ``grep -c``.

    .venv/bin/python bench/logs.py                 # 100 MB and 1 GB
    .venv/bin/python bench/logs.py --size-mb 200   # one size
    .venv/bin/python bench/logs.py --size-mb 1024 --case "all lines"   # some cases

Each measurement runs in a fresh subprocess so its peak RSS is its own; the file is
generated once under /tmp and reused. Before the first measurement each file is settled:
written back to disk (``sync``) and read once, so the scan and ``grep -c`` both find it in the
page cache (a file just written would still be being written back while the first of them
reads it, and that one would pay the disk). The order alternates, case by case (the scan
first, then ``grep`` first), and both CPU ratios and wall ratios are reported: the CPU ratio
is the steadier one on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._django import django_apps_setup  # noqa: E402

django_apps_setup()

from diagnosis.evidence.common import Deadline, QueryWindow  # noqa: E402
from diagnosis.evidence.tools.query_logs.files import logs_from_files  # noqa: E402
from diagnosis.evidence.tools.query_logs.filter import LogFilter  # noqa: E402

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
END = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
INCIDENT = datetime(2026, 3, 2, 10, 17, tzinfo=UTC)
SERVICES = ("payment-service", "order-service", "api-gateway", "user-service")


# The messages in English, and as a service logging in Chinese writes them.
_TEXTS = {
    False: (
        "HikariPool-1 - Connection is not available, request timed out after {ms}ms "
        "(total=20, active=20, idle=0, waiting={waiting})",
        "slow query took {ms}ms on table orders",
        "Callback signature verification failed: channel=unionpay merchantNo={merchant}",
        "POST {path} {status} {ms}ms orderId={order}",
    ),
    True: (
        "HikariPool-1 - 连接不可用，请求在 {ms}ms 后超时"
        "（总数=20，活跃=20，空闲=0，等待={waiting}）",
        "慢查询耗时 {ms}ms，表 orders",
        "回调签名校验失败：渠道=unionpay 商户号={merchant}",
        "POST {path} {status} 耗时 {ms}ms 订单号={order}",
    ),
}


# How each file's lines are written: English as Python's json.dumps spaces it; Chinese as a
# Go or Node service writes JSON (compact, UTF-8 as it is); Chinese as Python's json.dumps
# writes it by default (spaced, every CJK character a \uXXXX escape).
STYLES = {
    "en": (False, {"separators": (", ", ": "), "ensure_ascii": False}),
    "zh": (True, {"separators": (",", ":"), "ensure_ascii": False}),
    "zh-escaped": (True, {"separators": (", ", ": "), "ensure_ascii": True}),
    # Plain text, one service's .log file: the stamp, the level, the message.
    "plain": (False, None),
    # As Python's logging writes it by default ("%(asctime)s %(levelname)s %(message)s").
    "plain-python": (False, None),
    # English JSON lines with Windows line ends.
    "en-crlf": (False, {"separators": (", ", ": "), "ensure_ascii": False}),
}
NEWLINES = {"en-crlf": "\r\n"}


def _line(rng: random.Random, ts: datetime, style: str) -> str:
    service = SERVICES[rng.randrange(4)]
    order = f"O2603{rng.randrange(10**7):07d}"
    trace = f"{rng.getrandbits(128):032x}"
    roll = rng.random()
    chinese, dumps = STYLES[style]
    texts = _TEXTS[chinese]
    if ts >= INCIDENT and service == "payment-service" and roll < 0.3:
        level = "ERROR"
        message = texts[0].format(ms=30000 + rng.randrange(30), waiting=rng.randrange(40))
    elif roll < 0.05:
        level = "WARN"
        message = texts[1].format(ms=800 + rng.randrange(4000))
    elif roll < 0.06:
        level = "ERROR"
        message = texts[2].format(merchant=rng.randrange(10**10))
    else:
        level = "INFO"
        status = 200 if rng.random() < 0.98 else 404
        path = f"/api/v1/{service.split('-')[0]}s"
        message = texts[3].format(path=path, status=status, ms=rng.randrange(5, 90), order=order)
    stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    if style == "plain-python":
        stamp = ts.strftime("%Y-%m-%d %H:%M:%S,") + f"{ts.microsecond // 1000:03d}"
    if dumps is None:
        return f"{stamp} {level} {message}"
    return json.dumps(
        {"ts": stamp, "service": service, "level": level, "message": message, "trace_id": trace},
        **dumps,
    )


def file_generate(path: Path, size_mb: int, style: str = "en") -> Path:
    target = size_mb * 1024 * 1024
    if path.exists() and abs(path.stat().st_size - target) < 1024 * 1024:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(42)
    # Spread the lines evenly over the 160 minutes (line length measured on a sample).
    sampler = random.Random(7)
    sizes = [len(_line(sampler, START, style).encode("utf-8")) + 1 for _ in range(500)]
    lines = target * len(sizes) // sum(sizes)
    step = (END - START) / lines
    written = 0
    ts = START
    with path.open("w", encoding="utf-8") as handle:
        batch = []
        while written < target:
            line = _line(rng, ts, style) + NEWLINES.get(style, "\n")
            batch.append(line)
            written += len(line.encode("utf-8"))  # bytes: a CJK character is three
            ts = min(ts + step, END)
            if len(batch) == 10_000:
                handle.write("".join(batch))
                batch.clear()
        handle.write("".join(batch))
    return path


def backend_run(path: Path, query: str | None, window_minutes: int, in_daemon: bool) -> dict:
    if in_daemon:
        # As in a Celery prefork child, a daemon process, which may not start processes of
        # its own (the scan's threads are all it uses, there and here).
        multiprocessing.current_process = lambda: SimpleNamespace(daemon=True)
    window = QueryWindow.around(start=END - timedelta(minutes=window_minutes), end=END)
    started = time.perf_counter()
    cpu_started = time.process_time()
    result = logs_from_files(
        files=[path],
        log_filter=LogFilter.build(service=None, query=query, level=None),
        window=window,
        limit=3,
        deadline=Deadline.after(3600),
    )
    seconds = time.perf_counter() - started
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "seconds": seconds,
        # This process and its worker processes, if any.
        "cpu_seconds": time.process_time() - cpu_started + workers.ru_utime + workers.ru_stime,
        "lines_window": result.summary["total_window"],
        "lines_baseline": result.summary["total_baseline"],
        "templates": len(result.summary["templates"]) + result.summary["omitted"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        # The scan's worker processes (the largest of them), when it used any.
        "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def file_settle(path: Path) -> None:
    """The file written back to disk and read once into the page cache."""
    os.sync()
    with path.open("rb", buffering=0) as handle:
        while handle.read(8 * 1024 * 1024):
            pass


def scan_run(path: Path, query: str | None, window_minutes: int, in_daemon: bool) -> dict:
    """One query_logs scan in a fresh subprocess: its figures (``backend_run``)."""
    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            str(path),
            "--query",
            query or "",
            "--window-minutes",
            str(window_minutes),
            *(["--in-daemon"] if in_daemon else []),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(child.stdout)


def grep_run(path: Path, pattern: str) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``grep -c`` over the file."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(["grep", "-c", pattern, str(path)], check=False, capture_output=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, max(cpu, 1e-6)


def measure(size_mb: int, only: str | None = None) -> list[dict]:
    """Every case (or those whose name contains ``only``), each file generated when a case
    first needs it and settled before its first measurement."""
    base = f"/tmp/rootproof-bench-{size_mb}mb"
    # style -> its file (a .log file's service is its name)
    paths = {
        "en": Path(f"{base}.jsonl"),
        "zh": Path(f"{base}-zh.jsonl"),
        "zh-escaped": Path(f"{base}-zh-escaped.jsonl"),
        "plain": Path(f"{base}/payment-service.log"),
        "plain-python": Path(f"{base}-python/payment-service.log"),
        "en-crlf": Path(f"{base}-crlf.jsonl"),
    }
    ready: set[str] = set()

    def file_of(style: str) -> Path:
        if style not in ready:
            file_settle(file_generate(paths[style], size_mb, style))
            ready.add(style)
        return paths[style]

    english, chinese, escaped = "en", "zh", "zh-escaped"
    plain, python_log, windows = "plain", "plain-python", "en-crlf"
    rows = []
    cases = (
        ("all lines clustered", english, None, "service", 40, False),
        # What a Celery worker does: its prefork children are daemons (threads, no processes).
        ("all lines, Celery child", english, None, "service", 40, True),
        ('query="timed out"', english, "timed out", "timed out", 40, False),
        # Window and baseline cover 25 of the file's 160 minutes: the rest is skipped.
        ("5-minute window", english, None, "service", 5, False),
        ("Chinese, compact JSON", chinese, None, "service", 40, False),
        ("Chinese, \\u escapes", escaped, None, "service", 40, False),
        ("plain .log text", plain, None, "Z ", 40, False),
        ("plain .log, Python logging", python_log, None, ",", 40, False),
        ("JSON lines, \\r\\n ends", windows, None, "service", 40, False),
    )
    chosen = [case for case in cases if only is None or only in case[0]]
    for number, (label, style, query, pattern, window_minutes, in_daemon) in enumerate(chosen):
        path = file_of(style)
        actual_mb = path.stat().st_size / 1024 / 1024
        scan_first = number % 2 == 0
        if scan_first:
            stats = scan_run(path, query, window_minutes, in_daemon)
        grep_seconds, grep_cpu = grep_run(path, pattern)
        if not scan_first:
            stats = scan_run(path, query, window_minutes, in_daemon)
        rows.append(
            {
                "size_mb": round(actual_mb),
                "case": label,
                "first": "scan" if scan_first else "grep",
                "query_logs_mb_s": actual_mb / stats["seconds"],
                "cpu_mb_s": actual_mb / stats["cpu_seconds"],
                "grep_mb_s": actual_mb / grep_seconds,
                "slower_than_grep": stats["seconds"] / grep_seconds,
                "cpu_slower_than_grep": stats["cpu_seconds"] / grep_cpu,
                **stats,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, action="append")
    parser.add_argument("--child")
    parser.add_argument("--query", default="")
    parser.add_argument("--window-minutes", type=int, default=40)
    parser.add_argument("--in-daemon", action="store_true")
    parser.add_argument("--case", help="only the cases whose name contains this")
    args = parser.parse_args()
    if args.child:
        stats = backend_run(
            Path(args.child), args.query or None, args.window_minutes, args.in_daemon
        )
        print(json.dumps(stats))
        return
    sizes = args.size_mb or [100, 1024]
    # The CPU-time rate (with the scan's worker processes) is steadier than the wall-clock
    # one on a shared machine; "CPU ratio" compares it with grep's CPU time.
    print(
        f"{'size':>7} {'case':<22} {'query_logs':>12} {'(CPU time)':>12} {'grep -c':>11} "
        f"{'ratio':>7} {'CPU ratio':>9} {'peak RSS':>9} {'workers':>8} {'window':>9} "
        f"{'templates':>9} {'first':>5}"
    )
    for size in sizes:
        for row in measure(size, args.case):
            print(
                f"{row['size_mb']:>5}MB {row['case']:<22} {row['query_logs_mb_s']:>7.1f} MB/s "
                f"{row['cpu_mb_s']:>7.1f} MB/s {row['grep_mb_s']:>6.0f} MB/s "
                f"{row['slower_than_grep']:>6.1f}x {row['cpu_slower_than_grep']:>8.1f}x "
                f"{row['peak_rss_mb']:>6.0f} MB {row['worker_rss_mb']:>5.0f} MB "
                f"{row['lines_window']:>9} {row['templates']:>9} {row['first']:>5}"
            )


if __name__ == "__main__":
    main()
