"""Benchmark: what one live-backend GET costs, a client per call against the shared client.

    .venv/bin/python bench/backend_calls.py [--calls 100] [--rounds 2] [--no-prometheus]

Sequential GETs the way query_metrics makes them (``backend_get``; against Prometheus the
whole ``metrics_from_prometheus`` call, decoding included), against three servers:

- a real Prometheus (Debian's, on a loopback port) serving the fixture pack
  (tests/evidence/packbuilder), one ``query_range`` of ``pool_active`` per call;
- a loopback HTTP/1.1 server in a child process answering a small JSON body;
- the same server over TLS (a self-signed certificate made with ``openssl``, trusted through
  ``SSL_CERT_FILE`` next to certifi's bundle, so building an SSL context costs what it
  costs in production).

``per-call`` is the code before the shared client: ``httpx.get`` for every call (a new
client, SSL context and TCP connection each time), put back for the run by replacing
``http_client`` in ``diagnosis.evidence.http``. ``shared`` is the code as it is. Each mode
makes one untimed call first, then ``--calls`` timed ones; the modes alternate for
``--rounds``. Reported: mean and median wall ms per call, and this process's CPU ms per
call (comparable on a loaded machine), and the TCP connections the loopback server
accepted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import certifi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SECRET_KEY", "bench-secret")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()  # the evidence modules read settings

import httpx  # noqa: E402

from diagnosis.evidence import http  # noqa: E402
from diagnosis.evidence.common import Deadline, QueryWindow  # noqa: E402
from diagnosis.evidence.tools.query_metrics.prometheus import (  # noqa: E402
    metrics_from_prometheus,
)
from diagnosis.evidence.tools.query_metrics.series import Grid  # noqa: E402
from tests.evidence.packbuilder import pack_write  # noqa: E402
from tests.support.prometheus import prometheus_running  # noqa: E402

BODY = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
WINDOW = QueryWindow.around(
    start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Prometheus and Loki speak
    # The headers and the body go out as two writes; with Nagle on, the second waits for the
    # client's delayed ACK (40 ms) on a reused connection. Go's servers set TCP_NODELAY too.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        self.server.connections.value += 1  # type: ignore[attr-defined]
        super().setup()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


def _serve(port_out: Any, connections: Any, cert: str | None) -> None:
    """The loopback server's process (its own GIL: the client's cost is measured alone)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.connections = connections  # type: ignore[attr-defined]
    if cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    port_out.value = server.server_port
    server.serve_forever()


@contextmanager
def _loopback(cert: str | None) -> Iterator[tuple[str, Any]]:
    port, connections = multiprocessing.Value("i", 0), multiprocessing.Value("i", 0)
    process = multiprocessing.get_context("fork").Process(
        target=_serve, args=(port, connections, cert), daemon=True
    )
    process.start()
    while not port.value:
        if not process.is_alive():
            raise RuntimeError("the loopback server did not start")
        time.sleep(0.01)
    try:
        yield f"{'https' if cert else 'http'}://127.0.0.1:{port.value}", connections
    finally:
        process.terminate()
        process.join()


def _self_signed(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (key and certificate in one file) and a CA bundle of
    certifi's roots plus it."""
    pem = directory / "loopback.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ),
            *("-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(pem), "-out", str(pem)),
        ],
        check=True,
        capture_output=True,
    )
    bundle = directory / "bundle.pem"
    bundle.write_text(Path(certifi.where()).read_text() + pem.read_text())
    return str(pem), str(bundle)


@contextmanager
def _mode(name: str) -> Iterator[None]:
    """``per-call``: httpx.get for every call, as before the shared client."""
    real = http.http_client
    if name == "per-call":
        http.http_client = lambda: SimpleNamespace(get=httpx.get)  # type: ignore[assignment]
    try:
        yield
    finally:
        http.http_client = real  # type: ignore[assignment]


def _timed(call: Callable[[], object], calls: int) -> tuple[list[float], float]:
    call()  # untimed: the shared client is built on a process's first call
    walls = []
    cpu = time.process_time()
    for _ in range(calls):
        started = time.perf_counter()
        call()
        walls.append((time.perf_counter() - started) * 1000)
    return walls, (time.process_time() - cpu) * 1000 / calls


def _prometheus_call(url: str) -> Callable[[], object]:
    grid = Grid.for_window(WINDOW, None)

    def call() -> object:
        return metrics_from_prometheus(
            base_url=url, token_env="", query="pool_active", grid=grid, deadline=Deadline.after(10)
        )

    return call


def _loopback_call(url: str) -> Callable[[], object]:
    def call() -> object:
        return http.backend_get(
            backend="loopback",
            base_url=url,
            url=url + "/api/v1/query_range",
            params={"query": "up"},
            headers={"Accept-Encoding": "identity"},
            deadline=Deadline.after(10),
        ).json()

    return call


def _report(
    label: str, call: Callable[[], object], args: argparse.Namespace, accepted: Any = None
) -> None:
    for _ in range(args.rounds):
        for mode in ("per-call", "shared"):
            before = accepted.value if accepted is not None else 0
            with _mode(mode):
                walls, cpu_ms = _timed(call, args.calls)
            opened = str(accepted.value - before) if accepted is not None else "-"
            print(
                f"{label:<11} {mode:<9} {args.calls:>6} {statistics.mean(walls):>8.2f} "
                f"{statistics.median(walls):>8.2f} {cpu_ms:>8.2f} {opened:>11}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-prometheus", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rootproof-backend-calls-") as tmp:
        _measure(args, Path(tmp))


def _measure(args: argparse.Namespace, work: Path) -> None:
    cert, bundle = _self_signed(work)
    os.environ["SSL_CERT_FILE"] = bundle  # read by httpx (trust_env) when a client is built
    print(
        f"{'server':<11} {'mode':<9} {'calls':>6} {'mean ms':>8} {'p50 ms':>8} {'cpu ms':>8} "
        f"{'connections':>11}"
    )
    with _loopback(None) as (url, accepted):
        _report("http", _loopback_call(url), args, accepted)
    with _loopback(cert) as (url, accepted):
        _report("https", _loopback_call(url), args, accepted)
    if not args.no_prometheus:
        with prometheus_running(pack_write(work / "pack"), work / "prometheus") as server:
            _report("prometheus", _prometheus_call(server.url), args)


if __name__ == "__main__":
    main()
