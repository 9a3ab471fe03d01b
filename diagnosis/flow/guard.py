"""Composer guard: the composed answer may add nothing the Composer input lacks.

It rejects an answer that is JSON or quotes raw Executor fields, and one that
introduces a fact absent from the Composer input: a number, a time, a date,
an identifier or a known service name, read by the one extractor the
Gatekeeper uses (``diagnosis.facts``: numbers compared whole and by value,
``10:21`` found in a timestamp holding it, identifiers as whole tokens).
List markers (``1.``) are not numbers.

A fault kind is a fact too: an answer naming a resource the input never names (内存 /
memory, CPU, 磁盘 / disk, 网络 / network: a kind in either language, by its name or its
``root_cause_kind``) says what ran out without any evidence having said so
(``new_kind:<kind>``). The other kinds' names (延迟, 错误, …) are words any answer uses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from diagnosis.contracts import ComposerInput
from diagnosis.facts import FactKind, fact_source_of, facts_extract, text_normalize
from diagnosis.offline.texts import kind_names

_RAW_FIELDS = (
    "answer_version",
    "executor_evidence",
    "claim_id",
    "claim_type",
    "evidence_bindings",
    "evidence_excerpt",
    "source_invocation_ids",
    "support_level",
    "user_facing_answer",
    "diagnosis_summary",
    "allowed_claims",
    "allowed_hypotheses",
    "composer_v1",
    "verifier_v2",
)
_LIST_MARKER = re.compile(r"^(\s*)(?:\d+[.)]|[-*+])(?=\s)", re.MULTILINE)
_LABEL = {
    FactKind.NUMBER: "new_number",
    FactKind.TIME: "new_time",
    FactKind.DATE: "new_date",
    FactKind.IDENTIFIER: "new_identifier",
    FactKind.SERVICE: "new_service",
}


def _looks_like_json(text: str) -> bool:
    stripped = text.strip()
    if stripped.startswith("```json") or stripped.startswith("```\n{"):
        return True
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
        except ValueError:
            return stripped.startswith('{"')
        return True
    return False


def _texts(value: object) -> Iterable[str]:
    """Every string value of the Composer input (its keys and enums are no source)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


# the kinds named by a resource's own word, and the languages their names are read in
_RESOURCE_KINDS = ("cpu", "memory", "disk", "network")
_LANGUAGES = ("zh-CN", "en")


def _kind_words(kind: str) -> set[str]:
    return {kind} | {text_normalize(kind_names(lang)[kind]) for lang in _LANGUAGES}


def _new_kinds(text: str, source_text: str) -> list[str]:
    """The resource kinds ``text`` names that ``source_text`` names in no language."""
    return [
        f"new_kind:{kind}"
        for kind in _RESOURCE_KINDS
        if any(w in text for w in _kind_words(kind))
        and not any(w in source_text for w in _kind_words(kind))
    ]


def composer_guard(
    *, answer: str, composer_input: ComposerInput, known_services: Iterable[str] = ()
) -> list[str]:
    """Return guard findings; an empty list means the answer may be shown."""
    findings: list[str] = []
    if not answer or not answer.strip():
        return ["empty_answer"]
    if _looks_like_json(answer):
        findings.append("answer_is_json")
    text = text_normalize(answer)
    for field_name in _RAW_FIELDS:
        if field_name in text:
            findings.append(f"raw_field:{field_name}")
    data = composer_input.model_dump(mode="json")
    texts = list(_texts({k: v for k, v in data.items() if k not in ("decision", "language")}))
    source = fact_source_of(texts)
    findings += _new_kinds(text, text_normalize(" ".join(texts)))
    body = _LIST_MARKER.sub(lambda m: m.group(1) + " ", answer)
    for fact in facts_extract(body, services=known_services):
        if not source.contains(fact):
            findings.append(f"{_LABEL[fact.kind]}:{text_normalize(fact.text)}")
    return list(dict.fromkeys(findings))
