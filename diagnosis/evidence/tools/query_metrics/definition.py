"""query_metrics: metrics of the window compared with the baseline before it, from a pack's
OpenMetrics files or a live Prometheus."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from diagnosis.evidence.common import BackendOutput
from diagnosis.evidence.tools.base import (
    TIME_ARGS,
    Arg,
    ToolCall,
    ToolDefinition,
    no_files,
    source_missing,
    summary_lines_cut,
)
from diagnosis.evidence.tools.query_metrics.query import metrics_query
from diagnosis.models import Environment


def _empty() -> dict[str, Any]:
    return {"window": None, "baseline": None, "series": [], "omitted": 0}


def _run(call: ToolCall) -> BackendOutput:
    missing = source_missing(call, "metrics", _empty())
    if missing is not None:
        return missing
    env = call.environment
    live = env.kind == Environment.Kind.LIVE
    if not live and not call.pack.paths.metrics:
        raise no_files(call, "metrics files")
    return metrics_query(
        service=call.args.get("service"),
        metric=call.args.get("metric"),
        labels=call.args.get("labels") or {},
        window=call.window(),
        step=call.args.get("step"),
        deadline=call.deadline,
        files=None if live else call.pack.paths.metrics,
        prometheus_url=env.prometheus_url if live else None,
        prometheus_token_env=env.prometheus_token_env if live else "",
        service_label=env.metrics_label,
        clamps=call.clamps,
        rank_min_series=int(settings.METRICS_ENGINE_RANK_MIN_SERIES),
    )


def _facts(summary: dict[str, Any]) -> list[str]:
    """The fleet line and its ranked services (when fleet-wide), then one line per series."""
    fleet = summary.get("fleet") if isinstance(summary.get("fleet"), dict) else {}
    if not summary.get("series") and not fleet:
        return []
    facts: list[str] = []
    if fleet:
        facts = [str(fleet.get("line") or "")]
        ranked = fleet.get("services_ranked") or []
        facts += [str(r.get("line") or "") for r in ranked if isinstance(r, dict)]
    facts += [s.get("line", "") for s in summary["series"]]
    if summary.get("omitted"):
        facts.append(f"{summary['omitted']} more series omitted")
    return facts


def _cut(summary: dict[str, Any], output: str) -> dict[str, Any]:
    return summary_lines_cut(summary, output, "series")


DEFINITION = ToolDefinition(
    name="query_metrics",
    purpose="metrics of a service over a time window",
    description=(
        "Metrics compared between the query window and the baseline right before it. "
        "Without a service it ranks the whole environment in one query: a totals line "
        "(services, series, anomalous), the most anomalous services, and the most anomalous "
        "series (at most 3 per service) - start there on a large fleet, then drill into "
        "the top suspects with service=... . One line per series: direction (up/down since "
        "the change point, or no sustained shift), level vs baseline median, ratio, anomaly "
        "score, then window max/min/mean; bytes and seconds also in human units; then a "
        "short trend line. Counters (*_total, *_count, *_sum, *_bucket) are shown as "
        "per-second rates. Out-of-range arguments are clamped and the output says so. "
        "A series' service is the environment's service label; a series that also has "
        "exported_service (its own service label, renamed in a label clash) keeps it as an "
        "ordinary label."
    ),
    args=(
        Arg(
            "service",
            "string",
            "Service name (the 'service' label), e.g. payment-service. Omit to rank "
            "across all services of the environment.",
        ),
        Arg(
            "metric",
            "string",
            'Metric name or selector, e.g. hikaricp_connections_active{pool="main"}; '
            "any PromQL on a live Prometheus, naming services by the label service (sent as "
            "the environment's own service label). Omit to get all metrics (of the service, "
            "or of every service).",
        ),
        Arg("labels", "labels", 'Extra label matchers, e.g. {"pool": "main"}.'),
        *TIME_ARGS,
        Arg("step", "duration", "Resolution such as 60s or 5m (default 60s)."),
    ),
    run=_run,
    empty_summary=_empty,
    kind="evidence",
    facts=_facts,
    summary_cut=_cut,
    chart=True,
)
