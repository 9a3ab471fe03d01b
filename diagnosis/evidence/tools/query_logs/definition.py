"""query_logs: log lines of the window clustered into templates and compared with the
baseline, from a pack's log files or a live Loki."""

from __future__ import annotations

from typing import Any

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
from diagnosis.evidence.tools.query_logs.clustering import DEFAULT_SAMPLE_LIMIT, MAX_SAMPLE_LIMIT
from diagnosis.evidence.tools.query_logs.files import logs_from_files
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.loki import logs_from_loki
from diagnosis.models import Environment


def _empty() -> dict[str, Any]:
    return {
        "window": None,
        "baseline": None,
        "total_window": 0,
        "total_baseline": 0,
        "templates": [],
        "omitted": 0,
    }


def _run(call: ToolCall) -> BackendOutput:
    log_filter = LogFilter.build(
        service=call.args.get("service"), query=call.args.get("query"), level=call.args.get("level")
    )
    limit = call.args.get("limit", DEFAULT_SAMPLE_LIMIT)
    window = call.window()
    missing = source_missing(call, "logs", _empty())
    if missing is not None:
        return missing
    env = call.environment
    if env.kind == Environment.Kind.LIVE:
        return logs_from_loki(
            base_url=env.loki_url,
            token_env=env.loki_token_env,
            tenant=env.loki_tenant,
            service_label=env.logs_label,
            log_filter=log_filter,
            window=window,
            limit=limit,
            deadline=call.deadline,
        )
    if not call.pack.paths.logs:
        raise no_files(call, "log files")
    return logs_from_files(
        files=call.pack.paths.logs,
        log_filter=log_filter,
        window=window,
        limit=limit,
        deadline=call.deadline,
    )


def _facts(summary: dict[str, Any]) -> list[str]:
    """The totals of window and baseline, then one line per template (a replayed summary
    without totals falls back to the output's lines)."""
    if "total_window" not in summary or summary.get("recorded"):
        return []
    facts = [
        f"totals: {summary.get('total_window', 0)} lines in window, "
        f"{summary.get('total_baseline', 0)} in baseline"
    ]
    return facts + [t.get("line", "") for t in summary.get("templates", [])]


def _cut(summary: dict[str, Any], output: str) -> dict[str, Any]:
    return summary_lines_cut(summary, output, "templates")


DEFINITION = ToolDefinition(
    name="query_logs",
    purpose="log lines of a service, clustered into templates",
    description=(
        "Log lines of the window clustered into templates, each with its count in the "
        "window and in the baseline before it, NEW when absent from the baseline, surge "
        "ratio, first/last seen, level and service, and a few verbatim sample lines. "
        "Templates are ranked by how unusual they are (new or surging errors first). "
        "Without a service (or with service=/regex/) it ranks the templates of every "
        "service together in one query, with a 'fleet:' totals line (services, lines, new "
        "or surging templates) and the services with new or surging templates, worst "
        "first - start there on a large fleet, then drill into the top suspects."
    ),
    args=(
        Arg(
            "service",
            "string",
            "Service name, e.g. payment-service, or /regex/ for every service whose whole "
            "name matches. Omit to rank across all services of the environment.",
        ),
        Arg(
            "query",
            "string",
            "Text the message must contain; /regex/ for a regular expression.",
        ),
        Arg("level", "string", "Log level: ERROR, WARN, INFO, DEBUG…"),
        *TIME_ARGS,
        Arg(
            "limit",
            "integer",
            f"Sample lines per template (default {DEFAULT_SAMPLE_LIMIT}; "
            f"larger values are clamped to {MAX_SAMPLE_LIMIT}).",
            minimum=1,
            maximum=MAX_SAMPLE_LIMIT,
        ),
    ),
    run=_run,
    empty_summary=_empty,
    kind="evidence",
    facts=_facts,
    summary_cut=_cut,
)
