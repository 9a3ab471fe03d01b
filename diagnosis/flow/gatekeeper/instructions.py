# ruff: noqa: E501 -- one pattern a line reads best
"""Excerpts that read as instructions, not evidence (``excerpt_is_instruction``).

Tool output is data. A log line or a runbook paragraph that talks *to the
model or the pipeline* — addresses it, tells it what to do with its
instructions, or sets a verdict — is what a prompt injection looks like, and
it cannot confirm a claim, however verbatim it is.

One small pattern set, on normalised text (``diagnosis.facts.text_normalize``:
lower case, quotes as ``"``, no spaces next to CJK characters), in three
families:

1. a chat-role marker or chat-template token opening the text (``system:``,
   ``assistant:``, ``<|im_start|>``, ``[INST]``, ``<<SYS>>``);
2. an imperative address to the model: ignore / disregard / forget /
   override the previous (or above, all, earlier, your) instructions or
   prompt; "you are now …", "act as …", "new instructions";
3. a verdict-setting phrase: mark / classify / treat / report / flag this as
   confirmed, verified, accepted, passed, root cause; "the root cause
   is"; a verdict field set in the text (``"decision": "pass"``,
   ``classification = direct_observation``).

Each family has its Chinese form; the "ignore the instructions" family also
has the common forms of Japanese, Korean, Spanish, French, German and Russian.
Ordinary log words ("system", "ignored", "marked") do not match on their own:
every pattern needs the address or the verdict in it.
"""

from __future__ import annotations

import re

_VERDICT_EN = r"(?:confirmed|verified|accepted|passed|pass|direct[ _]observation|root[ -]cause)"
_VERDICT_ZH = r"(?:已确认|已证实|真实|有效|通过|根因|根本原因|直接观察|可信)"
_TARGET_EN = r"(?:instructions?|prompts?|guidelines|directions|system message)"

_PATTERNS = (
    # 1. chat roles and template tokens
    r"^\W{0,4}(?:system|assistant|developer)\s*:",
    r"<\|(?:im_start|im_end|system|assistant|user|endoftext)\|>",
    r"\[/?inst\]|<<\s*/?sys\s*>>",
    r"^\W{0,4}(?:系统|助手|系统提示)[:：]",
    # 2. imperative address to the model
    rf"\b(?:ignore|disregard|forget|override|bypass)\b(?:\W+\w+){{0,4}}?\W+{_TARGET_EN}\b",
    r"\byou are now\b|\bact as (?:an?|the) \w+|\bnew instructions\b|\bas an ai\b",
    r"\b(?:ai|llm|language model|assistant)\s*(?:,|:)?\s*(?:must|should|please)\b",
    r"(?:忽略|无视|忘记|忽视|跳过)(?:之前|以上|上面|上述|前面|先前|所有|全部|你的)?的?(?:所有|全部)?(?:指令|指示|提示词|设定)",
    r"你现在是|你是一个(?:ai|助手|模型)|作为(?:ai|人工智能|语言模型)|新的?指令[:：]",
    r"指示を無視|지시를\s*무시|ignora (?:las|todas las) instrucciones|ignorez? (?:les|toutes les) instructions",
    r"ignoriere (?:alle |die )?(?:vorherigen |obigen )?anweisungen|игнорируй(?:те)? (?:все |предыдущие )?инструкции",
    # 3. setting a verdict
    rf"\b(?:mark|classify|treat|report|flag|label|record|consider|accept)\b(?:\W+\w+){{0,3}}?\W+as\W+(?:an?\W+|the\W+)?{_VERDICT_EN}\b",
    r"\bthe root cause (?:is|was)\b|\broot cause (?:is|has been) (?:confirmed|identified)\b",
    r"\"?\b(?:decision|verdict|classification)\b\"?\s*[:=]\s*\"?(?:pass|accepted|confirmed|direct_observation|reasonable_inference)\b",
    rf"(?:标记|判定|认定|视|归类|记|确认|当作|当成)(?:为|成){_VERDICT_ZH}",
    r"根因(?:是|为|就是)|根本原因(?:是|为)|结论(?:是|为)[:：]?",
)
_INSTRUCTION = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))


def excerpt_is_instruction(normalized_excerpt: str) -> str | None:
    """The instruction-like phrase of an already normalised excerpt, or ``None``."""
    match = _INSTRUCTION.search(normalized_excerpt or "")
    return match.group(0) if match else None
