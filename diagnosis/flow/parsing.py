"""Tolerant parsing of model output (contracts.md §1).

Models wrap their JSON in prose, fences and byte-order marks, and get types
wrong. Parsing here finds the JSON value wherever it is and then validates
*per item*: one malformed claim, binding or hypothesis is demoted or dropped
with a finding, and only a top-level failure (not an object, ``claims`` not a
list) makes the whole output ``schema_invalid``. Nothing here raises.

Decisions where contracts.md is silent:

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

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

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
from diagnosis.llm.base import text_cut

# json_object_extract statuses (model_output_parse adds "not_an_object"/"schema_invalid").
EXTRACT_OK = "ok"
EXTRACT_EMPTY = "empty"
EXTRACT_INVALID_JSON = "invalid_json"
# the text opens a JSON object that never closes, and holds no complete top-level value
EXTRACT_UNTERMINATED = "truncated"

# Bounds on the search for a JSON value inside prose, so a 10 MB answer full of
# braces costs a bounded amount of scanning.
_MAX_CANDIDATES = 64
_MAX_SCAN_CHARS = 64_000_000
_MAX_FENCES = 16
_DETAIL_LIMIT = 300

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n`]*\n(.*?)```", re.DOTALL)
_KNOWN_CLAIM_TYPES = {t.value for t in ClaimType if t is not ClaimType.OTHER}
_SUPPORT_LEVELS = {s.value for s in SupportLevel}
_SOURCE_ID_TYPES = (str, int)


def detail_clip(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """A finding's detail, bounded (shared with the Gatekeeper)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(_name: str) -> None:
    """NaN/Infinity are not JSON; read them as null so the object stays storable."""
    return None


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, strict=False)
# A `{` that starts a JSON object (not a brace in prose such as "{service}").
_OBJECT_START = re.compile(r'\{\s*["}]')
_STRUCTURE = re.compile(r'[{}\[\]"\\]')


def _as_text(raw: object) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw).decode("utf-8", errors="replace")
    if isinstance(raw, str):
        return raw
    return str(raw)


def _decode_whole(text: str) -> tuple[bool, object]:
    try:
        return True, _DECODER.decode(text)
    except Exception:  # JSONDecodeError, RecursionError, ValueError (huge ints), …
        return False, None


def _closing_end(text: str, start: int) -> int | None:
    """Where the bracketed value opened at ``start`` closes (strings respected), or None.

    Only counts brackets, so it also closes values that are not valid JSON; bounded
    by ``_MAX_SCAN_CHARS``.
    """
    depth = 0
    in_string = False
    skip_to = -1
    for match in _STRUCTURE.finditer(text, start):
        at = match.start()
        if at - start > _MAX_SCAN_CHARS:
            return None
        if at < skip_to:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip_to = at + 2
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth <= 0:
                return match.end()
    return None


def _unterminated_before(text: str, position: int) -> bool:
    """Does a JSON object open before ``position`` and never close (a cut-off answer)?"""
    pos = 0
    for _ in range(_MAX_CANDIDATES):
        match = _OBJECT_START.search(text, pos)
        if match is None or match.start() >= position:
            return False
        end = _closing_end(text, match.start())
        if end is None:
            return True
        pos = end
    return False


def _scan(text: str, opener: str, want: type, before: int = -1) -> tuple[object | None, int, int]:
    """Longest top-level value of type ``want`` starting at an ``opener`` (before ``before``).

    Returns the value (or None), its start and the position just after it.
    """
    best: object | None = None
    best_len = -1
    best_end = -1
    best_start = -1
    pos = text.find(opener)
    tries = 0
    scanned = 0
    while pos != -1 and tries < _MAX_CANDIDATES and scanned < _MAX_SCAN_CHARS:
        if before != -1 and pos >= before:
            break
        tries += 1
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            scanned += max(exc.pos - pos, 1)
            pos = text.find(opener, pos + 1)
            continue
        except Exception:
            scanned += 1
            pos = text.find(opener, pos + 1)
            continue
        scanned += end - pos
        if isinstance(value, want) and end - pos > best_len:
            best, best_len, best_end, best_start = value, end - pos, end, pos
        pos = text.find(opener, end)
    return best, best_start, best_end


