"""Tiny loopback Prometheus and Loki HTTP APIs for fault tests (real sockets).

Loki answers ``query_range`` (streams) and instant ``sum(count_over_time(...))``
queries (vector).

Both serve data made up from the requested range: a steady baseline, then a
change in the last quarter of whatever range is asked for. ``delay`` makes every
answer slow; ``stop()`` closes the port, so later calls get "connection refused".
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

LOKI_ERROR = "HikariPool-1 - Connection is not available, request timed out after 30000ms"


def _prometheus_body(params: dict[str, str]) -> dict[str, Any]:
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    change = end - (end - start) / 4
    values = []
    t = start
    while t <= end:
        values.append([t, "20" if t >= change else "5"])
        t += step
    metric = {"__name__": "hikaricp_connections_active", "service": "payment-service"}
    return {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": metric, "values": values}]},
    }


def _loki_body(params: dict[str, str]) -> dict[str, Any]:
    start, end = int(params["start"]), int(params["end"])
    change = end - (end - start) // 4
    minute = 60 * 1_000_000_000
    values = []
    for ns in range(start, end, minute):
        values.append([str(ns), json.dumps({"level": "INFO", "message": "POST /pay 200 12ms"})])
        if ns >= change:
            values.append([str(ns + 1), json.dumps({"level": "ERROR", "message": LOKI_ERROR})])
    stream = {"service": "payment-service"}
    return {
        "status": "success",
        "data": {"resultType": "streams", "result": [{"stream": stream, "values": values}]},
    }


_LOKI_COUNT = re.compile(r"^sum\(count_over_time\((.*) \[(\d+)(ms|s|m|h)\]\)\)$")
_UNIT_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _loki_count_body(params: dict[str, str]) -> dict[str, Any] | None:
    """``/loki/api/v1/query`` for ``sum(count_over_time(... [range]))``: a ``vector``.

    The count is the lines ``_loki_body`` makes up for the range ending at ``time``.
    """
    match = _LOKI_COUNT.match(params.get("query", ""))
    if match is None:
        return None
    _inner, amount, unit = match.groups()
    end = int(params["time"])
    start = end - int(amount) * _UNIT_NS[unit]
    streams = _loki_body({"start": str(start), "end": str(end)})["data"]["result"]
    count = sum(len(stream["values"]) for stream in streams)
    result = [{"metric": {}, "value": [end / 1e9, str(count)]}] if count else []
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


class ObservabilityStub:
    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay
        self.paths: list[str] = []
        self._release = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> ObservabilityStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                stub.paths.append(url.path)
                if stub.delay:
                    stub._release.wait(stub.delay)
                body: dict[str, Any] | None = None
                if url.path == "/api/v1/query_range":
                    body = _prometheus_body(params)
                elif url.path == "/loki/api/v1/query_range":
                    body = _loki_body(params)
                elif url.path == "/loki/api/v1/query":
                    body = _loki_count_body(params)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                payload = json.dumps(body).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout tests)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self._httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


@contextmanager
def observability_stub_running(**kwargs: Any) -> Iterator[ObservabilityStub]:
    stub = ObservabilityStub(**kwargs).start()
    try:
        yield stub
    finally:
        stub.stop()
