"""A loopback OpenAI-compatible server for tests and benchmarks (real sockets).

``POST /v1/chat/completions`` answers from a queue of ``Reply`` objects (or a
``responder`` callable given the request body) and records every request.
A reply can carry a fault:

| fault | what the client gets |
|---|---|
| ``timeout`` | nothing until ``hang_seconds`` have passed (longer than the client timeout) |
| ``429`` | HTTP 429 with ``Retry-After: <retry_after>`` |
| ``500`` / ``503`` | that HTTP status with an error body |
| any other status, e.g. ``422``, ``401`` | that HTTP status with an error body |
| ``malformed_json`` | HTTP 200 whose body is cut-off JSON |
| ``truncated`` | the content, cut, with ``finish_reason: "length"`` |
| ``empty`` | an empty assistant message |
| ``wrong_schema`` | HTTP 200 with valid JSON that is not a chat completion |
| ``huge`` | a 1 MB answer |
| ``invalid_utf8`` | HTTP 200 whose content holds bytes that are not UTF-8 |
| ``reject_response_format`` | HTTP 400 naming ``response_format`` if the request has one |

``reject_response_format=True`` on the server rejects every request that carries
``response_format`` without consuming the queue, as a server without JSON mode
does; ``response_formats={"json_object", …}`` accepts only those kinds
(``json_schema``, ``json_object_schema`` for a json_object carrying a schema,
``json_object``) and answers any other with a 400 naming ``response_format``.
``tool_choices={"auto", "none"}`` answers any other ``tool_choice`` with a bare
HTTP 500, as llama-cpp-python does for ``required``. ``Reply.raw_tool_calls``
sends tool calls exactly as given (ids missing, arguments as objects, raw
control characters). ``latency`` delays every answer (for benchmarks).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HUGE_CHARS = 1_000_000


@dataclass
class Reply:
    content: str | None = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, dict or raw str)
    finish_reason: str | None = None
    fault: str | None = None
    retry_after: str = "1"
    usage: bool = True  # False: no usage block (the client must estimate)
    raw_tool_calls: list[dict[str, Any]] | None = None  # sent as they are

    @classmethod
    def text(cls, content: str | dict[str, Any], **kwargs: Any) -> Reply:
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        return cls(content=content, **kwargs)

    @classmethod
    def tools(cls, *calls: tuple[str, Any], **kwargs: Any) -> Reply:
        return cls(content=None, tool_calls=list(calls), **kwargs)

    @classmethod
    def failing(cls, fault: str, **kwargs: Any) -> Reply:
        return cls(fault=fault, **kwargs)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any


class FakeOpenAIServer:
    def __init__(
        self,
        *,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        latency: float = 0.0,
        hang_seconds: float = 5.0,
        reject_response_format: bool = False,
        response_formats: set[str] | None = None,
        tool_choices: set[str] | None = None,
        keep_alive: bool = False,
    ) -> None:
        self.replies: deque[Reply] = deque()
        # As real servers (llama.cpp, vLLM, hosted APIs) do: HTTP/1.1, one connection reused.
        self.keep_alive = keep_alive
        self.responder = responder
        self.latency = latency
        self.hang_seconds = hang_seconds
        self.reject_response_format = reject_response_format
        self.response_formats = response_formats
        self.tool_choices = tool_choices
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(_Handler):
            owner = server
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = server.keep_alive  # no delayed-ACK wait on a reused one

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases handlers hanging in a timeout fault
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # --- scripting -----------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(body)
        return None

    def _next_id(self) -> str:
        with self._lock:
            self._counter += 1
            return f"chatcmpl-{self._counter}"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (timeout tests) is expected


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if not self.owner.keep_alive:
            self.send_header("Connection", "close")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode("utf-8"), headers)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send_json(
            status,
            {"error": {"message": message, "type": "fake_error", "code": str(status)}},
            headers,
        )

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake-model"}]})
        else:
            self._error(404, "not found")

    def do_POST(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        owner.requests.append(
            RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, "not found")
            return
        if owner.latency:
            owner._stopping.wait(owner.latency)
        wants_json = isinstance(body, dict) and "response_format" in body
        if owner.reject_response_format and wants_json:
            self._error(400, "Unsupported parameter: 'response_format' is not supported")
            return
        if wants_json and owner.response_formats is not None:
            kind = response_format_kind(body["response_format"])
            if kind not in owner.response_formats:
                self._error(400, f"Invalid parameter: response_format of type {kind}")
                return
        choice = body.get("tool_choice") if isinstance(body, dict) else None
        if choice is not None and owner.tool_choices is not None:
            if choice not in owner.tool_choices:
                self._error(500, "")
                return
        reply = owner._next_reply(body)
        if reply is None:
            self._error(500, "fake server: no scripted reply left")
            return
        self._answer(reply, body, wants_json=wants_json)

    def _answer(self, reply: Reply, body: dict[str, Any], *, wants_json: bool) -> None:
        owner = self.owner
        fault = reply.fault
        if fault == "timeout":
            owner._stopping.wait(owner.hang_seconds)
        elif fault == "429":
            self._error(429, "rate limited", {"Retry-After": reply.retry_after})
            return
        elif fault in {"500", "502", "503"}:
            self._error(int(fault), "internal error")
            return
        elif fault and fault.isdigit():
            self._error(int(fault), f"fake HTTP {fault}")
            return
        elif fault == "reject_response_format" and wants_json:
            self._error(400, "Invalid parameter: response_format of type json_object")
            return
        elif fault == "malformed_json":
            self._send(200, b'{"id": "chatcmpl-x", "choices": [{"index": 0, "message": {"con')
            return
        elif fault == "wrong_schema":
            self._send_json(200, {"result": "ok", "data": [1, 2, 3]})
            return

        content = reply.content
        finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        if fault == "truncated":
            content = (content or "")[: max(1, len(content or "") // 2)]
            finish_reason = "length"
        elif fault == "empty":
            content = ""
        elif fault == "huge":
            content = "x" * HUGE_CHARS
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.raw_tool_calls is not None:
            message["tool_calls"] = reply.raw_tool_calls
            finish_reason = reply.finish_reason or "tool_calls"
        elif reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for index, (name, args) in enumerate(reply.tool_calls)
            ]
        data: dict[str, Any] = {
            "id": owner._next_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        }
        if reply.usage:
            prompt_chars = len(json.dumps(body.get("messages", []), ensure_ascii=False))
            completion = max(1, len(content or "") // 4)
            data["usage"] = {
                "prompt_tokens": max(1, prompt_chars // 4),
                "completion_tokens": completion,
                "total_tokens": max(1, prompt_chars // 4) + completion,
            }
        payload = json.dumps(data, ensure_ascii=False).encode("utf-8")
        if fault == "invalid_utf8" and content:
            marker = json.dumps(content, ensure_ascii=False)[1:-1].encode("utf-8")
            payload = payload.replace(marker, marker + b"\xff\xfe\xc3(", 1)
        self._send(200, payload)


def response_format_kind(response_format: Any) -> str:
    """``json_schema``, ``json_object_schema`` (json_object with a schema) or ``json_object``."""
    if not isinstance(response_format, dict):
        return "invalid"
    kind = str(response_format.get("type"))
    if kind == "json_object" and "schema" in response_format:
        return "json_object_schema"
    return kind


@contextmanager
def openai_server_running(**kwargs: Any) -> Iterator[FakeOpenAIServer]:
    """The server, started on 127.0.0.1 and stopped afterwards (for benchmarks and tests)."""
    server = FakeOpenAIServer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()
