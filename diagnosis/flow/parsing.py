"""Tolerant parsing of the Executor's answer, claim by claim (docs/contracts.md §1).

The generic reading (the JSON value in a reply, whole-object contracts, findings and
their codes) is the model layer's: ``diagnosis.llm.parsing``; its names are importable
here too.

Models wrap their JSON in prose, fences and byte-order marks, and get types
wrong. Parsing here finds the JSON value wherever it is and then validates
*per item*: one malformed claim, binding or hypothesis is demoted or dropped
with a finding, and only a top-level failure (not an object, ``claims`` not a
list) makes the whole output ``schema_invalid``. Nothing here raises.

Decisions where docs/contracts.md §1 is silent:

- An object without a ``claims`` key is ``schema_invalid`` (it is not an
  Executor answer at all); ``"claims": []`` is a valid answer with no claims.
- A missing ``answer_version`` is read as v2, or as v1 when the object carries
  ``user_facing_answer`` or ``diagnosis_summary``; any other version string is
  read as v2 with an ``unknown_answer_version`` finding.
- A v1 ``user_facing_answer`` is blanked in the parsed model: it stays only in
  ``raw_object`` for the audit trail and can never reach a user from here.
- A claim that is not an object or has no usable ``claim_id`` is dropped (there
  is nothing to refer to it by); a claim without ``claim_text`` is kept but
  always demoted. ``claim_id`` given as an integer is read as its string.
- ``claim_type`` is compared case-insensitively with ``-``/space read as ``_``;
  anything else (``other`` included) is kept as ``other`` with a finding.
- A missing or unknown ``support_level`` is checked as ``direct`` (the strictest
  rule); an unknown one also gets a ``malformed_claim`` finding.
- ``evidence_bindings``: null means none, a lone object is read as a list of one.
  A malformed binding is dropped with a ``malformed_binding`` finding that keeps
  its original index; ``ClaimNotes.binding_origins`` maps the kept bindings back
  to their original indices so Gatekeeper findings always name the index the
  model wrote.
- Hypotheses and actions given as plain strings are read as their text;
  a lone string ``missing_info`` is read as a list of one.
- Raw control characters inside JSON strings (a grammar-constrained server
  lets a model write a raw newline there) are read as the characters they are.
- A reply cut by ``max_tokens`` (``ModelText.cut``), or whose top-level object
  never closes, is ``truncated`` unless a complete top-level object was found: a
  complete object nested inside the unterminated one is a fragment (a plan's
  ``window``, a claim's binding), never the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from diagnosis.contracts import (
    EXECUTOR_V1,
    EXECUTOR_V2,
    Claim,
    ClaimType,
    EvidenceBinding,
    ExecutorEvidenceV1,
    ExecutorEvidenceV2,
    Finding,
    FindingCode,
    Hypothesis,
    ParseStatus,
    RecommendedAction,
    SupportLevel,
)

# The generic reading (diagnosis.llm.parsing), named here too for the flow's callers.
from diagnosis.llm.parsing import EXTRACT_EMPTY as EXTRACT_EMPTY
from diagnosis.llm.parsing import EXTRACT_INVALID_JSON as EXTRACT_INVALID_JSON
from diagnosis.llm.parsing import EXTRACT_OK as EXTRACT_OK
from diagnosis.llm.parsing import EXTRACT_UNTERMINATED as EXTRACT_UNTERMINATED
from diagnosis.llm.parsing import Params as Params
from diagnosis.llm.parsing import Parsed as Parsed
from diagnosis.llm.parsing import Problem as _Problem
from diagnosis.llm.parsing import detail_clip as detail_clip
from diagnosis.llm.parsing import detail_coded as detail_coded
from diagnosis.llm.parsing import evidence_numbers as evidence_numbers
from diagnosis.llm.parsing import failed_problem as _failed_problem
from diagnosis.llm.parsing import finding as finding
from diagnosis.llm.parsing import invalid_fields as _invalid_fields
from diagnosis.llm.parsing import json_object_extract as json_object_extract
from diagnosis.llm.parsing import model_output_parse as model_output_parse
from diagnosis.llm.parsing import output_problem as _output_problem
from diagnosis.llm.parsing import problem_finding as _problem_finding
from diagnosis.llm.parsing import validation_summary as _validation_summary

_KNOWN_CLAIM_TYPES = {t.value for t in ClaimType if t is not ClaimType.OTHER}
_SUPPORT_LEVELS = {s.value for s in SupportLevel}
_SOURCE_ID_TYPES = (str, int)

ItemT = TypeVar("ItemT")  # an item a list parser keeps (a hypothesis, an action, a text)


# --- Executor output ------------------------------------------------------------


@dataclass(frozen=True)
class ClaimNotes:
    """What parsing noticed about one kept claim (aligned with ``output.claims``)."""

    findings: tuple[Finding, ...] = ()
    # original index (as the model wrote it) of each kept binding, in order
    binding_origins: tuple[int, ...] = ()
    # the claim is unusable as a statement (no claim_text): always demoted
    demote: bool = False


@dataclass(frozen=True)
class ParsedExecutorOutput:
    """The Executor's answer after tolerant parsing.

    ``raw_object`` is the JSON object found (store it as
    ``executor_structured_output``); ``output`` is the per-item validated model
    (``ExecutorEvidenceV1`` for v1) or ``None`` unless the status is
    ``parsed_v2``/``parsed_v1``; ``dropped`` lists findings about items dropped
    or repaired that belong to no kept claim; ``claim_notes`` (one per kept
    claim, same order) carries the per-claim parse findings.
    """

    status: ParseStatus
    raw_object: dict | None
    output: ExecutorEvidenceV2 | None
    dropped: list[Finding]
    claim_notes: tuple[ClaimNotes, ...] = field(default=())


def _describe(value: object) -> str:
    return detail_clip(repr(value), 60)


def _as_list(value: object) -> list | None:
    """null/missing → [], a list → itself, a lone object or string → [it]; else None."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, dict | str):
        return [value]
    return None


