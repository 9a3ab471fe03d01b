"""Template helpers for the audit pages; every value they return is escaped by the template."""

from __future__ import annotations

from django import template

from audit.models import Review
from audit.selectors import pretty_json

register = template.Library()


@register.filter
def as_json(value: object) -> str:
    """Indented JSON text (a plain string: autoescaping still applies)."""
    return pretty_json(value)


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


@register.filter
def review_verdict_label(value: str) -> str:
    return str(dict(Review.Verdict.choices).get(value, value))


@register.filter
def get_item(mapping: dict, key: str):
    return mapping.get(key) if isinstance(mapping, dict) else None
