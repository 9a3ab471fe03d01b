"""OTLP/JSON traces for generated packs: requests walked down a call graph.

Each request enters at one service and calls its callees in turn (each callee with
probability ``visit``: not every request needs every dependency). A service spends its own
time partly before and partly after its calls; a client span in the caller wraps each
server span in the callee (with a little network time). An error begins where ``error``
says and is carried up to each caller with probability ``propagate``. Written one trace a
line (an ``ExportTraceServiceRequest`` with one ``resourceSpans`` per service), gzip with a
fixed header time, so a pack is byte-for-byte the same for a seed. Status is always written
(``{}`` when unset), as the OpenTelemetry Collector's JSON exporter does.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

NETWORK_S = 0.0004  # each way, per call
MAX_DEPTH = 12

# (service, t) -> seconds of its own time; (service, t) -> probability an error begins there
OwnTime = Callable[[str, float], float]
ErrorChance = Callable[[str, float], float]


class TraceWriter:
    def __init__(
        self,
        seed: str,
        *,
        calls: dict[str, list[str]],
        own: OwnTime,
        error: ErrorChance,
        visit: float = 1.0,
        propagate: float = 0.9,
        client_spans: bool = True,
        operation: Callable[[str], str] | None = None,
        error_message: Callable[[str], str] | None = None,
        pods: dict[str, list[str]] | None = None,
    ) -> None:
        self.rng = random.Random(zlib.crc32(seed.encode()))
        self.calls = calls
        self.own = own
        self.error = error
        self.visit = visit
        self.propagate = propagate
        self.client_spans = client_spans
        self.operation = operation or (lambda service: f"{service} handle")
        self.error_message = error_message or (lambda service: "internal error")
        self.pods = pods or {}
        self.lines: list[str] = []

    def _id(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def request(self, entry: str, t: float) -> None:
        """One trace entering at ``entry`` at Unix time ``t``."""
        out: dict[str, list[dict[str, Any]]] = {}
        trace = self._id(128)
        self._walk(out, entry, trace=trace, parent="", start=t, depth=0)
        self.lines.append(_request_line(out, self.pods, self.rng))

    def _walk(
        self,
        out: dict[str, list[dict[str, Any]]],
        service: str,
        *,
        trace: str,
        parent: str,
        start: float,
        depth: int,
    ) -> tuple[float, bool]:
        """The server span of ``service`` under ``parent`` and all it calls: (end, failed)."""
        rng = self.rng
        own = max(self.own(service, start), 1e-5) * rng.uniform(0.9, 1.1)
        span_id = self._id(64)
        failed = rng.random() < self.error(service, start)
        cursor = start + own * 0.3
        if not failed and depth < MAX_DEPTH:
            for callee in self.calls.get(service, ()):
                if rng.random() >= self.visit:
                    continue
                client_id = self._id(64) if self.client_spans else span_id
                end, child_failed = self._walk(
                    out, callee, trace=trace, parent=client_id, start=cursor + NETWORK_S,
                    depth=depth + 1,
                )  # fmt: skip
                if self.client_spans:
                    out.setdefault(service, []).append(
                        _span_dict(
                            trace, client_id, span_id, f"call {callee}", 3, cursor,
                            end + NETWORK_S, "" if child_failed else None,
                        )
                    )  # fmt: skip
                cursor = end + NETWORK_S
                if child_failed and rng.random() < self.propagate:
                    failed = True
                    break
        finish = cursor + own * 0.7
        message = self.error_message(service) if failed else None
        out.setdefault(service, []).append(
            _span_dict(trace, span_id, parent, self.operation(service), 2, start, finish, message)
        )
        return finish, failed

    def write(self, folder: Path, name: str = "spans.jsonl.gz") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        data = "".join(f"{line}\n" for line in self.lines).encode()
        path.write_bytes(gzip.compress(data, mtime=0))
        return path


def _span_dict(
    trace: str,
    span_id: str,
    parent: str,
    name: str,
    kind: int,
    start: float,
    end: float,
    error: str | None,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(int(start * 1e9)),
        "endTimeUnixNano": str(int(end * 1e9)),
        "status": {} if error is None else {"code": 2, **({"message": error} if error else {})},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _request_line(
    by_service: dict[str, list[dict[str, Any]]], pods: dict[str, list[str]], rng: random.Random
) -> str:
    resources = []
    for service in sorted(by_service):
        attributes = [{"key": "service.name", "value": {"stringValue": service}}]
        if pods.get(service):
            pod = rng.choice(pods[service])
            attributes.append({"key": "k8s.pod.name", "value": {"stringValue": pod}})
        resources.append(
            {
                "resource": {"attributes": attributes},
                "scopeSpans": [
                    {"scope": {"name": "rootproof.generator"}, "spans": by_service[service]}
                ],
            }
        )
    return json.dumps({"resourceSpans": resources}, separators=(",", ":"))