def _extras(item: dict, known: set[str]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if isinstance(k, str) and k not in known}


_BINDING_FIELDS = set(EvidenceBinding.model_fields)
_CLAIM_FIELDS = set(Claim.model_fields)


def _invocation_ids(value: object) -> list[int] | None:
    items = _as_list(value) if not isinstance(value, int | str) else [value]
    if items is None:
        return None
    ids = []
    for item in items:
        if isinstance(item, bool):
            return None
        if isinstance(item, int):
            ids.append(item)
        elif isinstance(item, str) and item.strip().isdecimal() and len(item.strip()) < 20:
            ids.append(int(item.strip()))
        else:
            return None
    return ids


def _field_problem(name: str, value: object, missing: bool = True) -> _Problem:
    """A binding field that is missing (or ``missing=False``: present) and not a string."""
    shown = _describe(value)
    if missing:
        return _Problem(
            f"{name} missing or not a string: {shown}",
            "binding_field_missing",
            {"field": name, "value": shown},
        )
    return _Problem(
        f"{name} is not a string: {shown}",
        "binding_field_not_string",
        {"field": name, "value": shown},
    )


def _binding_parse(item: object) -> EvidenceBinding | _Problem:
    if not isinstance(item, dict):
        shown = _describe(item)
        text = f"binding is not an object: {shown}"
        return _Problem(text, "binding_not_object", {"value": shown})
    source_type = item.get("source_type")
    if not isinstance(source_type, str) or not source_type.strip():
        return _field_problem("source_type", source_type)
    source_id = item.get("source_id")
    if isinstance(source_id, bool) or not isinstance(source_id, _SOURCE_ID_TYPES):
        return _field_problem("source_id", source_id)
    tool_name = item.get("tool_name")
    if tool_name is not None and not isinstance(tool_name, str):
        return _field_problem("tool_name", tool_name, missing=False)
    ids = _invocation_ids(item.get("source_invocation_ids"))
    if ids is None:
        shown = _describe(item.get("source_invocation_ids"))
        text = "source_invocation_ids is not a list of integers: " + shown
        return _Problem(text, "binding_ids_not_integers", {"value": shown})
    excerpt = item.get("evidence_excerpt")
    if excerpt is None:
        excerpt = ""
    if not isinstance(excerpt, str):
        return _field_problem("evidence_excerpt", excerpt, missing=False)
    data = _extras(item, _BINDING_FIELDS) | {
        "source_type": source_type.strip(),
        "source_id": str(source_id).strip(),
        "tool_name": tool_name.strip()
        if isinstance(tool_name, str) and tool_name.strip()
        else None,
        "source_invocation_ids": ids,
        "evidence_excerpt": excerpt,
    }
    try:
        return EvidenceBinding.model_validate(data)
    except ValidationError as exc:
        fields = {"fields": _invalid_fields(exc)}
        return _Problem(_validation_summary(exc), "binding_fields_invalid", fields)