def json_object_extract(raw: str | bytes | None) -> tuple[str, dict | list | object | None]:
    """Find the JSON value in raw model text; returns ``(status, value)``.

    ``status`` is ``"ok"``, ``"empty"``, ``"invalid_json"`` or ``"truncated"`` (an
    object opens and never closes, and nothing complete stands outside it). Tried in
    order: the whole text (after a BOM and surrounding whitespace), fenced blocks
    (```` ```json ```` first), then (in prose) an array that encloses the first ``{``,
    the longest object starting at a ``{`` that is not nested in an unterminated
    object, an array before any ``{``. A value that is already a dict or list (a
    provider with structured output) is returned as is. Never raises.
    """
    try:
        if isinstance(raw, dict | list):
            return EXTRACT_OK, raw
        text = _as_text(raw)
        if text is None:
            return EXTRACT_EMPTY, None
        text = text.lstrip("\ufeff").strip()
        if not text:
            return EXTRACT_EMPTY, None
        ok, value = _decode_whole(text)
        if ok:
            return EXTRACT_OK, value
        if "```" in text:
            fences = []
            for n, match in enumerate(_FENCE.finditer(text)):
                if n >= _MAX_FENCES:
                    break
                fences.append((match.group(1).lower() != "json", match.group(2)))
            for _not_json, body in sorted(fences, key=lambda f: f[0]):
                ok, value = _decode_whole(body.strip().lstrip("\ufeff"))
                if ok:
                    return EXTRACT_OK, value
        # An array counts when it is the outermost value, not one inside a broken object.
        first_brace = text.find("{")
        array, _array_start, array_end = _scan(text, "[", list, before=first_brace)
        if array is not None and (first_brace == -1 or array_end > first_brace):
            return EXTRACT_OK, array
        found, found_start, _end = _scan(text, "{", dict)
        if found is not None and not _unterminated_before(text, found_start):
            return EXTRACT_OK, found
        if array is not None:
            return EXTRACT_OK, array
        if _unterminated_before(text, len(text)):
            return EXTRACT_UNTERMINATED, None
        return EXTRACT_INVALID_JSON, None
    except Exception:
        return EXTRACT_INVALID_JSON, None


ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class Parsed(Generic[ModelT]):
    """A whole-object contract after tolerant parsing: ``output`` is set only when ``ok``."""

    status: str
    output: ModelT | None
    detail: str


def model_output_parse(raw: object, model: type[ModelT]) -> Parsed[ModelT]:
    """Tolerant parse of a whole-object contract (verifier_v2, composer_v1, planner).

    The status is one of ``ok``, ``empty``, ``invalid_json``, ``not_an_object``,
    ``schema_invalid``, ``truncated``; ``detail`` says what was wrong. Validation
    of the object is strict (the model's own rules). Never raises.
    """
    try:
        status, value = json_object_extract(raw)  # type: ignore[arg-type]
        if status != EXTRACT_OK and (status == EXTRACT_UNTERMINATED or text_cut(raw)):
            return Parsed(ParseStatus.TRUNCATED.value, None, _TRUNCATED_DETAIL)
        if status == EXTRACT_EMPTY:
            return Parsed("empty", None, "the output is empty")
        if status != EXTRACT_OK:
            return Parsed("invalid_json", None, "no JSON value found in the output")
        if not isinstance(value, dict):
            return Parsed("not_an_object", None, f"the JSON value is a {type(value).__name__}")
        try:
            return Parsed("ok", model.model_validate(value), "")
        except ValidationError as exc:
            return Parsed("schema_invalid", None, detail_clip(_validation_summary(exc), 1000))
    except Exception as exc:  # a model's own validator misbehaving, RecursionError, …
        return Parsed("schema_invalid", None, detail_clip(f"{type(exc).__name__}: {exc}", 1000))


_TRUNCATED_DETAIL = "the output was cut off before its JSON object closed (max_tokens?)"


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg', '')}")
    return "; ".join(parts)


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


def finding(code: FindingCode | str, detail: str = "", binding: int | None = None) -> Finding:
    """One finding with a bounded detail (shared with the Gatekeeper)."""
    return Finding(
        code=str(getattr(code, "value", code)), binding=binding, detail=detail_clip(detail)
    )


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


