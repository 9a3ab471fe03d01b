"""Offline Composer: the filtered material as Markdown, using only the input's own text.

Everything it writes is either fixed wording (gettext; no digits, no
identifiers) or a field of the Composer input copied unchanged, so the
Composer guard passes.

The conclusion is built from allowed claims and from the Executor's own
hypotheses that carry a basis (``claim_id`` unset), never from a claim the
Verifier found overstated and never from a missing-info line. With neither a
root-cause claim nor such a hypothesis it says that the root cause is
undetermined and where the evidence that would settle it is listed. A
Gatekeeper-accepted direct observation is stated as confirmed whatever the
decision; only a ``bounded`` claim (a reasonable inference) is worded "likely".
"""

from __future__ import annotations

import re

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from diagnosis.contracts import (
    AllowedClaim,
    AllowedHypothesis,
    ComposerInput,
    ComposerOutput,
    Decision,
    Wording,
)
from diagnosis.i18n import language_override

from .common import lang_key

ROOT_TYPES = {"root_cause", "contributing_factor"}
CASCADE_TYPES = {"impact"}
BASIS_PARTS = 3  # the lead quotes the first few reasons of a hypothesis, not all of them
HEDGES = ("可能", "也许", "或许", "疑似", "likely", "may ", "might", "possibly", "probably")


# a verdict or hedge written in front of a statement ("可能：", "根因已确认：", "Likely:"):
# the composer's own opening says how certain the statement is, once
_VERDICTS = (*HEDGES, "尚待证实", "初步判断", "根因已确认", "已确认", "root cause is confirmed")
_LEAD_VERDICT = re.compile(
    r"^(?:(?:" + "|".join(re.escape(v.strip()) for v in _VERDICTS) + r")\s*[:：,，]\s*)+",
    re.IGNORECASE,
)


def _unverdicted(text: str) -> str:
    """``text`` without the hedges and verdicts written in front of it (the statement's one
    hedge is the composer's, put there by its caller)."""
    return _LEAD_VERDICT.sub("", text.strip()) or text.strip()


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    if text[-1] in "。．.！!？?；;":
        return text
    return text + _("。")


def _bounded(text: str) -> str:
    """One hedge on a statement: its own when it hedges itself, else "可能：" in front."""
    text = _unverdicted(text)
    lowered = text.lower()
    if any(h in lowered for h in HEDGES):
        return text
    return _("可能：{text}").format(text=text)


def _claim_text(claim: AllowedClaim) -> str:
    text = _sentence(claim.text)
    return _bounded(text) if claim.wording == Wording.BOUNDED else text


def _lead_claims(ci: ComposerInput) -> list[AllowedClaim]:
    """The claims the conclusion states: the best-supported cause, and the cascade."""
    lead: list[AllowedClaim] = []
    roots = [c for c in ci.allowed_claims if c.claim_type in ROOT_TYPES]
    if roots:
        lead.append(sorted(roots, key=lambda c: c.wording != Wording.DEFINITE)[0])
    lead += [c for c in ci.allowed_claims if c.claim_type in CASCADE_TYPES][:1]
    return lead


def _leading_hypothesis(ci: ComposerInput) -> AllowedHypothesis | None:
    """The first of the Executor's own hypotheses that carries a basis, if any."""
    if ci.decision == Decision.REJECT:
        return None
    for hypothesis in ci.allowed_hypotheses:
        if hypothesis.claim_id is None and hypothesis.basis.strip():
            return hypothesis
    return None


def _hypothesis_lead(hypothesis: AllowedHypothesis) -> str:
    text = _unverdicted(hypothesis.text).rstrip("。．.")
    reasons = [r for r in re.split(r"[；;]\s*", hypothesis.basis.strip()) if r]
    if reasons:
        basis = _("；").join(reasons[:BASIS_PARTS])
        text += _("（依据：{basis}）").format(basis=basis)
    return _("尚未能直接确认根因，最可能的方向是：{text}").format(text=_sentence(text))