def _bindings_parse(
    value: object, where: str, claim: int = 0
) -> tuple[list[EvidenceBinding], list[int], list[Finding]]:
    """A claim's (the ``claim``-th, from 1) or an action's bindings, and their findings."""
    items = _as_list(value)
    if items is None:
        shown = _describe(value)
        detail = f"{where}: evidence_bindings is not a list: {shown}"
        problem = _Problem(detail, "bindings_not_list", {"claim": claim, "value": shown})
        return [], [], [_problem_finding(FindingCode.MALFORMED_BINDING, problem)]
    bindings: list[EvidenceBinding] = []
    origins: list[int] = []
    findings: list[Finding] = []
    for index, item in enumerate(items):
        binding = _binding_parse(item)
        if isinstance(binding, _Problem):
            findings.append(_problem_finding(FindingCode.MALFORMED_BINDING, binding, index))
        else:
            bindings.append(binding)
            origins.append(index)
    return bindings, origins, findings


def _claim_id(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _claim_type(value: object) -> tuple[str, Finding | None]:
    if isinstance(value, str):
        key = value.strip().lower().replace("-", "_").replace(" ", "_")
        if key in _KNOWN_CLAIM_TYPES:
            return key, None
    shown, known = _describe(value), sorted(_KNOWN_CLAIM_TYPES)
    detail = f"claim_type {shown} is not one of {known}; kept as other"
    return ClaimType.OTHER.value, finding(
        FindingCode.UNKNOWN_CLAIM_TYPE,
        detail,
        detail_code="claim_type_unknown",
        params={"value": shown, "known": ", ".join(known)},
    )


def _support_level(value: object) -> tuple[str, Finding | None]:
    if value is None:
        return SupportLevel.DIRECT.value, None
    if isinstance(value, str) and value.strip().lower() in _SUPPORT_LEVELS:
        return value.strip().lower(), None
    shown = _describe(value)
    detail = f"support_level {shown} is not direct/indirect/none; checked as direct"
    return SupportLevel.DIRECT.value, finding(
        FindingCode.MALFORMED_CLAIM,
        detail,
        detail_code="support_level_unknown",
        params={"value": shown},
    )


def _claim_dropped(text: str, code: str, **params: str | int) -> tuple[None, ClaimNotes, list]:
    """A claim that cannot be kept: no claim, no notes, one report-level finding."""
    return (
        None,
        ClaimNotes(),
        [_problem_finding(FindingCode.MALFORMED_CLAIM, _Problem(text, code, dict(params)))],
    )


def _claim_parse(item: object, index: int) -> tuple[Claim | None, ClaimNotes, list[Finding]]:
    """One claim → (claim or None if dropped, its notes, report-level findings)."""
    where, number = f"claims[{index}]", index + 1
    if not isinstance(item, dict):
        shown = _describe(item)
        detail = f"{where} is not an object: {shown}; dropped"
        return _claim_dropped(detail, "claim_not_object", claim=number, value=shown)
    claim_id = _claim_id(item.get("claim_id"))
    if claim_id is None:
        shown = _describe(item.get("claim_id"))
        detail = f"{where} has no usable claim_id: {shown}; dropped"
        return _claim_dropped(detail, "claim_id_missing", claim=number, value=shown)
    findings: list[Finding] = []
    demote = False
    claim_text = item.get("claim_text")
    if not isinstance(claim_text, str) or not claim_text.strip():
        shown = _describe(claim_text)
        findings.append(
            finding(
                FindingCode.MALFORMED_CLAIM,
                f"claim_text missing or not a string: {shown}",
                detail_code="claim_text_missing",
                params={"value": shown},
            )
        )
        claim_text = ""
        demote = True
    claim_type, type_finding = _claim_type(item.get("claim_type"))
    if type_finding:
        findings.append(type_finding)
    support_level, level_finding = _support_level(item.get("support_level"))
    if level_finding:
        findings.append(level_finding)
    entity = item.get("entity")
    entity = entity.strip() or None if isinstance(entity, str) else None
    bindings, origins, binding_findings = _bindings_parse(
        item.get("evidence_bindings"), where, number
    )
    findings.extend(binding_findings)
    data = _extras(item, _CLAIM_FIELDS) | {
        "claim_id": claim_id,
        "claim_type": claim_type,
        "claim_text": claim_text,
        "entity": entity,
        "root_cause_kind": _kind_read(item.get("root_cause_kind")),
        "root_cause_kind_alternative": kind_alternative_read(
            item.get("root_cause_kind_alternative"), item.get("root_cause_kind")
        ),
        "support_level": support_level,
        "evidence_bindings": bindings,
    }
    try:
        claim = Claim.model_validate(data)
    except ValidationError as exc:  # only reachable through odd extras
        detail = f"{where} ({claim_id}): {_validation_summary(exc)}; dropped"
        return _claim_dropped(
            detail,
            "claim_fields_invalid",
            claim=number,
            claim_id=claim_id,
            fields=_invalid_fields(exc),
        )
    notes = ClaimNotes(findings=tuple(findings), binding_origins=tuple(origins), demote=demote)
    return claim, notes, []


def _kind_read(value: object) -> str | None:
    """A root_cause_kind as given (lower-case word); anything else is no kind."""
    if isinstance(value, str) and 0 < len(value.strip()) <= 40:
        return value.strip().lower()
    return None


_ONE_KIND = re.compile(r"[a-z_]+")


def kind_alternative_read(value: object, kind: object) -> str | None:
    """The one other kind a statement names beside its ``root_cause_kind``: a single word
    unlike the kind itself. A list, several words joined, or an alternative without a kind
    is none, so an answer can name at most two kinds for one cause."""
    alternative, first = _kind_read(value), _kind_read(kind)
    if alternative is None or first is None or alternative == first:
        return None
    return alternative if _ONE_KIND.fullmatch(alternative) else None


def _strings(value: object) -> list[str]:
    items = _as_list(value) or []
    return [s for s in items if isinstance(s, str) and s.strip()]


def _not_object(item: object) -> _Problem:
    shown = _describe(item)
    return _Problem(f"not an object: {shown}", "item_not_object", {"value": shown})


def _text_missing(name: str, value: object) -> _Problem:
    shown = _describe(value)
    text = f"{name} missing or not a string: {shown}"
    return _Problem(text, "item_text_missing", {"text_field": name, "value": shown})


def _hypothesis_parse(item: object) -> Hypothesis | _Problem:
    if isinstance(item, str):
        item = {"hypothesis_text": item}
    if not isinstance(item, dict):
        return _not_object(item)
    text = item.get("hypothesis_text")
    if not isinstance(text, str) or not text.strip():
        return _text_missing("hypothesis_text", text)
    basis = item.get("basis")
    entity = item.get("entity")
    data = _extras(item, set(Hypothesis.model_fields)) | {
        "hypothesis_text": text,
        "basis": basis if isinstance(basis, str) else "",
        "entity": entity if isinstance(entity, str) and entity.strip() else None,
        "root_cause_kind": _kind_read(item.get("root_cause_kind")),
        "root_cause_kind_alternative": kind_alternative_read(
            item.get("root_cause_kind_alternative"), item.get("root_cause_kind")
        ),
        "needed_evidence": _strings(item.get("needed_evidence")),
    }
    return Hypothesis.model_validate(data)


def _action_parse(item: object) -> RecommendedAction | _Problem:
    if isinstance(item, str):
        item = {"action_text": item}
    if not isinstance(item, dict):
        return _not_object(item)
    text = item.get("action_text")
    if not isinstance(text, str) or not text.strip():
        return _text_missing("action_text", text)
    reason = item.get("reason")
    bindings, _origins, _problems = _bindings_parse(item.get("evidence_bindings"), "action")
    data = _extras(item, set(RecommendedAction.model_fields)) | {
        "action_text": text,
        "reason": reason if isinstance(reason, str) else "",
        "evidence_bindings": bindings,
    }
    return RecommendedAction.model_validate(data)


def _items_parse(
    obj: dict,
    key: str,
    parse: Callable[[object], ItemT | _Problem],
    dropped: list[Finding],
) -> list[ItemT]:
    items = _as_list(obj.get(key))
    if items is None:
        shown = _describe(obj.get(key))
        detail = f"{key} is not a list: {shown}; read as empty"
        problem = _Problem(detail, "items_not_list", {"field": key, "value": shown})
        dropped.append(_problem_finding(FindingCode.MALFORMED_ITEM, problem))
        return []
    kept: list[ItemT] = []
    for index, item in enumerate(items):
        value: ItemT | _Problem
        try:
            value = parse(item)
        except Exception as exc:
            value = _failed_problem(exc, type(exc).__name__, "item_failed")
        if isinstance(value, _Problem):
            params: Params = {**value.params, "field": key, "item": index + 1}
            text = f"{key}[{index}]: {value.text}; dropped"
            dropped.append(
                _problem_finding(FindingCode.MALFORMED_ITEM, _Problem(text, value.code, params))
            )
        else:
            kept.append(value)
    return kept


def _missing_info_parse(item: object) -> str | _Problem:
    if isinstance(item, str):
        return item if item.strip() else _Problem("empty string", "item_empty")
    shown = _describe(item)
    return _Problem(f"not a string: {shown}", "item_not_string", {"value": shown})


def _version(obj: dict, dropped: list[Finding]) -> str:
    version = obj.get("answer_version")
    if version == EXECUTOR_V1:
        return EXECUTOR_V1
    if version == EXECUTOR_V2:
        return EXECUTOR_V2
    if version is None:
        if "user_facing_answer" in obj or "diagnosis_summary" in obj:
            return EXECUTOR_V1
        return EXECUTOR_V2
    shown = _describe(version)
    detail = f"answer_version {shown} is unknown; read as {EXECUTOR_V2}"
    dropped.append(
        finding(
            FindingCode.UNKNOWN_ANSWER_VERSION,
            detail,
            detail_code="answer_version_unknown",
            params={"value": shown, "read_as": EXECUTOR_V2},
        )
    )
    return EXECUTOR_V2


def _unusable(
    status: ParseStatus, raw_object: dict | None, problem: _Problem
) -> ParsedExecutorOutput:
    return ParsedExecutorOutput(
        status=status,
        raw_object=raw_object,
        output=None,
        dropped=[_problem_finding(FindingCode.UNUSABLE_OUTPUT, problem)],
    )


def _executor_object_parse(obj: dict) -> ParsedExecutorOutput:
    raw_claims = obj.get("claims")
    if not isinstance(raw_claims, list):
        shown = _describe(raw_claims)
        if "claims" not in obj:
            problem = _Problem(f"claims is missing: {shown}", "claims_missing")
        else:
            problem = _Problem(
                f"claims is not a list: {shown}", "claims_not_list", {"value": shown}
            )
        return _unusable(ParseStatus.SCHEMA_INVALID, obj, problem)
    dropped: list[Finding] = []
    version = _version(obj, dropped)
    claims: list[Claim] = []
    notes: list[ClaimNotes] = []
    for index, item in enumerate(raw_claims):
        claim, claim_notes, report_findings = _claim_parse(item, index)
        dropped.extend(report_findings)
        if claim is not None:
            claims.append(claim)
            notes.append(claim_notes)
    fields: dict[str, Any] = {
        "claims": claims,
        "hypotheses": _items_parse(obj, "hypotheses", _hypothesis_parse, dropped),
        "recommended_actions": _items_parse(obj, "recommended_actions", _action_parse, dropped),
        "missing_info": _items_parse(obj, "missing_info", _missing_info_parse, dropped),
    }
    output: ExecutorEvidenceV2
    if version == EXECUTOR_V1:
        summary = obj.get("diagnosis_summary")
        # user_facing_answer is deliberately left out: it lives only in raw_object.
        output = ExecutorEvidenceV1(
            **fields, diagnosis_summary=summary if isinstance(summary, str) else ""
        )
        status = ParseStatus.PARSED_V1
    else:
        output = ExecutorEvidenceV2(**fields)
        status = ParseStatus.PARSED_V2
    return ParsedExecutorOutput(
        status=status, raw_object=obj, output=output, dropped=dropped, claim_notes=tuple(notes)
    )


def executor_proposals_parse(
    obj: object,
) -> tuple[list[Hypothesis], list[RecommendedAction], list[str]]:
    """The hypotheses, actions and missing info of a stored Executor answer, read as the flow
    read them when it ran (a malformed item is dropped, a loose one coerced alike)."""
    if not isinstance(obj, dict):
        return [], [], []
    dropped: list[Finding] = []
    return (
        _items_parse(obj, "hypotheses", _hypothesis_parse, dropped),
        _items_parse(obj, "recommended_actions", _action_parse, dropped),
        _items_parse(obj, "missing_info", _missing_info_parse, dropped),
    )


def executor_output_parse(raw: str | bytes | None) -> ParsedExecutorOutput:
    """Parse the Executor's raw answer into ``executor_evidence_v2`` (or v1). Never raises."""
    obj: dict | None = None
    try:
        status, value = json_object_extract(raw)
        problem = _output_problem(raw, status, value)
        if problem is not None:
            return _unusable(problem[0], None, problem[1])
        # _output_problem is None only when the value is a JSON object (a dict).
        obj = cast(dict, value)
        return _executor_object_parse(obj)
    except Exception as exc:
        text = f"internal parse error: {type(exc).__name__}"
        return _unusable(ParseStatus.SCHEMA_INVALID, obj, _failed_problem(exc, text))
