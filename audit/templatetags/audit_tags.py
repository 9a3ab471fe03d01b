"""Template helpers for the audit pages; every value they return is escaped by the template."""

from __future__ import annotations

import json
from collections.abc import Mapping

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from audit.models import Review
from audit.selectors import pretty_json
from chat.templatetags.chat_tags import (
    CLASSIFICATION_LABELS,
    FINDING_LABELS,
    PLACEMENT_LABELS,
    TOOL_STATUS_LABELS,
    coded_text,
)
from diagnosis.contracts import VerifierEvaluation
from diagnosis.models import DiagnosisSession, LLMCall
from diagnosis.wording import (
    GUARD_FINDING_WORDS,
    PARSE_STATUS_WORDS,
    ROUTE_NOTES,
    evidence_in_sentence,
)

register = template.Library()
register.filter("evidence_in_sentence", evidence_in_sentence)

# Labels of the technical codes reviewers see. Those the chat shows too come from the
# chat's lists; only the codes the chat never shows are named here.
VERDICT_LABELS = {"accepted": _("通过"), "demoted": _("降级")}

# Findings of a whole report that the chat (which shows claims) never shows.
REPORT_FINDING_LABELS = {
    **FINDING_LABELS,
    "unusable_output": _("输出无法使用"),
    "unknown_answer_version": _("未知的回答版本"),
}

# How a stage's model output ended (Planner, Verifier, Composer): the model call's status,
# else how its output parsed, else the Composer's own outcomes.
STAGE_STATUS_LABELS = {
    **PARSE_STATUS_WORDS,
    **dict(LLMCall.Status.choices),
    "malformed": _("输出格式错误"),
    "guard_failed": _("未通过守卫检查"),
}

DECISION_LABELS = {**dict(DiagnosisSession.Decision.choices), "RETRY": _("要求重试")}

CLAIM_TYPE_LABELS = {
    "symptom": _("症状"),
    "root_cause": _("根因"),
    "contributing_factor": _("促成因素"),
    "impact": _("影响"),
    "timeline": _("时间线"),
    "configuration": _("配置"),
    "other": _("其他"),
}

SUPPORT_LEVEL_LABELS = {
    "direct": _("直接支持"),
    "indirect": _("间接支持"),
    "none": _("无支持"),
}

CERTAINTY_LABELS = {
    "confirmed": _("根因已确认"),
    "inferred": _("根因为推断"),
    "hypothesised": _("根因仅为假设"),
    "undetermined": _("根因未确定"),
}

COHERENCE_LABELS = {
    "badge_conclusion_mismatch": _("标记与结论不一致"),
    "stacked_hedges": _("一句话里叠了两层保留语气"),
    "hedged_confirmation": _("保留语气与“已确认”并用"),
    "series_two_figures": _("同一序列给出两个不同的倍数"),
    "peak_before_onset": _("所述最大值早于变化开始"),
    "kind_without_evidence": _("根因类别没有对应的证据"),
}

CODE_LABELS: dict[str, Mapping[str, object]] = {
    "verdict": VERDICT_LABELS,
    "classification": CLASSIFICATION_LABELS,
    "placement": PLACEMENT_LABELS,
    "parse_status": PARSE_STATUS_WORDS,
    "finding": REPORT_FINDING_LABELS,
    "decision": DECISION_LABELS,
    "claim_type": CLAIM_TYPE_LABELS,
    "support_level": SUPPORT_LEVEL_LABELS,
    "tool_status": TOOL_STATUS_LABELS,
    "stage_status": STAGE_STATUS_LABELS,
    "certainty": CERTAINTY_LABELS,
    "coherence": COHERENCE_LABELS,
}


@register.filter
def as_json(value: object) -> str:
    """Indented JSON text (a plain string: autoescaping still applies)."""
    return pretty_json(value)


@register.filter
def percent(value: float | None) -> str:
    """A share as people read it: one decimal, never "100%" or "0%" for a part of the whole."""
    if value is None:
        return "—"
    if 0 < value < 0.001:
        return "<0.1%"
    if 0.999 < value < 1:
        return ">99.9%"
    return f"{value * 100:.1f}%"


@register.filter
def share(part: int | None, whole: int | None) -> str:
    """``part`` of ``whole`` as a percentage (see ``percent``)."""
    return percent(part / whole) if part is not None and whole else "—"


@register.filter
def intcomma_plain(value: int | None) -> str:
    """A count with thousands separators (12,345), the same in every language."""
    return "—" if value is None else f"{value:,}"


@register.filter
def pretty_text(value: object) -> str:
    """Text a model wrote, indented when it is JSON so it reads line by line."""
    text = str(value or "")
    try:
        return pretty_json(json.loads(text))
    except ValueError:
        return text


@register.filter
def review_verdict_label(value: str) -> str:
    return str(dict(Review.Verdict.choices).get(value, value))


@register.filter
def get_item(mapping: object, key: str) -> object:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def code_label(code: object, kind: str) -> SafeString | str:
    """A readable label for a technical code, with the code itself kept for reviewers.

    ``kind`` names the list (verdict, classification, placement, parse_status, finding,
    decision, claim_type, support_level, tool_status, stage_status); an unknown code is
    shown as it is.
    """
    if code is None or code == "":
        return "—"
    label = CODE_LABELS[kind].get(str(code))
    if label is None:
        return format_html('<code class="rp-code">{}</code>', code)
    # The label is what a reviewer reads; the code stays at hand in the tooltip.
    return format_html('<span class="rp-label" title="{}">{}</span>', code, label)


@register.filter
def route_notes_worded(evaluation: VerifierEvaluation | None) -> list[tuple[str, str]]:
    """Each routing note as ``(worded, recorded)``: ``worded`` in the page's language when
    the note was stored with its code (``route_note_codes``, same position), else ""."""
    if evaluation is None:
        return []
    notes = []
    for recorded, code in evaluation.route_notes_coded():
        worded = ""
        if code is not None:
            worded = coded_text(
                ROUTE_NOTES, code.code, code.params, {"status": STAGE_STATUS_LABELS}
            )
        notes.append((worded, recorded))
    return notes


@register.filter
def guard_finding(finding: object) -> SafeString | str:
    """A Composer guard finding worded for a reviewer, the stored finding in the tooltip.

    The Composer also records why its answer was not used as ``<status>: <detail>`` (it
    did not parse, the model call failed): that reads as the status's label.
    """
    text = str(finding)
    code, _sep, value = text.partition(":")
    message = GUARD_FINDING_WORDS.get(code)
    if message is not None:
        worded = str(message) % {"value": value}
    elif code in STAGE_STATUS_LABELS:
        worded = str(STAGE_STATUS_LABELS[code])
    else:
        return format_html('<code class="rp-code">{}</code>', text)
    return format_html('<span class="rp-label" title="{}">{}</span>', text, worded)
