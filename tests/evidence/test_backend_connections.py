"""The live backends' HTTP calls share one keep-alive client per process.

A loopback HTTP/1.1 server counts the TCP connections it accepts and answers each GET with
its own path, so a reused connection, a child's own connection and a late answer landing
on the wrong request are all visible.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from diagnosis.evidence import http as http_module
from diagnosis.evidence.common import Deadline, ToolFailure, ToolTimeout
from diagnosis.evidence.http import backend_get, http_client
from tests.support.forking import forked_child_check
from tests.support.prometheus import free_port


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.connections = 0
        self.drops = 0  # requests to /drop… closed without an answer
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Prometheus and Loki speak
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall per reused call

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/drop") and server.drops:
                    # as a server closing a kept-alive connection just as it is reused
                    server.drops -= 1
                    self.close_connection = True
                    return
                if self.path.startswith("/slow"):
                    server.release.wait(10)
                payload = self.path.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                if self.path.startswith("/cookie"):
                    self.send_header("Set-Cookie", "session=tenant-a; Path=/")
                self.end_headers()
                self.wfile.write(payload)

        super().__init__(("127.0.0.1", 0), Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the timeout test)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


@pytest.fixture
def server():
    running = CountingServer()
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield running
    running.release.set()
    running.shutdown()
    running.server_close()


def _get(
    server: CountingServer, path: str, *, seconds: float = 5.0, headers: dict | None = None
) -> httpx.Response:
    return backend_get(
        backend="Prometheus",
        base_url=server.url,
        url=server.url + path,
        params={},
        headers=headers or {},
        deadline=Deadline.after(seconds),
    )


def test_sequential_calls_to_a_backend_share_one_connection(server):
    answers = [_get(server, f"/call-{i}").text for i in range(5)]
    assert answers == [f"/call-{i}" for i in range(5)]
    assert server.connections == 1


def test_each_call_sends_its_own_headers(server):
    seen: list[str] = []
    for token in ("first", "rotated"):
        response = _get(server, "/h", headers={"Authorization": f"Bearer {token}"})
        seen.append(response.request.headers["Authorization"])
    assert seen == ["Bearer first", "Bearer rotated"]
    assert "Authorization" not in http_client().headers


def test_a_slow_answer_on_a_reused_connection_is_a_tool_timeout(server):
    _get(server, "/warm")
    with pytest.raises(ToolTimeout) as timeout:
        _get(server, "/slow", seconds=0.3)
    assert str(timeout.value) == f"Prometheus at {server.url} did not answer within 0.3s"
    server.release.set()
    # The timed-out connection is dropped: the next call gets its own answer, not the late one.
    assert _get(server, "/after").text == "/after"


def test_an_unreachable_backend_is_a_tool_failure_with_httpx_own_reason():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(httpx.ConnectError) as direct:
        httpx.get(url + "/api/v1/query_range", timeout=2)
    with pytest.raises(ToolFailure) as failure:
        backend_get(
            backend="Prometheus",
            base_url=url,
            url=url + "/api/v1/query_range",
            params={},
            headers={},
            deadline=Deadline.after(2),
        )
    assert str(failure.value) == f"cannot reach Prometheus at {url}: {direct.value}"


def test_a_cookie_a_backend_sets_is_not_sent_on_later_calls(server):
    _get(server, "/cookie")
    later = _get(server, "/next")
    assert "cookie" not in later.request.headers
    assert not http_client().cookies


def _child_check(server: CountingServer, parent: httpx.Client) -> bool:
    return http_client() is not parent and _get(server, "/child").text == "/child"


def test_a_forked_child_builds_its_own_client_and_leaves_the_parents_alone(server):
    _get(server, "/parent")
    parent = http_client()
    assert forked_child_check(lambda: _child_check(server, parent))
    assert _get(server, "/parent-again").text == "/parent-again"
    assert http_client() is parent
    # The parent's connection (still reused after the fork) and the child's own.
    assert server.connections == 2


def test_a_get_whose_kept_alive_connection_its_server_closed_is_sent_once_more(server, monkeypatch):
    # Every failure counts as a quick one here, however loaded the machine is.
    monkeypatch.setattr(http_module, "STALE_FAILURE_SECONDS", 60.0)
    assert _get(server, "/first").text == "/first"
    server.drops = 1
    assert _get(server, "/drop-1").text == "/drop-1"  # no "cannot reach": sent again
    assert server.connections == 2  # the retry on a new connection
    server.drops = 2
    with pytest.raises(ToolFailure, match="cannot reach Prometheus"):
        _get(server, "/drop-2")  # once more only: a server that never answers is an error


def test_a_get_the_server_dropped_after_working_on_it_is_not_sent_again(server, monkeypatch):
    # Every failure counts as a slow one here: the server had the request, resending it
    # would make it do the work twice.
    monkeypatch.setattr(http_module, "STALE_FAILURE_SECONDS", -1.0)
    assert _get(server, "/first").text == "/first"
    server.drops = 1
    with pytest.raises(ToolFailure, match="cannot reach Prometheus"):
        _get(server, "/drop-1")
    assert server.drops == 0 and server.connections == 1  # sent once, on the kept connection
