"""Template helpers for the audit pages; every value they return is escaped by the template."""

from __future__ import annotations

from collections.abc import Mapping

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from audit.models import Review
from audit.selectors import pretty_json
from chat.templatetags.chat_tags import CLASSIFICATION_LABELS, FINDING_LABELS, PLACEMENT_LABELS
from diagnosis.models import DiagnosisSession

register = template.Library()

# Labels of the technical codes reviewers see. Those the chat shows too come from the
# chat's lists; only the codes the chat never shows are named here.
VERDICT_LABELS = {"accepted": _("通过"), "demoted": _("降级")}

PARSE_STATUS_LABELS = {
    "parsed_v2": _("已解析"),
    "parsed_v1": _("已解析（旧格式 v1）"),
    "empty": _("输出为空"),
    "invalid_json": _("输出中没有 JSON"),
    "not_an_object": _("JSON 不是对象"),
    "schema_invalid": _("结构不符合约定"),
    "truncated": _("输出被截断（达到 max_tokens 上限，对象不完整）"),
}

DECISION_LABELS = {**dict(DiagnosisSession.Decision.choices), "RETRY": _("要求重试")}

CODE_LABELS: dict[str, Mapping[str, object]] = {
    "verdict": VERDICT_LABELS,
    "classification": CLASSIFICATION_LABELS,
    "placement": PLACEMENT_LABELS,
    "parse_status": PARSE_STATUS_LABELS,
    "finding": FINDING_LABELS,
    "decision": DECISION_LABELS,
}


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


@register.filter
def code_label(code: object, kind: str) -> SafeString | str:
    """A readable label for a technical code, with the code itself kept for reviewers.

    ``kind`` names the list (verdict, classification, placement, parse_status, finding,
    decision); an unknown code is shown as it is.
    """
    if code is None or code == "":
        return "—"
    label = CODE_LABELS[kind].get(str(code))
    if label is None:
        return format_html('<code class="rp-code">{}</code>', code)
    return format_html(
        '<span class="rp-label" title="{}">{}</span> '
        '<small><code class="rp-code">{}</code></small>',
        code,
        label,
        code,
    )
