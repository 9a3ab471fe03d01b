"""Deterministic renderer: writes the answer from the filtered Composer input alone.

Used when the Composer is malformed, fails, or its answer fails the guard. It
only rearranges text that is already in the Composer input, so it passes the
guard by construction. Its own wording goes through gettext (Chinese msgids,
English in ``locale/en``), in the session's language.

A Gatekeeper-accepted direct observation is listed as confirmed whatever the
decision; only a ``bounded`` (reasonable-inference) claim is marked "likely".
The opening states the decision and, when neither a root-cause claim nor an
Executor hypothesis with a basis stands, that the root cause is undetermined.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from diagnosis.contracts import ClaimType, ComposerInput, Decision, Wording
from diagnosis.i18n import language_override

ROOT_TYPES = frozenset({ClaimType.ROOT_CAUSE, ClaimType.CONTRIBUTING_FACTOR})


def _one_line(text: str) -> str:
    # Model text is data: keep it on one line so it cannot open Markdown structure.
    return " ".join(text.split())


def _aside(label: str, text: str) -> str:
    """A labelled note after an item, in the language's brackets; empty without text."""
    return _("（{label}：{text}）").format(label=label, text=_one_line(text)) if text else ""


def _decision_line(decision: Decision) -> str:
    if decision == Decision.PASS:
        return _("已有证据支持以下结论。")
    if decision == Decision.REJECT:
        return _("现有证据无法确认原因，下面只列出确实观察到的现象。")
    return _("证据不足以给出完整的结论：“已确认”中的内容有工具证据，其余内容尚待证实。")


def root_cause_determined(composer_input: ComposerInput) -> bool:
    """A root-cause claim is allowed, or an Executor hypothesis with a basis may lead."""
    if any(c.claim_type in ROOT_TYPES for c in composer_input.allowed_claims):
        return True
    return composer_input.decision != Decision.REJECT and any(
        h.claim_id is None and h.basis.strip() for h in composer_input.allowed_hypotheses
    )


def answer_render(composer_input: ComposerInput) -> str:
    with language_override(composer_input.language):
        return _render(composer_input)


def _render(composer_input: ComposerInput) -> str:
    decision = composer_input.decision
    if decision == Decision.RETRY:  # never final; the router degrades it before this point
        decision = Decision.LOW_CONFID
    lines = [_("**诊断结论**"), "", _decision_line(decision)]
    if not root_cause_determined(composer_input):
        lines.append(_("根因尚未确定；下方“缺少的信息”列出了能确定它的证据。"))
    lines.append("")

    lines.append(_("**已确认（有工具证据）**"))
    if composer_input.allowed_claims:
        for claim in composer_input.allowed_claims:
            suffix = " " + _("（推断，可能）") if claim.wording == Wording.BOUNDED else ""
            lines.append(f"- {_one_line(claim.text)}{suffix}")
    else:
        lines.append("- " + _("没有可以确认的结论。"))

    if composer_input.allowed_hypotheses and decision != Decision.REJECT:
        lines += ["", _("**可能的原因（待证实）**")]
        for hypothesis in composer_input.allowed_hypotheses:
            basis = _aside(pgettext("answer aside", "依据"), hypothesis.basis)
            lines.append(f"- {_one_line(hypothesis.text)}{basis}")

    if composer_input.missing_info:
        lines += ["", _("**缺少的信息**")]
        lines += [f"- {_one_line(item)}" for item in composer_input.missing_info]

    if composer_input.recommended_actions:
        lines += ["", _("**建议的下一步**")]
        for action in composer_input.recommended_actions:
            reason = _aside(pgettext("answer aside", "原因"), action.reason)
            lines.append(f"- {_one_line(action.text)}{reason}")
    return "\n".join(lines).strip() + "\n"
