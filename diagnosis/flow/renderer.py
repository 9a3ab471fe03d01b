"""Deterministic renderer: writes the answer from the filtered Composer input alone.

Used when the Composer is malformed, fails, or its answer fails the guard. It
only rearranges text that is already in the Composer input, so it passes the
guard by construction. Its own wording goes through gettext (Chinese msgids,
English in ``locale/en``), in the session's language.

A Gatekeeper-accepted direct observation is listed as confirmed whatever the
decision; only a ``bounded`` (reasonable-inference) claim is marked "inferred".
The opening states the answer's one certainty first (``ComposerInput.certainty``:
the badge reads the same decision), then the decision. Each statement carries
one hedge at most: a hedge or verdict the model wrote in front of a hypothesis
(``可能：``, ``根因已确认：``) is dropped, since the section already says it is
unconfirmed; a bounded claim that hedges itself gets no second mark. So the
rendered answer passes the coherence check's wording rules by construction.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from diagnosis.contracts import Certainty, ClaimType, ComposerInput, Decision, Wording
from diagnosis.flow.coherence import HEDGES, statement_hedges_mend
from diagnosis.i18n import language_override

ROOT_TYPES = frozenset({ClaimType.ROOT_CAUSE, ClaimType.CONTRIBUTING_FACTOR})


def _one_line(text: str) -> str:
    # Model text is data: keep it on one line so it cannot open Markdown structure; and
    # one hedge per statement (a second one, or a hedged "confirmed", is dropped)
    return " ".join(statement_hedges_mend(text).split())


_VERDICTS = (*HEDGES, "初步判断", "根因已确认", "已确认", "root cause is confirmed", "confirmed")
_LEAD_VERDICT = re.compile(
    r"^(?:(?:" + "|".join(re.escape(v) for v in _VERDICTS) + r")\s*[:：,，]\s*)+",
    re.IGNORECASE,
)


def _unverdicted(text: str) -> str:
    """A statement without the hedges or verdicts written in front of it."""
    return _LEAD_VERDICT.sub("", _one_line(text)) or _one_line(text)


def _hedged(text: str) -> bool:
    lowered = text.lower()
    return any(h in lowered for h in HEDGES)


def _aside(label: str, text: str) -> str:
    """A labelled note after an item, in the language's brackets; empty without text."""
    return _("（{label}：{text}）").format(label=label, text=_one_line(text)) if text else ""


def _decision_line(decision: Decision) -> str:
    if decision == Decision.PASS:
        return _("已有证据支持以下结论。")
    if decision == Decision.REJECT:
        return _("现有证据无法确认原因，下面只列出确实观察到的现象。")
    return _("证据不足以给出完整的结论：“已确认”中的内容有工具证据，其余内容尚待证实。")


def _certainty_line(certainty: Certainty) -> str:
    if certainty == Certainty.CONFIRMED:
        return _("根因已确认：“已确认”中列出了它和它的工具证据。")
    if certainty == Certainty.INFERRED:
        return _("根因是有证据支持的推断，尚未直接观察到：见“已确认”中标为推断的一条。")
    if certainty == Certainty.HYPOTHESISED:
        return _("根因尚未直接确认；“可能的原因”列出了最可能的方向。")
    return _("根因尚未确定；下方“缺少的信息”列出了能确定它的证据。")


def answer_render(composer_input: ComposerInput) -> str:
    with language_override(composer_input.language):
        return _render(composer_input)


def _render(composer_input: ComposerInput) -> str:
    decision = composer_input.decision
    if decision == Decision.RETRY:  # never final; the router degrades it before this point
        decision = Decision.LOW_CONFID
    certainty = composer_input.certainty()
    lines = [_("**诊断结论**"), "", _certainty_line(certainty), _decision_line(decision), ""]

    lines.append(_("**已确认（有工具证据）**"))
    if composer_input.allowed_claims:
        for claim in composer_input.allowed_claims:
            text = _one_line(claim.text)
            if claim.wording == Wording.BOUNDED:
                text = _unverdicted(text)
                text += "" if _hedged(text) else " " + _("（推断）")
            lines.append(f"- {statement_hedges_mend(text)}")
    else:
        lines.append("- " + _("没有可以确认的结论。"))

    if composer_input.allowed_hypotheses and decision != Decision.REJECT:
        lines += ["", _("**可能的原因（待证实）**")]
        for hypothesis in composer_input.allowed_hypotheses:
            basis = _aside(pgettext("answer aside", "依据"), hypothesis.basis)
            lines.append(f"- {statement_hedges_mend(_unverdicted(hypothesis.text) + basis)}")

    if composer_input.missing_info:
        lines += ["", _("**缺少的信息**")]
        lines += [f"- {_one_line(item)}" for item in composer_input.missing_info]

    if composer_input.recommended_actions:
        lines += ["", _("**建议的下一步**")]
        for action in composer_input.recommended_actions:
            reason = _aside(pgettext("answer aside", "原因"), action.reason)
            lines.append(f"- {statement_hedges_mend(_one_line(action.text) + reason)}")
    return "\n".join(lines).strip() + "\n"
