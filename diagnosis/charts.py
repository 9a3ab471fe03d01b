"""The server-rendered SVG charts of the chat and the audit pages, in one module.

Two drawings, both from plain numbers and with every label escaped:

- **a metric series** (the chat's evidence panel): ``metric_chart`` computes the
  figure's coordinates (the trend as a polyline, the baseline and the incident window
  as bands, the time axis) and the ``metric_chart`` template partial draws it, so
  every label goes through template escaping;
- **stacked bars and lines** over categories (the audit's quality dashboard):
  ``bar_chart`` and ``line_chart`` write the SVG themselves, every label and title
  through ``format_html``; the only markup is the SVG written here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from diagnosis.evidence.common import quantity_format
from diagnosis.evidence.timeutil import time_parse

# --- A metric series with its baseline and window (drawn by the metric_chart partial) ---

METRIC_WIDTH = 360
METRIC_HEIGHT = 120
METRIC_PAD_LEFT = 8
METRIC_PAD_RIGHT = 8
METRIC_PAD_TOP = 16
METRIC_PAD_BOTTOM = 22


@dataclass(frozen=True)
class MetricChart:
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


def _axis_label(value: float, unit: str = "") -> str:
    """An axis label: in human units (1.76 GiB, 230 ms) when the series has a known unit."""
    human = quantity_format(value, unit) if unit else ""
    if human:
        return human
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def metric_chart(*, summary: dict, series: dict) -> MetricChart | None:
    """MetricChart one series of a query_metrics summary; None when there is nothing to draw."""
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
    plot_w = METRIC_WIDTH - METRIC_PAD_LEFT - METRIC_PAD_RIGHT
    plot_h = METRIC_HEIGHT - METRIC_PAD_TOP - METRIC_PAD_BOTTOM
    known = [v for v in values if v is not None]
    low, high = min([*known, 0.0]), max(known)
    if high == low:
        high = low + 1.0
    bucket = span / len(values)

    def x_at(seconds: float) -> float:
        return round(METRIC_PAD_LEFT + plot_w * seconds / span, 1)

    def y_at(value: float) -> float:
        return round(METRIC_PAD_TOP + plot_h * (1 - (value - low) / (high - low)), 1)

    dots = [(x_at(bucket * (i + 0.5)), y_at(v)) for i, v in enumerate(values) if v is not None]
    window_x = x_at((window_start - start).total_seconds())
    metric = str(series.get("metric") or "")
    service = str(series.get("service") or "")
    line = str(series.get("line") or "")
    # The series identity as the tool wrote it: service, metric and labels.
    title = line.split(": ", 1)[0] if ": " in line else f"{service} {metric}".strip()
    return MetricChart(
        title=title,
        width=METRIC_WIDTH,
        height=METRIC_HEIGHT,
        polyline=" ".join(f"{x},{y}" for x, y in dots),
        dots=dots,
        baseline_x=METRIC_PAD_LEFT,
        baseline_w=round(window_x - METRIC_PAD_LEFT, 1),
        baseline_mid=round((METRIC_PAD_LEFT + window_x) / 2, 1),
        window_x=window_x,
        window_w=round(METRIC_PAD_LEFT + plot_w - window_x, 1),
        plot_top=METRIC_PAD_TOP,
        plot_h=plot_h,
        y_max_label=_axis_label(high, str(series.get("unit") or "")),
        y_min_label=_axis_label(low, str(series.get("unit") or "")),
        start_label=start.strftime("%H:%M"),
        window_label=window_start.strftime("%H:%M"),
        end_label=end.strftime("%H:%M"),
        description=str(series.get("line") or title),
    )


def charts_for_lines(*, summary: dict, lines: list[str], limit: int = 2) -> list[MetricChart]:
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


# --- Stacked bars and lines over categories (written as SVG here) ----------------------

PALETTE = ("#2f6fb0", "#e0883b", "#c23b3b", "#5a9e4b", "#8064a2", "#7f7f7f", "#b8a03c")
WIDTH, HEIGHT = 640, 220
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 12, 12, 48
LABEL_FONT, LABEL_LINE = 10, 12
LABEL_MAX_LINES = 3


def _text_width(text: str) -> float:
    """Rough width at LABEL_FONT px: CJK characters are square, Latin ones about half."""
    return sum(LABEL_FONT if ord(ch) >= 0x2E80 else LABEL_FONT * 0.58 for ch in text)


def _label_lines(label: str, width: float) -> list[str]:
    """The label broken at spaces (or between CJK characters) into lines that fit ``width``."""
    words = label.split(" ") if " " in label else list(label)
    joiner = " " if " " in label else ""
    lines: list[str] = []
    for word in words:
        candidate = f"{lines[-1]}{joiner}{word}" if lines else word
        if lines and _text_width(candidate) <= width:
            lines[-1] = candidate
        else:
            lines.append(word)
    if len(lines) > LABEL_MAX_LINES:
        lines = [*lines[: LABEL_MAX_LINES - 1], joiner.join(lines[LABEL_MAX_LINES - 1 :])]
    last = lines[-1]
    while len(last) > 1 and _text_width(last) > width:
        last = last[:-2] + "…"
    lines[-1] = last
    return lines


def _value_label(value: float) -> str:
    """A bar's or the axis's value: whole numbers plain, others with two decimals."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def _frame(title: str, body: SafeString, ymax: float, labels: Sequence[str]) -> SafeString:
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    step = plot_w / max(len(labels), 1)
    # Label every n-th category, each broken into lines as wide as its slot: they never
    # overlap (English labels are longer than Chinese ones).
    every = max(1, len(labels) // 10)
    slot = step * every - 4
    x_labels = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="{}" text-anchor="middle"><title>{}</title>{}</text>',
        (
            (
                f"{PAD_LEFT + step * (i + 0.5):.1f}",
                HEIGHT - PAD_BOTTOM + 14,
                LABEL_FONT,
                label,
                format_html_join(
                    "",
                    '<tspan x="{}" dy="{}">{}</tspan>',
                    (
                        (f"{PAD_LEFT + step * (i + 0.5):.1f}", 0 if n == 0 else LABEL_LINE, line)
                        for n, line in enumerate(_label_lines(str(label), slot))
                    ),
                ),
            )
            for i, label in enumerate(labels)
            if i % every == 0
        ),
    )
    axis = format_html(
        '<line x1="{x}" y1="{top}" x2="{x}" y2="{bottom}" stroke="#999"/>'
        '<line x1="{x}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#999"/>'
        '<text x="{tx}" y="{ty_max}" font-size="10" text-anchor="end">{ymax}</text>'
        '<text x="{tx}" y="{bottom}" font-size="10" text-anchor="end">0</text>',
        x=PAD_LEFT,
        top=PAD_TOP,
        bottom=PAD_TOP + plot_h,
        right=WIDTH - PAD_RIGHT,
        tx=PAD_LEFT - 4,
        ty_max=PAD_TOP + 8,
        ymax=_value_label(ymax),
    )
    return format_html(
        '<svg class="rp-chart" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'xmlns="http://www.w3.org/2000/svg"><title>{title}</title>{axis}{body}{labels}</svg>',
        w=WIDTH,
        h=HEIGHT,
        title=title,
        axis=axis,
        body=body,
        labels=x_labels,
    )


