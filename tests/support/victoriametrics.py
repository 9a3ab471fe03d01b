"""A real VictoriaMetrics (Debian's, single-node) on a loopback port, serving a scenario pack's
metrics: the second PromQL engine the query_metrics tests and benches run against.

The pack's .om files are sent through VictoriaMetrics' import API
(``/api/v1/import/prometheus``), which reads the Prometheus text format: the same samples,
with OpenMetrics' timestamps in seconds written in milliseconds as that format has them
(``# TYPE``/``# HELP`` lines say nothing to it: VictoriaMetrics keeps no metadata). The
import is flushed (``/internal/force_flush``) before the server is handed over. Its caches
stay as shipped (the rollup result cache on, as users run it).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from diagnosis.evidence.formats import openmetrics_line_parse
from tests.support.binaries import require_binary
from tests.support.processes import process_stop
from tests.support.prometheus import free_port

IMPORT_BATCH_LINES = 200_000


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text_lines(pack: Path) -> Iterator[str]:
    """Every sample of the pack's .om files as a Prometheus text line (milliseconds)."""
    for path in sorted((pack / "metrics").glob("*.om")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                # The common line, "name{labels} value seconds", only changes its timestamp.
                parts = line.rsplit(None, 2)
                if len(parts) == 3 and line[:1] != "#" and " # " not in line:
                    try:
                        float(parts[1])
                        yield f"{parts[0]} {parts[1]} {round(float(parts[2]) * 1000)}\n"
                        continue
                    except ValueError:
                        pass
                try:
                    sample = openmetrics_line_parse(line)
                except ValueError:
                    continue  # the packs are validated; nothing else would take it either
                if sample is None or sample.timestamp is None:
                    continue
                inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in sample.labels)
                head = f"{sample.name}{{{inner}}}" if inner else sample.name
                yield f"{head} {sample.value!r} {round(sample.timestamp * 1000)}\n"


class VictoriaMetricsServer:
    """Started and loaded on construction (ready to query when it returns); ``stop()`` ends it.

    ``extra_args`` are more command-line flags (a test's tiny ``-search.maxSamplesPerQuery``).
    """

    def __init__(self, pack: Path, workdir: Path, extra_args: tuple[str, ...] = ()) -> None:
        binary = require_binary("victoria-metrics")
        workdir.mkdir(parents=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / "victoria-metrics.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"-storageDataPath={workdir / 'data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                # Prometheus' lookback, so both engines see a sample for the same 5 minutes
                "-search.maxStalenessInterval=5m",
                *extra_args,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready()
            self._load(pack)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"victoria-metrics exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("victoria-metrics did not become ready within 60s")

    def _load(self, pack: Path) -> None:
        batch: list[str] = []
        with httpx.Client(timeout=300) as client:
            for line in prometheus_text_lines(pack):
                batch.append(line)
                if len(batch) >= IMPORT_BATCH_LINES:
                    self._send(client, batch)
                    batch = []
            if batch:
                self._send(client, batch)
            client.get(f"{self.url}/internal/force_flush").raise_for_status()

    def _send(self, client: httpx.Client, batch: list[str]) -> None:
        answer = client.post(f"{self.url}/api/v1/import/prometheus", content="".join(batch))
        answer.raise_for_status()

    def stop(self) -> None:
        process_stop(self.process)
        self.log.close()


@contextmanager
def victoriametrics_running(pack: Path, workdir: Path) -> Iterator[VictoriaMetricsServer]:
    """A VictoriaMetrics on ``pack``'s metrics for the block, stopped however the block ends."""
    server = VictoriaMetricsServer(pack, workdir)
    try:
        yield server
    finally:
        server.stop()
