"""A query_traces output on the evidence pages: one trace as a span waterfall (each span's
bar, its own time darker inside it, the slowest path and the quoted span marked) and, for
the fleet and service views, the call-edge table with the quoted row marked.

``{% trace_views binding %}`` takes a binding resolved to its invocation (the chat's
evidence panel and the audit page both have one) and renders nothing for other tools.
Drawn as SVG attributes, not inline styles, so the pages' CSP holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.utils.translation import gettext as _

register = template.Library()

ROW_H = 18
LABEL_W = 260
BAR_W = 420
MAX_ROWS = 80
MAX_EDGES = 12


@dataclass(frozen=True)
class SpanRow:
    y: int
    text_y: int
    indent: int
    label: str
    bar_x: float
    bar_w: float
    self_w: float
    duration: str
    own: str
    slowest: bool
    error: bool
    marked: bool


@dataclass(frozen=True)
class EdgeRow:
    caller: str
    callee: str
    calls: int
    calls_baseline: int
    errors: str
    errors_baseline: str
    p50: str
    p50_baseline: str
    change: str
    marked: bool


@dataclass(frozen=True)
class TracePage:
    view: str  # trace | fleet | service
    spans: tuple[SpanRow, ...] = ()
    edges: tuple[EdgeRow, ...] = ()
    width: int = LABEL_W + BAR_W + 110
    height: int = 0
    trace_id: str = ""


def _ms(value: Any) -> str:
    return f"{value:g} ms" if isinstance(value, int | float) else "—"


def _share(value: Any) -> str:
    return f"{value * 100:.3g}%" if isinstance(value, int | float) else "—"


def _quoted(line: Any, excerpt: str) -> bool:
    text = str(line or "")
    return bool(excerpt.strip()) and bool(text) and (excerpt in text or text in excerpt)


def _spans(summary: dict[str, Any], excerpt: str) -> tuple[tuple[SpanRow, ...], int]:
    items = [s for s in summary.get("spans") or [] if isinstance(s, dict)][:MAX_ROWS]
    total = max(
        (float(s.get("offset_ms") or 0) + float(s.get("duration_ms") or 0) for s in items),
        default=0.0,
    )
    scale = BAR_W / total if total > 0 else 0.0
    rows = []
    for index, item in enumerate(items):
        offset, duration = float(item.get("offset_ms") or 0), float(item.get("duration_ms") or 0)
        own = float(item.get("self_ms") or 0)
        y = 4 + index * ROW_H
        rows.append(
            SpanRow(
                y=y,
                text_y=y + 12,
                indent=4 + 10 * min(int(item.get("depth") or 0), 16),
                label=f"{item.get('service', '')} {item.get('name', '')}".strip()[:48],
                bar_x=LABEL_W + offset * scale,
                bar_w=max(duration * scale, 1.0),
                self_w=max(min(own, duration) * scale, 0.5),
                duration=_ms(item.get("duration_ms")),
                own=_ms(item.get("self_ms")),
                slowest=bool(item.get("slowest_path")),
                error=bool(item.get("error")),
                marked=_quoted(item.get("line"), excerpt),
            )
        )
    return tuple(rows), 8 + len(rows) * ROW_H


def _edges(summary: dict[str, Any], excerpt: str) -> tuple[EdgeRow, ...]:
    rows = []
    for item in [e for e in summary.get("edges") or [] if isinstance(e, dict)][:MAX_EDGES]:
        measure = {"self": _("自身耗时"), "errors": _("错误占比"), "latency": _("延迟")}
        direction = {"up": _("上升"), "down": _("下降")}.get(str(item.get("direction")), "")
        change = measure.get(str(item.get("change") or ""), "")
        rows.append(
            EdgeRow(
                caller=str(item.get("caller") or ""),
                callee=str(item.get("callee") or ""),
                calls=int(item.get("requests_window") or 0),
                calls_baseline=int(item.get("requests_baseline") or 0),
                errors=_share(item.get("error_share_window")),
                errors_baseline=_share(item.get("error_share_baseline")),
                p50=_ms(item.get("p50_ms_window")),
                p50_baseline=_ms(item.get("p50_ms_baseline")),
                change=f"{change} {direction}".strip() if change else "",
                marked=_quoted(item.get("line"), excerpt),
            )
        )
    return tuple(rows)


def trace_page(*, summary: dict[str, Any], excerpt: str) -> TracePage | None:
    """What the page draws of one query_traces summary; None when it has nothing to draw."""
    view = str(summary.get("view") or "")
    if view == "trace":
        spans, height = _spans(summary, excerpt)
        if not spans:
            return None
        return TracePage(
            view=view, spans=spans, height=height, trace_id=str(summary.get("trace_id") or "")
        )
    if view in {"fleet", "service"}:
        edges = _edges(summary, excerpt)
        return TracePage(view=view, edges=edges) if edges else None
    return None


@register.inclusion_tag("traces/trace_views.html")
def trace_views(binding: Any) -> dict[str, Any]:
    invocation = getattr(binding, "invocation", None)
    if invocation is None or invocation.tool_name != "query_traces":
        return {"page": None}
    summary = invocation.summary if isinstance(invocation.summary, dict) else {}
    return {"page": trace_page(summary=summary, excerpt=str(getattr(binding, "excerpt", "")))}
