"""Deterministic renderer: writes the answer from the filtered Composer input alone.

Used when the Composer is malformed, fails, or its answer fails the guard. It
only rearranges text that is already in the Composer input, so it passes the
guard by construction.
"""

from __future__ import annotations

from diagnosis.contracts import ComposerInput, Decision, Wording

_TEXT = {
    "zh": {
        "title": "**诊断结论**",
        Decision.PASS: "已有证据支持以下结论。",
        Decision.LOW_CONFID: "证据不足以给出确定结论，以下内容置信度较低，请结合现场情况判断。",
        Decision.REJECT: "现有证据无法确认原因，下面只列出确实观察到的现象。",
        "confirmed": "**已确认（有工具证据）**",
        "bounded": "（推断，可能）",
        "hypotheses": "**可能的原因（待证实）**",
        "basis": "依据",
        "missing": "**缺少的信息**",
        "actions": "**建议的下一步**",
        "reason": "原因",
        "none_confirmed": "没有可以确认的结论。",
        "aside": "（{label}：{text}）",
    },
    "en": {
        "title": "**Diagnosis**",
        Decision.PASS: "The evidence supports the following.",
        Decision.LOW_CONFID: "The evidence is not enough for a firm conclusion; treat the "
        "following with caution.",
        Decision.REJECT: "The evidence cannot confirm a cause; only what was actually observed "
        "is listed.",
        "confirmed": "**Confirmed (with tool evidence)**",
        "bounded": "(inferred, likely)",
        "hypotheses": "**Possible causes (not confirmed)**",
        "basis": "basis",
        "missing": "**Missing information**",
        "actions": "**Suggested next steps**",
        "reason": "why",
        "none_confirmed": "Nothing could be confirmed.",
        "aside": " ({label}: {text})",
    },
}


def language_key(language: str) -> str:
    return "en" if language.lower().startswith("en") else "zh"


def _one_line(text: str) -> str:
    # Model text is data: keep it on one line so it cannot open Markdown structure.
    return " ".join(text.split())


def _aside(t: dict, label: str, text: str) -> str:
    """A labelled note after an item, in the language's brackets; empty without text."""
    return t["aside"].format(label=t[label], text=_one_line(text)) if text else ""


def answer_render(composer_input: ComposerInput) -> str:
    t = _TEXT[language_key(composer_input.language)]
    decision = composer_input.decision
    if decision == Decision.RETRY:  # never final; the router degrades it before this point
        decision = Decision.LOW_CONFID
    lines = [t["title"], "", t[decision], ""]

    lines.append(t["confirmed"])
    if composer_input.allowed_claims:
        for claim in composer_input.allowed_claims:
            suffix = f" {t['bounded']}" if claim.wording == Wording.BOUNDED else ""
            lines.append(f"- {_one_line(claim.text)}{suffix}")
    else:
        lines.append(f"- {t['none_confirmed']}")

    if composer_input.allowed_hypotheses:
        lines += ["", t["hypotheses"]]
        for hypothesis in composer_input.allowed_hypotheses:
            basis = _aside(t, "basis", hypothesis.basis)
            lines.append(f"- {_one_line(hypothesis.text)}{basis}")

    if composer_input.missing_info:
        lines += ["", t["missing"]]
        lines += [f"- {_one_line(item)}" for item in composer_input.missing_info]

    if composer_input.recommended_actions:
        lines += ["", t["actions"]]
        for action in composer_input.recommended_actions:
            reason = _aside(t, "reason", action.reason)
            lines.append(f"- {_one_line(action.text)}{reason}")
    return "\n".join(lines).strip() + "\n"