def _lead(ci: ComposerInput, lang: str) -> str:
    """One or two sentences: the cause with its decisive evidence, then how it spread."""
    roots = [c for c in _lead_claims(ci) if c.claim_type in ROOT_TYPES]
    cascades = [c for c in _lead_claims(ci) if c.claim_type in CASCADE_TYPES]
    parts: list[str] = []
    if ci.decision == Decision.REJECT:
        parts.append(_("核验发现部分结论与证据不符，以下只列出直接观察到的事实。"))
    hypothesis = _leading_hypothesis(ci)
    if roots:
        root = roots[0]
        if root.wording == Wording.DEFINITE:
            parts.append(_("根据本次取证，{text}").format(text=_sentence(root.text)))
        else:
            # one hedge per statement: the opening already says it is unconfirmed
            text = _sentence(_unverdicted(root.text))
            parts.append(_("初步判断（尚待证实）：{text}").format(text=text))
    elif hypothesis is not None:
        parts.append(_hypothesis_lead(hypothesis))
    else:
        if ci.allowed_claims:
            parts.append(_("已观察到以下异常，但现有证据还不足以判断根因。"))
        else:
            parts.append(_("本次取证没有得到可以确认的结论。"))
        parts.append(_("根因尚未确定；下方“缺少的信息”列出了能确定它的证据。"))
    parts += [_claim_text(c) for c in cascades]
    if ci.decision == Decision.LOW_CONFID:
        parts.append(_("“已确认”之外的内容尚待证实。"))
    return ("" if lang == "zh" else " ").join(parts)


def answer_compose(ci: ComposerInput) -> str:
    lang = lang_key(ci.language)
    with language_override(lang):
        return _compose(ci, lang)


def _section(title: str, body: str) -> str:
    """A titled section of the answer (the title through gettext at the call, so message
    extraction sees it)."""
    return f"**{title}**\n\n{body}"


def _compose(ci: ComposerInput, lang: str) -> str:
    sections: list[str] = [_section(pgettext("answer section", "结论"), _lead(ci, lang))]

    # What the conclusion already says is not listed again.
    stated = {c.claim_id for c in _lead_claims(ci)}
    rest = [c for c in ci.allowed_claims if c.claim_id not in stated]
    definite = [c for c in rest if c.wording == Wording.DEFINITE]
    bounded = [c for c in rest if c.wording != Wording.DEFINITE]
    definite.sort(key=lambda c: c.claim_type not in ROOT_TYPES)
    if definite:
        items = "\n".join(f"- {_claim_text(c)}" for c in definite)
        sections.append(_section(_("已确认"), items))
    if bounded:
        items = "\n".join(f"- {_claim_text(c)}" for c in bounded)
        sections.append(_section(_("推断（有证据支持，尚未直接证实）"), items))
    if ci.allowed_hypotheses and ci.decision != Decision.REJECT:
        lines = []
        for hypothesis in ci.allowed_hypotheses:
            line = _sentence(_unverdicted(hypothesis.text))
            if hypothesis.claim_id is not None:
                line = _bounded(line)  # a claim that said more than its evidence
            if hypothesis.basis.strip():
                line += _("（依据：{basis}）").format(basis=hypothesis.basis.strip())
            lines.append(f"- {line}")
        sections.append(_section(_("可能的原因（待证实）"), "\n".join(lines)))
    if ci.missing_info:
        items = "\n".join(f"- {_sentence(m)}" for m in ci.missing_info if m.strip())
        sections.append(_section(_("缺少的信息"), items))
    if ci.recommended_actions:
        lines = []
        for action in ci.recommended_actions:
            line = action.text.strip()
            if action.reason.strip():
                line += _("（{reason}）").format(reason=action.reason.strip())
            lines.append(f"- {_sentence(line)}")
        sections.append(_section(_("建议的下一步"), "\n".join(lines)))
    return "\n\n".join(sections) + "\n"


def compose_run(ci: ComposerInput) -> ComposerOutput:
    return ComposerOutput(final_answer=answer_compose(ci))
