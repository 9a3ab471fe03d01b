"""The query_logs output and summary from a clusterer: templates ranked by how unusual
they are, and the fleet view of a fleet-wide query."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from diagnosis.evidence.common import (
    BackendOutput,
    QueryWindow,
    num_format,
    num_value,
)
from diagnosis.evidence.timeutil import time_format, time_from_unix
from diagnosis.evidence.tools.query_logs.clustering import (
    MAX_CLUSTERS,
    LogClusterer,
    TemplateStats,
)
from diagnosis.evidence.tools.query_logs.filter import LogFilter

MAX_TEMPLATES_SHOWN = 10
# A template surges when its window rate is this many times its baseline rate, and the
# window count lies this many standard deviations above what an unchanged rate gives.
SURGE_FACTOR = 2.0
SURGE_Z = 3.0
LEVEL_WEIGHT = {"FATAL": 3.0, "CRITICAL": 3.0, "ERROR": 3.0, "WARN": 2.0}


def _minutes(seconds: float) -> float:
    return max(seconds / 60.0, 1.0 / 60.0)


def template_surging(*, count_window: int, count_baseline: int, window_share: float) -> bool:
    """Whether a template seen in the baseline is logged clearly more often in the window.

    Its rate in the window is at least ``SURGE_FACTOR`` times its baseline rate, and that is
    not chance: under an unchanged rate each of the template's lines falls in the window
    with probability ``window_share`` (the window's part of the whole time range), and the
    window's count lies ``SURGE_Z`` standard deviations or more above that expectation.
    """
    if count_baseline <= 0 or count_window <= 0 or not 0 < window_share < 1:
        return False
    rate_ratio = (count_window / window_share) / (count_baseline / (1 - window_share))
    if rate_ratio < SURGE_FACTOR:
        return False
    excess = template_excess(
        count_window=count_window, count_baseline=count_baseline, window_share=window_share
    )
    return excess >= SURGE_Z


def template_excess(*, count_window: int, count_baseline: int, window_share: float) -> float:
    """How many standard deviations a template's window count lies above what an unchanged
    rate gives (0 when not above, or when the window is not a part of the time range).

    Under an unchanged rate each of its lines falls in the window with probability
    ``window_share``: the window's count is binomial, its expectation ``lines × share``
    (a continuity correction of half a line, as for any count).
    """
    lines = count_window + count_baseline
    if lines <= 0 or not 0 < window_share < 1:
        return 0.0
    expected = lines * window_share
    spread = math.sqrt(lines * window_share * (1 - window_share))
    return max((count_window - expected - 0.5) / spread, 0.0)


# (score, surge, is_new, template, stats) of one template, most unusual first
_Row = tuple[float, float, bool, str, TemplateStats]


def _fleet_summary(
    *,
    clusterer: LogClusterer,
    rows: list[_Row],
    total_window: int,
    total_baseline: int,
    window_share: float,
) -> dict[str, Any]:
    """Totals over every service, and the services with new or surging templates, worst first."""
    per_service: dict[str, dict[str, Any]] = {}

    def entry(service: str) -> dict[str, Any]:
        found = per_service.get(service)
        if found is None:
            found = per_service[service] = {
                "service": service,
                "new_or_surging": 0,
                "lines_window": 0,
                "lines_baseline": 0,
                "score": -math.inf,
            }
        return found

    unusual = 0
    for score, _surge, is_new, _template, stats in rows:
        item = entry(stats.service)
        item["lines_window"] += stats.count_window
        item["lines_baseline"] += stats.count_baseline
        if is_new or template_surging(
            count_window=stats.count_window,
            count_baseline=stats.count_baseline,
            window_share=window_share,
        ):
            unusual += 1
            item["new_or_surging"] += 1
            item["score"] = max(item["score"], score)
    for (in_window, _level, service), n in clusterer.unclustered_lines.items():
        entry(service)["lines_" + ("window" if in_window else "baseline")] += n
    services = len(per_service)
    line = (
        f"fleet: {services} services, {total_window} lines in the window, "
        f"{total_baseline} in the baseline, {unusual} new or surging templates"
    )
    suspects = sorted(
        (item for item in per_service.values() if item["new_or_surging"]),
        key=lambda item: (-item["score"], -item["lines_window"], item["service"]),
    )
    top = []
    for item in suspects[:MAX_TEMPLATES_SHOWN]:
        top.append(
            {
                "service": item["service"],
                "new_or_surging": item["new_or_surging"],
                "lines_window": item["lines_window"],
                "lines_baseline": item["lines_baseline"],
                "line": (
                    f"fleet service {item['service'] or '-'}: {item['new_or_surging']} new or "
                    f"surging templates, {item['lines_window']} lines in the window, "
                    f"{item['lines_baseline']} in the baseline"
                ),
            }
        )
    return {
        "services": services,
        "lines_window": total_window,
        "lines_baseline": total_baseline,
        "templates": len(rows),
        "new_or_surging": unusual,
        "new_or_surging_services": len(suspects),
        "line": line,
        "services_ranked": top,
        "services_omitted": len(suspects) - len(top),
    }


def fleet_omitted_line(omitted: int) -> str:
    return f"fleet: {omitted} more services with new or surging templates omitted"


def _rows_ranked(
    clusterer: LogClusterer, window_minutes: float, baseline_minutes: float
) -> list[_Row]:
    """Every template with its surge and score, the most unusual first."""
    rows: list[_Row] = []
    for stats in clusterer.stats.values():
        surge = ((stats.count_window + 1) / window_minutes) / (
            (stats.count_baseline + 1) / baseline_minutes
        )
        is_new = stats.count_baseline == 0 and stats.count_window > 0
        score = LEVEL_WEIGHT.get(stats.level, 1.0) * math.log(surge) + (2.0 if is_new else 0.0)
        template = clusterer.template(stats.cluster_id)
        rows.append((score, surge, is_new, template, stats))
    rows.sort(key=lambda r: (-r[0], -r[4].count_window, r[4].service, r[3]))
    return rows


def _head_lines(
    *,
    clusterer: LogClusterer,
    window: QueryWindow,
    log_filter: LogFilter,
    notes: Iterable[str],
    total_window: int,
    total_baseline: int,
    templates: int,
) -> list[str]:
    """The call, the window, any notes, the totals and the unclustered lines' count."""
    levels = ""
    if total_window == clusterer.total_window:
        levels = ", ".join(
            f"{lvl} {n}"
            for lvl, n in sorted(clusterer.levels_window.items(), key=lambda i: (-i[1], i[0]))
        )
    lines = [f"query_logs {log_filter.describe()}", window.describe()]
    lines.extend(notes)
    totals = (
        f"totals: {total_window} lines in the window"
        + (f" ({levels})" if levels else "")
        + f", {total_baseline} lines in the baseline, {templates} templates"
    )
    lines.append(totals)
    if clusterer.unclustered:
        lines.append(
            f"{clusterer.unclustered} lines beyond {MAX_CLUSTERS} templates "
            "were counted but not clustered"
        )
    return lines


def _template_entry(row: _Row) -> tuple[list[str], dict[str, Any]]:
    """One shown template: its fact line and sample lines, and its summary entry."""
    _score, surge, is_new, template, stats = row
    head = f'{stats.service} {stats.level or "-"} template "{template}": '
    facts = [f"{stats.count_window} in window", f"{stats.count_baseline} in baseline"]
    if is_new:
        facts.append("NEW (absent from the baseline)")
    facts.append(f"surge {num_format(surge)}x")
    facts.append(f"first seen {time_format(time_from_unix(stats.first_seen))}")
    facts.append(f"last seen {time_format(time_from_unix(stats.last_seen))}")
    line = head + ", ".join(facts)
    samples = stats.samples or stats.baseline_samples
    entry = {
        "template": template,
        "service": stats.service,
        "level": stats.level,
        "count_window": stats.count_window,
        "count_baseline": stats.count_baseline,
        "first_seen": time_format(time_from_unix(stats.first_seen)),
        "last_seen": time_format(time_from_unix(stats.last_seen)),
        "is_new": is_new,
        "surge_ratio": num_value(surge) or 0.0,
        "line": line,
        "samples": list(samples),
    }
    return [line, *(f"  sample: {s}" for s in samples)], entry


def _fleet_lines(fleet: dict[str, Any]) -> list[str]:
    lines = [fleet["line"], *(entry["line"] for entry in fleet["services_ranked"])]
    if fleet["services_omitted"]:
        lines.append(fleet_omitted_line(fleet["services_omitted"]))
    return lines


def logs_render(
    *,
    clusterer: LogClusterer,
    window: QueryWindow,
    log_filter: LogFilter,
    notes: Iterable[str] = (),
    total_window: int | None = None,
    total_baseline: int | None = None,
) -> BackendOutput:
    """The report; ``total_window``/``total_baseline`` replace the clustered lines' totals.

    A backend that knows more lines matched than it clustered (Loki's line limit) passes
    the exact totals; the per-level split of the window is then left out, since it covers
    only the clustered lines.
    """
    if total_window is None:
        total_window = clusterer.total_window
    if total_baseline is None:
        total_baseline = clusterer.total_baseline
    window_minutes = _minutes(clusterer.window_end - clusterer.window_start)
    baseline_minutes = _minutes(clusterer.window_start - clusterer.baseline_start)
    rows = _rows_ranked(clusterer, window_minutes, baseline_minutes)
    shown = rows[:MAX_TEMPLATES_SHOWN]
    omitted = len(rows) - len(shown)
    lines = _head_lines(
        clusterer=clusterer,
        window=window,
        log_filter=log_filter,
        notes=notes,
        total_window=total_window,
        total_baseline=total_baseline,
        templates=len(rows),
    )
    summary: dict[str, Any] = {
        "window": window.as_dict(),
        "baseline": window.baseline_dict(),
        "total_window": total_window,
        "total_baseline": total_baseline,
        "templates": [],
        "omitted": omitted,
    }
    if total_window == 0 and total_baseline == 0:
        lines.append("no data: no log lines matched in the window or the baseline")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    if log_filter.fleet:
        summary["fleet"] = _fleet_summary(
            clusterer=clusterer,
            rows=rows,
            total_window=total_window,
            total_baseline=total_baseline,
            window_share=window_minutes / (window_minutes + baseline_minutes),
        )
        lines.extend(_fleet_lines(summary["fleet"]))
    if total_window == 0:
        lines.append("no log lines matched in the window (only in the baseline)")
    for row in shown:
        row_lines, entry = _template_entry(row)
        lines.extend(row_lines)
        summary["templates"].append(entry)
    if omitted:
        lines.append(f"{omitted} more templates omitted (lower rank)")
    status = "ok" if total_window else "no_data"
    return BackendOutput(status=status, output="\n".join(lines), summary=summary)