def _legend(names: Sequence[str]) -> SafeString:
    return format_html_join(
        "",
        # A class per palette colour (static/audit.css): the CSP forbids inline styles.
        '<span class="rp-legend"><span class="rp-swatch rp-swatch-{}"></span>{}</span>',
        ((i % len(PALETTE), name) for i, name in enumerate(names)),
    )


def bar_chart(
    *, title: str, labels: Sequence[str], series: dict[str, Sequence[float]]
) -> SafeString:
    """Stacked bars, one per label; ``series`` maps a legend name to one value per label."""
    names = list(series)
    totals = [sum(series[name][i] for name in names) for i in range(len(labels))]
    ymax = max([*totals, 1])
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    step = (WIDTH - PAD_LEFT - PAD_RIGHT) / max(len(labels), 1)
    bar_w = max(step * 0.7, 1)
    rects = []
    for i, label in enumerate(labels):
        base = 0.0
        for k, name in enumerate(names):
            value = series[name][i]
            if value <= 0:
                continue
            height = value / ymax * plot_h
            y = PAD_TOP + plot_h - (base + value) / ymax * plot_h
            rects.append(
                (
                    f"{PAD_LEFT + step * i + (step - bar_w) / 2:.1f}",
                    f"{y:.1f}",
                    f"{bar_w:.1f}",
                    f"{height:.1f}",
                    PALETTE[k % len(PALETTE)],
                    f"{label} · {name}: {_value_label(value)}",
                )
            )
            base += value
    body = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>',
        rects,
    )
    chart = _frame(title, body, ymax, labels)
    return format_html(
        '<figure class="rp-figure">{}<figcaption>{}</figcaption></figure>', chart, _legend(names)
    )


def line_chart(
    *,
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[float]],
    ymax: float | None = None,
) -> SafeString:
    """One polyline per series over the labels."""
    names = list(series)
    top = ymax if ymax is not None else max([v for s in series.values() for v in s] + [1])
    top = top or 1
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    step = (WIDTH - PAD_LEFT - PAD_RIGHT) / max(len(labels), 1)
    lines = []
    for k, name in enumerate(names):
        points = " ".join(
            f"{PAD_LEFT + step * (i + 0.5):.1f},{PAD_TOP + plot_h - v / top * plot_h:.1f}"
            for i, v in enumerate(series[name])
        )
        lines.append((points, PALETTE[k % len(PALETTE)], name))
    body = format_html_join(
        "",
        '<polyline points="{}" fill="none" stroke="{}" stroke-width="2"><title>{}</title>'
        "</polyline>",
        lines,
    )
    chart = _frame(title, body, top, labels)
    return format_html(
        '<figure class="rp-figure">{}<figcaption>{}</figcaption></figure>', chart, _legend(names)
    )
