"""How much traffic a shift touches: a callee passes failures up only for the requests it served.

Each case is a small system with known call edges, built from tool summaries of the shape
query_metrics writes; the engine ranks the suspects from them exactly as in a session.
"""

from __future__ import annotations

from typing import Any

from diagnosis.llm.base import ExecutorRequest
from diagnosis.offline.analysis import Call, Suspect
from diagnosis.offline.gather import Evidence, suspects_localise
from diagnosis.offline.localise import topology_build

from .fakes import summary_series as _series

NOW = "2026-03-02T10:40:00Z"
QUESTION = "web 延迟在 2026-03-02 10:20 (UTC) 左右升高，请帮我定位根因服务。"


def _call(step: str, series: list[dict[str, Any]], service: str = "") -> Call:
    arguments = {"service": service} if service else {}
    output = "\n".join(item["line"] for item in series)
    return Call(
        tool_name="query_metrics",
        arguments=arguments,
        invocation_id=1,
        trace_ref="trace-1",
        status="ok",
        output=output,
        summary={"step": step, "series": series},
    )


def _localised(calls: list[Call], edges: list[tuple[str, str]]) -> dict[str, Suspect]:
    request = ExecutorRequest(
        question=QUESTION,
        language="zh-CN",
        now=NOW,
        window={"start": "2026-03-02T10:10:00Z", "end": NOW},
        plan={"services": ["web"]},
        services=sorted({s for edge in edges for s in edge}),
        attempt=1,
        call_edges=tuple(edges),
    )
    evidence = Evidence(calls=calls)
    evidence.topology = topology_build(declared=edges, calls=calls)
    return {s.service: s for s in suspects_localise(request, evidence, ["web"])}


def _traffic(service: str, base: float, level: float | None = None) -> dict[str, Any]:
    changed = level is not None and level != base
    return _series(
        service,
        "requests",
        base=base,
        level=base if level is None else level,
        change="2026-03-02T10:20:00Z" if changed else None,
        score=20 if changed else 0,
    )


def _health(service: str, level: float, change: str, score: float) -> dict[str, Any]:
    return _series(
        service, "availability_percent", base=100.0, level=level, change=change, score=score
    )


def test_a_callee_failing_the_few_requests_it_still_served_does_not_take_the_callers_failures():
    # lb fails everything, but its traffic fell from 15 to 2 a period: 2 failed requests
    # cannot be web's 1.4 % of 700; search fails 1.1 % of 1,100 and can.
    calls = [
        _call(
            "1m",
            [
                _health("web", 98.6, "2026-03-02T10:20:00Z", 12),
                _traffic("web", 700),
                _health("lb", 0.0, "2026-03-02T10:20:00Z", 1000),
                _traffic("lb", 15, 2),
                _health("search", 98.9, "2026-03-02T10:20:00Z", 100),
                _traffic("search", 1100),
            ],
        )
    ]
    found = _localised(calls, [("web", "lb"), ("web", "search")])
    assert found["web"].inherited_from == ["search"]
    assert found["search"].explains == ["web"]
    assert found["lb"].explains == []
