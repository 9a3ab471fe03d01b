"""Composer guard: the composed answer may add nothing the Composer input lacks.

It rejects an answer that is JSON or quotes raw Executor fields, and one that
introduces a number, a time, an identifier or a known service name absent from
the Composer input. Comparison is on NFKC-casefolded text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable

from diagnosis.contracts import ComposerInput

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
# Times like 10:20 or 10:20:05, dates, and ISO timestamps.
_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?z?)?")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?")
# Identifier-like tokens: contain a digit, hyphen, underscore, dot or slash between word chars.
_IDENT = re.compile(r"[a-z0-9]+(?:[-_./:][a-z0-9]+)+|[a-z]+\d+[a-z0-9]*")
_LIST_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+", re.MULTILINE)


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


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


def composer_guard(
    *, answer: str, composer_input: ComposerInput, known_services: Iterable[str] = ()
) -> list[str]:
    """Return guard findings; an empty list means the answer may be shown."""
    findings: list[str] = []
    if not answer or not answer.strip():
        return ["empty_answer"]
    if _looks_like_json(answer):
        findings.append("answer_is_json")
    text = _norm(answer)
    for field_name in _RAW_FIELDS:
        if field_name in text:
            findings.append(f"raw_field:{field_name}")
    source = _norm(composer_input.model_dump_json())
    # json escapes non-ASCII; compare against the readable form too.
    source += "\n" + _norm(json.dumps(composer_input.model_dump(mode="json"), ensure_ascii=False))
    body = _LIST_MARKER.sub("", text)

    for pattern, label in ((_DATE, "date"), (_TIME, "time")):
        for match in pattern.finditer(body):
            if match.group(0) not in source:
                findings.append(f"new_{label}:{match.group(0)}")
        body = pattern.sub(" ", body)
    for match in _IDENT.finditer(body):
        token = match.group(0).strip("./:-_")
        if token and token not in source:
            findings.append(f"new_identifier:{token}")
    for match in _NUMBER.finditer(_IDENT.sub(" ", body)):
        number = match.group(0)
        if number not in source:
            findings.append(f"new_number:{number}")
    for service in known_services:
        name = _norm(service)
        if (
            name
            and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
            and name not in source
        ):
            findings.append(f"new_service:{service}")
    return list(dict.fromkeys(findings))