def _binding_parse(item: object) -> tuple[EvidenceBinding | None, str]:
    if not isinstance(item, dict):
        return None, f"binding is not an object: {_describe(item)}"
    source_type = item.get("source_type")
    if not isinstance(source_type, str) or not source_type.strip():
        return None, f"source_type missing or not a string: {_describe(source_type)}"
    source_id = item.get("source_id")
    if isinstance(source_id, bool) or not isinstance(source_id, _SOURCE_ID_TYPES):
        return None, f"source_id missing or not a string: {_describe(source_id)}"
    tool_name = item.get("tool_name")
    if tool_name is not None and not isinstance(tool_name, str):
        return None, f"tool_name is not a string: {_describe(tool_name)}"
    ids = _invocation_ids(item.get("source_invocation_ids"))
    if ids is None:
        return None, "source_invocation_ids is not a list of integers: " + _describe(
            item.get("source_invocation_ids")
        )
    excerpt = item.get("evidence_excerpt")
    if excerpt is None:
        excerpt = ""
    if not isinstance(excerpt, str):
        return None, f"evidence_excerpt is not a string: {_describe(excerpt)}"
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
        return EvidenceBinding.model_validate(data), ""
    except ValidationError as exc:
        return None, _validation_summary(exc)


def _bindings_parse(
    value: object, where: str
) -> tuple[list[EvidenceBinding], list[int], list[Finding]]:
    items = _as_list(value)
    if items is None:
        detail = f"{where}: evidence_bindings is not a list: {_describe(value)}"
        return [], [], [finding(FindingCode.MALFORMED_BINDING, detail)]
    bindings: list[EvidenceBinding] = []
    origins: list[int] = []
    findings: list[Finding] = []
    for index, item in enumerate(items):
        binding, problem = _binding_parse(item)
        if binding is None:
            findings.append(finding(FindingCode.MALFORMED_BINDING, problem, binding=index))
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
    detail = f"claim_type {_describe(value)} is not one of {sorted(_KNOWN_CLAIM_TYPES)}"
    return ClaimType.OTHER.value, finding(
        FindingCode.UNKNOWN_CLAIM_TYPE, detail + "; kept as other"
    )


def _support_level(value: object) -> tuple[str, Finding | None]:
    if value is None:
        return SupportLevel.DIRECT.value, None
    if isinstance(value, str) and value.strip().lower() in _SUPPORT_LEVELS:
        return value.strip().lower(), None
    detail = f"support_level {_describe(value)} is not direct/indirect/none; checked as direct"
    return SupportLevel.DIRECT.value, finding(FindingCode.MALFORMED_CLAIM, detail)


