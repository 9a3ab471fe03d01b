"""Benchmark: the fleet-wide query_metrics sweep as the fleet grows (10 → 1,000 services).

    .venv/bin/python bench/metrics_fleet.py [--services 10,50,200,1000] [--prometheus]

Each size is a generated pack (tests/evidence/packbuilder.fleet_pack_write: five series
per service, one faulty service). Reported per size: sample lines read, series ranked,
metric files opened (must stay at the number of files), seconds, output characters and
tokens (must stay flat), and whether the faulty service ranks first. With
``--prometheus`` the pack is also backfilled with promtool into a real Prometheus
(loopback port) and the same sweep is made through it: one query_range per sweep, its
seconds, and the CPU seconds this process spent on it (decoding and analysing; the rest of
the wall time is Prometheus answering).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
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

from diagnosis.evidence.common import BackendOutput, Deadline, QueryWindow  # noqa: E402
from diagnosis.evidence.tools.query_metrics.query import metrics_query  # noqa: E402
from diagnosis.tokens import estimate_tokens  # noqa: E402
from tests.evidence.packbuilder import fleet_pack_write, fleet_service_name  # noqa: E402
from tests.support.prometheus import PrometheusServer  # noqa: E402

FAULTY = 7


def _sweep(
    files: tuple[Path, ...] | None = None, prometheus_url: str | None = None
) -> tuple[BackendOutput, float, float]:
    """One fleet-wide query_metrics: its output, wall seconds and this process's CPU seconds
    (the CPU figure stays comparable on a loaded machine)."""
    window = QueryWindow.around(
        start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
    )
    started, cpu = time.perf_counter(), time.process_time()
    out = metrics_query(
        service=None,
        metric=None,
        labels={},
        window=window,
        step=None,
        deadline=Deadline.after(600),
        files=files,
        prometheus_url=prometheus_url,
    )
    return out, time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", default="10,50,200,1000")
    parser.add_argument("--prometheus", action="store_true")
    args = parser.parse_args()
    print(
        f"{'services':>8} {'lines':>9} {'series':>7} {'opens':>5} {'files s':>8} "
        f"{'chars':>6} {'tokens':>6} {'first':>5} {'prom queries':>12} {'prom s':>7} "
        f"{'prom cpu s':>10}"
    )
    for count in (int(n) for n in args.services.split(",")):
        root = Path(tempfile.mkdtemp(prefix="rootproof-fleet-"))
        pack = fleet_pack_write(root / "fleet", services=count, faulty=(FAULTY,))
        files = tuple(sorted((pack / "metrics").glob("*.om")))
        lines = sum(1 for f in files for _ in f.open())
        opened: list[Path] = []
        real_open = Path.open

        def counting_open(self, *a, _opened=opened, _open=real_open, **k):
            if self.suffix == ".om":
                _opened.append(self)
            return _open(self, *a, **k)

        Path.open = counting_open  # type: ignore[method-assign]
        try:
            out, seconds, _ = _sweep(files=files)
        finally:
            Path.open = real_open  # type: ignore[method-assign]
        fleet = out.summary["fleet"]
        first = fleet["services_ranked"][0]["service"] == fleet_service_name(FAULTY)
        prom_queries, prom_seconds, prom_cpu = "-", "-", "-"
        if args.prometheus:
            server = PrometheusServer(pack, root / "prometheus")
            try:
                calls: list[str] = []
                real_get = httpx.Client.get

                def counting_get(
                    client: httpx.Client,
                    url: str,
                    *a: Any,
                    _calls: list[str] = calls,
                    _get: Any = real_get,
                    **k: Any,
                ) -> httpx.Response:
                    if url.endswith("/query_range"):  # not the metadata read beside it
                        _calls.append(url)
                    return _get(client, url, *a, **k)

                httpx.Client.get = counting_get  # type: ignore[method-assign]
                try:
                    live, live_seconds, live_cpu = _sweep(prometheus_url=server.url)
                finally:
                    httpx.Client.get = real_get  # type: ignore[method-assign]
                assert live.output == out.output, "Prometheus and files disagree"
                prom_queries, prom_seconds = str(len(calls)), f"{live_seconds:.2f}"
                prom_cpu = f"{live_cpu:.2f}"
            finally:
                server.stop()
        print(
            f"{count:>8} {lines:>9} {fleet['series']:>7} {len(opened):>5} {seconds:>8.2f} "
            f"{len(out.output):>6} {estimate_tokens(out.output):>6} {'yes' if first else 'NO':>5} "
            f"{prom_queries:>12} {prom_seconds:>7} {prom_cpu:>10}"
        )


if __name__ == "__main__":
    main()
