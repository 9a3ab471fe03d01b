"""Tiny server-rendered SVG charts: stacked bars and lines from plain numbers.

Every label and title goes through ``format_html``, so text is always escaped; the
only markup is the SVG this module writes itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

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


def _fmt(value: float) -> str:
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
        ymax=_fmt(ymax),
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
                    f"{label} · {name}: {_fmt(value)}",
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
