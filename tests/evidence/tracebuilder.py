"""OTLP/JSON trace lines built by hand for the query_traces tests."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any


def span(
    trace: int | str,
    span_id: int | str,
    parent: int | str | None,
    *,
    name: str,
    start_ns: int,
    end_ns: int,
    kind: int | None = 2,
    status: int | None = None,
    message: str = "",
) -> dict[str, Any]:
    """One OTLP/JSON span (ids as hex; times as decimal strings, as the spec says)."""
    out: dict[str, Any] = {
        "traceId": trace if isinstance(trace, str) else f"{trace:032x}",
        "spanId": span_id if isinstance(span_id, str) else f"{span_id:016x}",
        "name": name,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
    }
    if parent is not None:
        out["parentSpanId"] = parent if isinstance(parent, str) else f"{parent:016x}"
    if kind is not None:
        out["kind"] = kind
    if status is not None:
        out["status"] = {"code": status, **({"message": message} if message else {})}
    return out


def request_line(by_service: dict[str, list[dict[str, Any]]]) -> str:
    """One ExportTraceServiceRequest: one resourceSpans per service."""
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": name}}]
                    },
                    "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
                }
                for name, spans in by_service.items()
            ]
        }
    )


def chain_lines(
    services: list[str],
    *,
    start: datetime,
    end: datetime,
    change_at: datetime,
    slow: str | None = None,
    failing: str | None = None,
    every_s: float = 5.0,
    seed: int = 7,
) -> list[str]:
    """Requests through a chain services[0] -> services[1] -> …, one trace a line.

    Each service spends 2-4 ms itself (noise from ``seed``); after ``change_at`` the
    ``slow`` one spends 200 ms more and the ``failing`` one ends in error, which its
    callers' spans carry up (status 2 on every span above it).
    """
    rng = random.Random(seed)
    lines: list[str] = []
    t = int(start.timestamp() * 1e9)
    stop = int(end.timestamp() * 1e9)
    change = int(change_at.timestamp() * 1e9)
    trace = 1
    while t < stop:
        own = [int(rng.uniform(2, 4) * 1e6) for _ in services]
        after = t >= change
        for i, name in enumerate(services):
            if after and name == slow:
                own[i] += 200_000_000
        fail_at = services.index(failing) if after and failing in services else None
        by_service: dict[str, list[dict[str, Any]]] = {}
        begin = t
        durations = []
        # durations from the bottom up: each service's own time plus its callee's
        total = 0
        for i in reversed(range(len(services))):
            total += own[i]
            durations.insert(0, total)
        for i, name in enumerate(services):
            status = 2 if fail_at is not None and i <= fail_at else None
            by_service[name] = [
                span(
                    trace,
                    i + 1,
                    i if i else None,
                    name=f"{name} handle",
                    start_ns=begin + i * 1000,
                    end_ns=begin + i * 1000 + durations[i] - i * 1000,
                    status=status if status is not None else 0,
                    message="boom" if fail_at == i else "",
                )
            ]
        lines.append(request_line(by_service))
        trace += 1
        t += int(every_s * 1e9)
    return lines


def traces_write(
    folder: Path, lines: Iterable[str], *, name: str = "spans.jsonl", gz: bool = False
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{line}\n" for line in lines)
    if gz:
        path = folder / f"{name}.gz"
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
        return path
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
