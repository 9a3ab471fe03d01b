"""Shared HTTP pieces for benchmarks: gunicorn on loopback, and a fixed-duration load."""

from __future__ import annotations

import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gunicorn_start(
    *, workers: int, threads: int, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """gunicorn serving config.wsgi on a free loopback port; returns (process, base URL)."""
    port = _free_port()
    env = env or dict(os.environ, DEBUG="0", LOG_LEVEL="WARNING")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.kill()
    raise SystemExit("gunicorn did not start")


def http_load(
    *, base: str, paths: list[str], clients: int, seconds: float, **client_options: Any
) -> dict[str, float]:
    """GET random ``paths`` from ``clients`` threads for ``seconds``; latency percentiles."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client_loop(seed: int) -> None:
        nonlocal errors
        rng = random.Random(seed)
        mine: list[float] = []
        bad = 0
        with httpx.Client(base_url=base, **client_options) as http:
            while time.monotonic() < stop_at:
                path = rng.choice(paths)
                t0 = time.perf_counter()
                response = http.get(path, timeout=30)
                mine.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    bad += 1
        with lock:
            latencies.extend(mine)
            errors += bad

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client_loop, range(clients)))
    elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[max(0, int(len(latencies) * 0.95) - 1)] * 1000,
    }
