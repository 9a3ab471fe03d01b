# ruff: noqa: E501 -- wording tables read best one phrase a line
"""Offline Composer: the filtered material as Markdown, using only the input's own text.

Everything it writes is either fixed wording (no digits, no identifiers) or a
field of the Composer input copied unchanged (the conclusion quotes the first
reasons of a hypothesis's basis), so the Composer guard passes. The conclusion
states the cause with its evidence and the cascade; the lists do not repeat them.
"""

from __future__ import annotations

import re

from diagnosis.contracts import AllowedClaim, ComposerInput, ComposerOutput, Decision, Wording

from .common import lang_key

ROOT_TYPES = {"root_cause", "contributing_factor"}
CASCADE_TYPES = {"impact"}
BASIS_PARTS = 3  # the lead quotes the first few reasons of a hypothesis, not all of them
HEDGES = ("可能", "也许", "或许", "疑似", "likely", "may ", "might", "possibly", "probably")

T = {
    "zh": {
        "conclusion": "结论",
        "confirmed": "已确认",
        "inferred": "推断（有证据支持，尚未直接证实）",
        "hypotheses": "可能的原因（待证实）",
        "missing": "缺少的信息",
        "actions": "建议的下一步",
        "lead_root": "根据本次取证，{text}",
        "lead_root_bounded": "初步判断（尚待证实）：{text}",
        "lead_hypothesis": "尚未能直接确认根因，最可能的方向是：{text}",
        "basis_sep": "；",
        "lead_observed": "已观察到以下异常，但现有证据还不足以判断根因。",
        "lead_nothing": "本次取证没有得到可以确认的结论。",
        "lead_low": "证据有限，以下结论置信度较低。",
        "lead_reject": "核验发现部分结论与证据不符，以下只列出直接观察到的事实。",
        "bounded": "可能：{text}",
        "basis": "（依据：{basis}）",
        "reason": "（{reason}）",
        "end": "。",
        "none_missing": "无",
    },
    "en": {
        "conclusion": "Conclusion",
        "confirmed": "Confirmed",
        "inferred": "Inferred (supported, not directly proven)",
        "hypotheses": "Possible causes (unconfirmed)",
        "missing": "Missing information",
        "actions": "Suggested next steps",
        "lead_root": "From this session's evidence: {text}",
        "lead_root_bounded": "Preliminary finding (unconfirmed): {text}",
        "lead_hypothesis": "The root cause is not directly confirmed yet; the most likely direction: {text}",
        "basis_sep": "; ",
        "lead_observed": "The anomalies below were observed, but the evidence is not enough to name a root cause.",
        "lead_nothing": "This session found nothing that could be confirmed.",
        "lead_low": "The evidence is limited; confidence in these findings is low.",
        "lead_reject": "Verification found findings that contradict the evidence; only direct observations are listed.",
        "bounded": "Likely: {text}",
        "basis": " (basis: {basis})",
        "reason": " ({reason})",
        "end": ".",
        "none_missing": "none",
    },
}


def _sentence(text: str, lang: str) -> str:
    text = text.strip()
    if not text:
        return text
    if text[-1] in "。．.！!？?；;":
        return text
    return text + T[lang]["end"]


def _bounded(text: str, lang: str) -> str:
    lowered = text.lower()
    if any(h in lowered for h in HEDGES):
        return text
    return T[lang]["bounded"].format(text=text)


def _claim_text(claim: AllowedClaim, lang: str) -> str:
    text = _sentence(claim.text, lang)
    return _bounded(text, lang) if claim.wording == Wording.BOUNDED else text


def _lead_claims(ci: ComposerInput) -> list[AllowedClaim]:
    """The claims the conclusion states: the best-supported cause, and the cascade."""
    lead: list[AllowedClaim] = []
    roots = [c for c in ci.allowed_claims if c.claim_type in ROOT_TYPES]
    if roots:
        lead.append(sorted(roots, key=lambda c: c.wording != Wording.DEFINITE)[0])
    lead += [c for c in ci.allowed_claims if c.claim_type in CASCADE_TYPES][:1]
    return lead


