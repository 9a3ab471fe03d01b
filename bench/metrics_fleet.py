"""Benchmark: the fleet-wide query_metrics sweep as the fleet grows, on Prometheus and
VictoriaMetrics (and the files backend, for the smaller sizes).

    .venv/bin/python bench/metrics_fleet.py [--services 1000,10000]
        [--engines prometheus,victoriametrics] [--files-up-to 1000] [--rank-min-series 2000]
        [--deadline 15]

Each size is a generated pack (tests/evidence/packbuilder.fleet_pack_write: five series a
service, one faulty service), backfilled into a real Prometheus (promtool) and loaded into a
real VictoriaMetrics (its import API), each on a loopback port. Per engine, one sweep as a
session makes it (``query_metrics`` without a service), ranked in the engine above
``--rank-min-series`` series: wall seconds, this worker's CPU seconds (its decoding and
analysis; the rest of the wall time is the engine answering), bytes received, requests sent
(metadata reads apart), the engine's own CPU seconds (its process, from /proc), the Python
heap's peak during a second, traced sweep (tracemalloc),
whether the faulty service ranks first, and whether the output equals the other engine's and
the files'; with the tool's deadline (``--deadline``, the default TOOL_TIMEOUT_SECONDS), how the
call ended (``ok``, ``error``, ``timeout``) and the fleet view's lines that name a gap (a
family not screened, the totals not counted), counted in the row and printed under it.
Prints the machine's load (``uptime``) before and after.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SECRET_KEY", "bench-secret")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()  # the tool registry loads the models

import httpx  # noqa: E402
from django.conf import settings  # noqa: E402

from diagnosis.evidence.common import (  # noqa: E402
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    ToolTimeout,
)
from diagnosis.evidence.tools.query_metrics import prometheus as prometheus_backend  # noqa: E402
from diagnosis.evidence.tools.query_metrics.query import metrics_query  # noqa: E402
from tests.evidence.packbuilder import fleet_pack_write, fleet_service_name  # noqa: E402
from tests.support.prometheus import PrometheusServer  # noqa: E402
from tests.support.victoriametrics import VictoriaMetricsServer  # noqa: E402

FAULTY = 7
WINDOW = QueryWindow.around(
    start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
)
SERVERS = {"prometheus": PrometheusServer, "victoriametrics": VictoriaMetricsServer}


@dataclass
class Traffic:
    """What the sweep sent and received (httpx.Client.get, wrapped)."""

    requests: int = 0
    metadata: int = 0
    received: int = 0


def _counted(traffic: Traffic) -> Any:
    real = httpx.Client.get

    def get(client: httpx.Client, url: str, *args: Any, **kwargs: Any) -> httpx.Response:
        answer = real(client, url, *args, **kwargs)
        if url.endswith("/metadata"):
            traffic.metadata += 1
        else:
            traffic.requests += 1
        traffic.received += len(answer.content)
        return answer

    return real, get


def _sweep(
    *, files: tuple[Path, ...] | None, url: str | None, rank_min_series: int, seconds: float
) -> BackendOutput:
    """One fleet-wide call within ``seconds``, ended as the tool ends it: a failure or a
    timeout is its output, with that status."""
    try:
        return metrics_query(
            service=None,
            metric=None,
            labels={},
            window=WINDOW,
            step=None,
            deadline=Deadline.after(seconds),
            files=files,
            prometheus_url=url,
            rank_min_series=rank_min_series,
        )
    except ToolFailure as failed:
        return BackendOutput(status="error", output=str(failed))
    except ToolTimeout as late:
        return BackendOutput(status="timeout", output=str(late))


def _cpu_seconds(pid: int | None) -> float:
    """The CPU seconds (user and system) process ``pid`` has used; 0 without one."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    *,
    files: tuple[Path, ...] | None,
    url: str | None,
    rank_min_series: int,
    pid: int | None,
    seconds: float,
) -> dict[str, Any]:
    """One timed sweep, then one traced for its heap peak (metadata re-read each time); the
    engine's CPU seconds during the timed one."""
    traffic = Traffic()
    real, counting = _counted(traffic)
    prometheus_backend._metadata.clear()
    httpx.Client.get = counting  # type: ignore[method-assign]
    try:
        engine_cpu = _cpu_seconds(pid)
        started, cpu = time.perf_counter(), time.process_time()
        out = _sweep(files=files, url=url, rank_min_series=rank_min_series, seconds=seconds)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        engine_cpu = _cpu_seconds(pid) - engine_cpu
    finally:
        httpx.Client.get = real  # type: ignore[method-assign]
    prometheus_backend._metadata.clear()
    tracemalloc.start()
    try:
        again = _sweep(files=files, url=url, rank_min_series=rank_min_series, seconds=seconds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    fleet = out.summary.get("fleet") or {}
    ranked = fleet.get("services_ranked") or [{}]
    return {
        "out": out,
        "wall": wall,
        "cpu": cpu,
        "engine_cpu": engine_cpu,
        "traffic": traffic,
        "peak_mb": peak / 1024 / 1024,
        "series": fleet.get("series", 0),
        "first": ranked[0].get("service") == fleet_service_name(FAULTY),
        "same_twice": again.output == out.output,
        "gaps": [
            line
            for line in out.output.splitlines()
            if "did not screen" in line or "did not count" in line or "refused to" in line
        ],
    }


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", default="1000,10000")
    parser.add_argument("--engines", default="prometheus,victoriametrics")
    parser.add_argument("--files-up-to", type=int, default=1000)
    parser.add_argument("--rank-min-series", type=int, default=2000)
    parser.add_argument("--deadline", type=float, default=float(settings.TOOL_TIMEOUT_SECONDS))
    args = parser.parse_args()
    print("load before:", _uptime())
    print(
        f"{'services':>8} {'backend':<16} {'series':>7} {'load s':>7} {'wall s':>7} "
        f"{'cpu s':>6} {'engine cpu':>10} {'received':>10} {'requests':>8} {'metadata':>8} "
        f"{'heap MB':>8} "
        f"{'first':>5} {'equal':>5} {'status':>7} {'gaps':>4}"
    )
    for count in (int(n) for n in args.services.split(",")):
        root = Path(tempfile.mkdtemp(prefix="rootproof-fleet-"))
        pack = fleet_pack_write(root / "fleet", services=count, faulty=(FAULTY,))
        results: dict[str, dict[str, Any]] = {}
        loads: dict[str, float] = {}
        if count <= args.files_up_to:
            files = tuple(sorted((pack / "metrics").glob("*.om")))
            results["files"] = measure(
                files=files,
                url=None,
                rank_min_series=args.rank_min_series,
                pid=None,
                seconds=args.deadline,
            )
            loads["files"] = 0.0
        for engine in args.engines.split(","):
            started = time.perf_counter()
            server = SERVERS[engine](pack, root / engine)
            loads[engine] = time.perf_counter() - started
            try:
                results[engine] = measure(
                    files=None,
                    url=server.url,
                    rank_min_series=args.rank_min_series,
                    pid=server.process.pid,
                    seconds=args.deadline,
                )
            finally:
                server.stop()
        reference = next(iter(results.values()))["out"].output
        for name, row in results.items():
            traffic = row["traffic"]
            print(
                f"{count:>8} {name:<16} {row['series']:>7} {loads[name]:>7.1f} "
                f"{row['wall']:>7.2f} {row['cpu']:>6.2f} {row['engine_cpu']:>10.2f} "
                f"{traffic.received:>10} "
                f"{traffic.requests:>8} {traffic.metadata:>8} {row['peak_mb']:>8.1f} "
                f"{'yes' if row['first'] else 'NO':>5} "
                f"{'yes' if row['out'].output == reference else 'NO':>5} "
                f"{row['out'].status:>7} {len(row['gaps']):>4}"
            )
            for line in row["gaps"]:
                print(f"{'':>8} gap: {line}")
    print("load after:", _uptime())


if __name__ == "__main__":
    main()
