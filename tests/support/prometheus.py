"""A real Prometheus (Debian's) on a loopback port, serving a scenario pack's metrics.

The pack's .om files are backfilled with ``promtool tsdb create-blocks-from openmetrics``
into a fresh TSDB, and Prometheus serves it with a retention long enough that the packs'
fixed 2026 timestamps are never compacted away. Used by the Prometheus tests and by the
benches (bench/backend_calls.py, bench/flow.py --prometheus).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.binaries import require_binary
from tests.support.processes import process_stop


def free_port() -> int:
    """A loopback port nobody listens on right now (for a server started next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def openmetrics_concat(pack: Path, target: Path) -> Path:
    """All .om files of the pack as one OpenMetrics document (one final # EOF)."""
    with target.open("w", encoding="utf-8") as out:
        for path in sorted((pack / "metrics").glob("*.om")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip() and line.split() != ["#", "EOF"]:
                    out.write(line + "\n")
        out.write("# EOF\n")
    return target


def own_metric(url: str, sample: str) -> float:
    """The value of one of Prometheus' own samples (``name{labels}`` as /metrics prints it)."""
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise LookupError(f"Prometheus at {url} exposes no sample {sample}")


class PrometheusServer:
    """Started on construction (ready to query when it returns); ``stop()`` ends it.

    ``extra_args`` are more command-line flags (a test's tiny ``--query.max-samples``).
    """

    def __init__(self, pack: Path, workdir: Path, extra_args: tuple[str, ...] = ()) -> None:
        prometheus = require_binary("prometheus")
        promtool = require_binary("promtool")
        workdir.mkdir(parents=True)
        data = workdir / "data"
        source = openmetrics_concat(pack, workdir / "all.om")
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        config = workdir / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\n", encoding="utf-8")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{self.port}",
                *extra_args,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready within 60s")

    def stop(self) -> None:
        process_stop(self.process)
        self.log.close()


@contextmanager
def prometheus_running(pack: Path, workdir: Path) -> Iterator[PrometheusServer]:
    """A Prometheus on ``pack``'s metrics for the block, stopped however the block ends."""
    server = PrometheusServer(pack, workdir)
    try:
        yield server
    finally:
        server.stop()