def _claim_parse(item: object, index: int) -> tuple[Claim | None, ClaimNotes, list[Finding]]:
    """One claim → (claim or None if dropped, its notes, report-level findings)."""
    where = f"claims[{index}]"
    if not isinstance(item, dict):
        detail = f"{where} is not an object: {_describe(item)}; dropped"
        return None, ClaimNotes(), [finding(FindingCode.MALFORMED_CLAIM, detail)]
    claim_id = _claim_id(item.get("claim_id"))
    if claim_id is None:
        detail = f"{where} has no usable claim_id: {_describe(item.get('claim_id'))}; dropped"
        return None, ClaimNotes(), [finding(FindingCode.MALFORMED_CLAIM, detail)]
    findings: list[Finding] = []
    demote = False
    claim_text = item.get("claim_text")
    if not isinstance(claim_text, str) or not claim_text.strip():
        findings.append(
            finding(
                FindingCode.MALFORMED_CLAIM,
                f"claim_text missing or not a string: {_describe(claim_text)}",
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
    bindings, origins, binding_findings = _bindings_parse(item.get("evidence_bindings"), where)
    findings.extend(binding_findings)
    data = _extras(item, _CLAIM_FIELDS) | {
        "claim_id": claim_id,
        "claim_type": claim_type,
        "claim_text": claim_text,
        "entity": entity,
        "root_cause_kind": _kind_read(item.get("root_cause_kind")),
        "support_level": support_level,
        "evidence_bindings": bindings,
    }
    try:
        claim = Claim.model_validate(data)
    except ValidationError as exc:  # only reachable through odd extras
        detail = f"{where} ({claim_id}): {_validation_summary(exc)}; dropped"
        return None, ClaimNotes(), [finding(FindingCode.MALFORMED_CLAIM, detail)]
    notes = ClaimNotes(findings=tuple(findings), binding_origins=tuple(origins), demote=demote)
    return claim, notes, []


def _kind_read(value: object) -> str | None:
    """A root_cause_kind as given (lower-case word); anything else is no kind."""
    if isinstance(value, str) and 0 < len(value.strip()) <= 40:
        return value.strip().lower()
    return None


def _strings(value: object) -> list[str]:
    items = _as_list(value) or []
    return [s for s in items if isinstance(s, str) and s.strip()]


def _hypothesis_parse(item: object) -> tuple[Hypothesis | None, str]:
    if isinstance(item, str):
        item = {"hypothesis_text": item}
    if not isinstance(item, dict):
        return None, f"not an object: {_describe(item)}"
    text = item.get("hypothesis_text")
    if not isinstance(text, str) or not text.strip():
        return None, f"hypothesis_text missing or not a string: {_describe(text)}"
    basis = item.get("basis")
    entity = item.get("entity")
    data = _extras(item, set(Hypothesis.model_fields)) | {
        "hypothesis_text": text,
        "basis": basis if isinstance(basis, str) else "",
        "entity": entity if isinstance(entity, str) and entity.strip() else None,
        "root_cause_kind": _kind_read(item.get("root_cause_kind")),
        "needed_evidence": _strings(item.get("needed_evidence")),
    }
    return Hypothesis.model_validate(data), ""


def _action_parse(item: object) -> tuple[RecommendedAction | None, str]:
    if isinstance(item, str):
        item = {"action_text": item}
    if not isinstance(item, dict):
        return None, f"not an object: {_describe(item)}"
    text = item.get("action_text")
    if not isinstance(text, str) or not text.strip():
        return None, f"action_text missing or not a string: {_describe(text)}"
    reason = item.get("reason")
    bindings, _origins, _problems = _bindings_parse(item.get("evidence_bindings"), "action")
    data = _extras(item, set(RecommendedAction.model_fields)) | {
        "action_text": text,
        "reason": reason if isinstance(reason, str) else "",
        "evidence_bindings": bindings,
    }
    return RecommendedAction.model_validate(data), ""


def _items_parse(
    obj: dict, key: str, parse: Callable[[object], tuple[Any, str]], dropped: list[Finding]
) -> list:
    items = _as_list(obj.get(key))
    if items is None:
        detail = f"{key} is not a list: {_describe(obj.get(key))}; read as empty"
        dropped.append(finding(FindingCode.MALFORMED_ITEM, detail))
        return []
    kept = []
    for index, item in enumerate(items):
        try:
            value, problem = parse(item)
        except Exception as exc:
            value, problem = None, f"{type(exc).__name__}"
        if value is None:
            dropped.append(
                finding(FindingCode.MALFORMED_ITEM, f"{key}[{index}]: {problem}; dropped")
            )
        else:
            kept.append(value)
    return kept


def _missing_info_parse(item: object) -> tuple[str | None, str]:
    if isinstance(item, str):
        return (item, "") if item.strip() else (None, "empty string")
    return None, f"not a string: {_describe(item)}"


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
    detail = f"answer_version {_describe(version)} is unknown; read as {EXECUTOR_V2}"
    dropped.append(finding(FindingCode.UNKNOWN_ANSWER_VERSION, detail))
    return EXECUTOR_V2


def _unusable(status: ParseStatus, raw_object: dict | None, detail: str) -> ParsedExecutorOutput:
    return ParsedExecutorOutput(
        status=status,
        raw_object=raw_object,
        output=None,
        dropped=[finding(FindingCode.UNUSABLE_OUTPUT, detail)],
    )


def _executor_object_parse(obj: dict) -> ParsedExecutorOutput:
    raw_claims = obj.get("claims")
    if not isinstance(raw_claims, list):
        detail = "claims is missing" if "claims" not in obj else "claims is not a list"
        return _unusable(ParseStatus.SCHEMA_INVALID, obj, f"{detail}: {_describe(raw_claims)}")
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


def executor_output_parse(raw: str | bytes | None) -> ParsedExecutorOutput:
    """Parse the Executor's raw answer into ``executor_evidence_v2`` (or v1). Never raises."""
    obj: dict | None = None
    try:
        status, value = json_object_extract(raw)
        if status != EXTRACT_OK and (status == EXTRACT_UNTERMINATED or text_cut(raw)):
            return _unusable(ParseStatus.TRUNCATED, None, _TRUNCATED_DETAIL)
        if status == EXTRACT_EMPTY:
            return _unusable(ParseStatus.EMPTY, None, "the output is empty")
        if status != EXTRACT_OK:
            return _unusable(ParseStatus.INVALID_JSON, None, "no JSON value found in the output")
        if not isinstance(value, dict):
            detail = f"the JSON value is a {type(value).__name__}, not an object"
            return _unusable(ParseStatus.NOT_AN_OBJECT, None, detail)
        obj = value
        return _executor_object_parse(obj)
    except Exception as exc:
        return _unusable(
            ParseStatus.SCHEMA_INVALID, obj, f"internal parse error: {type(exc).__name__}"
        )
