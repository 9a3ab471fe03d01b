"""Ranking real incidents: onsets dated by coarse samples, and how much traffic a shift touches.

Each case is a small system with known call edges, built from tool summaries of the shape
query_metrics writes; the engine ranks the suspects from them exactly as in a session.
"""

from __future__ import annotations

from typing import Any

from diagnosis.llm.base import ExecutorRequest
from diagnosis.llm.offline.analysis import Call
from diagnosis.llm.offline.gather import Evidence, suspects_localise
from diagnosis.llm.offline.localise import topology_build

NOW = "2026-03-02T10:40:00Z"
QUESTION = "web 延迟在 2026-03-02 10:20 (UTC) 左右升高，请帮我定位根因服务。"


def _series(
    service: str,
    metric: str,
    *,
    base: float,
    level: float,
    change: str | None,
    score: float,
    labels: dict[str, str] | None = None,
    samples_every: int = 1,
) -> dict[str, Any]:
    """One series as query_metrics summarises it; ``samples_every`` grid points per sample."""
    direction = "flat" if change is None else ("up" if level > base else "down")
    return {
        "service": service,
        "metric": metric,
        "labels": {**(labels or {}), "service": service},
        "baseline_mean": base,
        "baseline_median": base,
        "window_mean": level,
        "window_level": level,
        "window_max": max(base, level),
        "window_max_at": change or NOW,
        "window_min": min(base, level),
        "ratio": level / base if base else None,
        "change_point": change,
        "direction": direction,
        "anomaly_score": score,
        "sustained_points": 0 if change is None else 6,
        "baseline_points": 60,
        "baseline_samples": 60 // samples_every,
        "line": f"{service} {metric} {labels or ''} level {level:g} since {change}",
    }


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


def _ranked(calls: list[Call], edges: list[tuple[str, str]]) -> list[str]:
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
    ranked = suspects_localise(request, evidence, ["web"])
    return [s.service for s in ranked if s.graph_score > 0]


def test_a_callee_dated_one_coarse_sample_after_its_caller_still_explains_it() -> None:
    # 5-minute samples on a 2-minute grid: web's shift shows at 10:22, search's (sampled
    # in the next 5-minute period and moved to the next grid point) at 10:28. The tool
    # sees each sample fill two grid points.
    calls = [
        _call(
            "2m",
            [
                _series("web", "latency_seconds", base=0.3, level=0.9, change=None, score=0),
                _series(
                    "web",
                    "latency_seconds",
                    labels={"quantile": "0.99"},
                    base=0.3,
                    level=0.8,
                    change="2026-03-02T10:22:00Z",
                    score=30,
                    samples_every=2,
                ),
                _series(
                    "search",
                    "latency_seconds",
                    labels={"quantile": "0.99"},
                    base=0.05,
                    level=0.6,
                    change="2026-03-02T10:28:00Z",
                    score=90,
                    samples_every=2,
                ),
                _series(
                    "cart",
                    "latency_seconds",
                    labels={"quantile": "0.99"},
                    base=0.1,
                    level=0.3,
                    change="2026-03-02T10:22:00Z",
                    score=12,
                    samples_every=2,
                ),
            ],
        )
    ]
    ranked = _ranked(calls, [("web", "search"), ("web", "cart")])
    assert ranked[0] == "search"