def _stated(claim: AllowedClaim, lang: str, firm: bool) -> str:
    """A claim as a sentence, worded as a possibility unless it and the decision are firm."""
    text = _sentence(claim.text, lang)
    return text if firm and claim.wording == Wording.DEFINITE else _bounded(text, lang)


def _hypothesis_lead(ci: ComposerInput, lang: str) -> str:
    t = T[lang]
    hypothesis = ci.allowed_hypotheses[0]
    text = hypothesis.text.strip().rstrip("。．.")
    reasons = [r for r in re.split(r"[；;]\s*", hypothesis.basis.strip()) if r]
    if reasons:
        basis = t["basis_sep"].join(reasons[:BASIS_PARTS])
        text += t["basis"].format(basis=basis)
    return t["lead_hypothesis"].format(text=_sentence(text, lang))


def _lead(ci: ComposerInput, lang: str) -> str:
    """One or two sentences: the cause with its decisive evidence, then how it spread."""
    t = T[lang]
    firm = ci.decision == Decision.PASS
    roots = [c for c in _lead_claims(ci) if c.claim_type in ROOT_TYPES]
    cascades = [c for c in _lead_claims(ci) if c.claim_type in CASCADE_TYPES]
    parts: list[str] = []
    if ci.decision == Decision.REJECT:
        parts.append(t["lead_reject"])
    if roots:
        root = roots[0]
        if firm and root.wording == Wording.DEFINITE:
            parts.append(t["lead_root"].format(text=_sentence(root.text, lang)))
        else:
            parts.append(
                t["lead_root_bounded"].format(text=_bounded(_sentence(root.text, lang), lang))
            )
    elif ci.allowed_hypotheses and ci.decision != Decision.REJECT:
        parts.append(_hypothesis_lead(ci, lang))
    elif ci.allowed_claims:
        parts.append(t["lead_observed"])
    else:
        parts.append(t["lead_nothing"])
    parts += [_stated(c, lang, firm) for c in cascades]
    if ci.decision == Decision.LOW_CONFID:
        parts.append(t["lead_low"])
    return ("" if lang == "zh" else " ").join(parts)


def answer_compose(ci: ComposerInput) -> str:
    lang = lang_key(ci.language)
    t = T[lang]
    sections: list[str] = [f"**{t['conclusion']}**\n\n{_lead(ci, lang)}"]

    # What the conclusion already says is not listed again.
    stated = {c.claim_id for c in _lead_claims(ci)}
    rest = [c for c in ci.allowed_claims if c.claim_id not in stated]
    definite = [c for c in rest if c.wording == Wording.DEFINITE]
    bounded = [c for c in rest if c.wording != Wording.DEFINITE]
    definite.sort(key=lambda c: c.claim_type not in ROOT_TYPES)
    if definite:
        items = "\n".join(f"- {_claim_text(c, lang)}" for c in definite)
        sections.append(f"**{t['confirmed']}**\n\n{items}")
    if bounded:
        items = "\n".join(f"- {_claim_text(c, lang)}" for c in bounded)
        sections.append(f"**{t['inferred']}**\n\n{items}")
    if ci.allowed_hypotheses and ci.decision != Decision.REJECT:
        lines = []
        for hypothesis in ci.allowed_hypotheses:
            line = _sentence(hypothesis.text, lang)
            if hypothesis.basis.strip():
                line += t["basis"].format(basis=hypothesis.basis.strip())
            lines.append(f"- {line}")
        sections.append(f"**{t['hypotheses']}**\n\n" + "\n".join(lines))
    if ci.missing_info:
        items = "\n".join(f"- {_sentence(m, lang)}" for m in ci.missing_info if m.strip())
        sections.append(f"**{t['missing']}**\n\n{items}")
    if ci.recommended_actions:
        lines = []
        for action in ci.recommended_actions:
            line = action.text.strip()
            if action.reason.strip():
                line += t["reason"].format(reason=action.reason.strip())
            lines.append(f"- {_sentence(line, lang)}")
        sections.append(f"**{t['actions']}**\n\n" + "\n".join(lines))
    return "\n\n".join(sections) + "\n"


def compose_run(ci: ComposerInput) -> ComposerOutput:
    return ComposerOutput(final_answer=answer_compose(ci))
