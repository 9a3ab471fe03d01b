"""A small server-rendered chart of a query_metrics series: baseline and window marked.

The figure is computed here (coordinates only) and drawn by the ``metric_chart``
partial, so every label goes through template escaping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from diagnosis.evidence.common import quantity_format
from diagnosis.evidence.timeutil import time_parse

WIDTH = 360
HEIGHT = 120
PAD_LEFT = 8
PAD_RIGHT = 8
PAD_TOP = 16
PAD_BOTTOM = 22


@dataclass(frozen=True)
class Chart:
    title: str
    width: int
    height: int
    polyline: str
    dots: list[tuple[float, float]]
    baseline_x: float
    baseline_w: float
    baseline_mid: float
    window_x: float
    window_w: float
    plot_top: int
    plot_h: int
    y_max_label: str
    y_min_label: str
    start_label: str
    window_label: str
    end_label: str
    description: str


def _parse_points(series: dict) -> list[float | None]:
    """The series' trend values (bucket means): stored points when given, else its trend line."""
    points = series.get("trend")
    if isinstance(points, list):
        values = points
    else:
        line = str(series.get("trend_line") or "")
        if ": " not in line:
            return []
        values = [v.strip() for v in line.rsplit(": ", 1)[1].split("|")]
    parsed: list[float | None] = []
    for value in values:
        try:
            number = float(value)
        except (TypeError, ValueError):
            parsed.append(None)
            continue
        parsed.append(number if math.isfinite(number) else None)
    return parsed


def _num(value: float, unit: str = "") -> str:
    """An axis label: in human units (1.76 GiB, 230 ms) when the series has a known unit."""
    human = quantity_format(value, unit) if unit else ""
    if human:
        return human
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def metric_chart(*, summary: dict, series: dict) -> Chart | None:
    """Chart one series of a query_metrics summary; None when there is nothing to draw."""
    window = summary.get("window") or {}
    baseline = summary.get("baseline") or {}
    start = time_parse(baseline.get("start"), strict=False)
    window_start = time_parse(window.get("start"), strict=False)
    end = time_parse(window.get("end"), strict=False)
    values = _parse_points(series)
    if not (start and window_start and end and end > start) or not any(
        v is not None for v in values
    ):
        return None
    span = (end - start).total_seconds()
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    known = [v for v in values if v is not None]
    low, high = min([*known, 0.0]), max(known)
    if high == low:
        high = low + 1.0
    bucket = span / len(values)

    def x_at(seconds: float) -> float:
        return round(PAD_LEFT + plot_w * seconds / span, 1)

    def y_at(value: float) -> float:
        return round(PAD_TOP + plot_h * (1 - (value - low) / (high - low)), 1)

    dots = [(x_at(bucket * (i + 0.5)), y_at(v)) for i, v in enumerate(values) if v is not None]
    window_x = x_at((window_start - start).total_seconds())
    metric = str(series.get("metric") or "")
    service = str(series.get("service") or "")
    line = str(series.get("line") or "")
    # The series identity as the tool wrote it: service, metric and labels.
    title = line.split(": ", 1)[0] if ": " in line else f"{service} {metric}".strip()
    return Chart(
        title=title,
        width=WIDTH,
        height=HEIGHT,
        polyline=" ".join(f"{x},{y}" for x, y in dots),
        dots=dots,
        baseline_x=PAD_LEFT,
        baseline_w=round(window_x - PAD_LEFT, 1),
        baseline_mid=round((PAD_LEFT + window_x) / 2, 1),
        window_x=window_x,
        window_w=round(PAD_LEFT + plot_w - window_x, 1),
        plot_top=PAD_TOP,
        plot_h=plot_h,
        y_max_label=_num(high, str(series.get("unit") or "")),
        y_min_label=_num(low, str(series.get("unit") or "")),
        start_label=start.strftime("%H:%M"),
        window_label=window_start.strftime("%H:%M"),
        end_label=end.strftime("%H:%M"),
        description=str(series.get("line") or title),
    )


def charts_for_lines(*, summary: dict, lines: list[str], limit: int = 2) -> list[Chart]:
    """Charts of the series whose output lines hold the excerpt (its stats or its trend line)."""
    wanted = {line.strip() for line in lines if line.strip()}
    chosen = [
        s
        for s in summary.get("series") or []
        if isinstance(s, dict)
        and (
            str(s.get("line") or "").strip() in wanted
            or str(s.get("trend_line") or "").strip() in wanted
        )
    ]
    charts = [metric_chart(summary=summary, series=s) for s in chosen[:limit]]
    return [c for c in charts if c is not None]
