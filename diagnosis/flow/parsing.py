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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
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
_PARAM_MAX_CHARS = 120  # a name or text a detail quotes (the model may write any length)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n`]*\n(.*?)```", re.DOTALL)
_KNOWN_CLAIM_TYPES = {t.value for t in ClaimType if t is not ClaimType.OTHER}
_SUPPORT_LEVELS = {s.value for s in SupportLevel}
_SOURCE_ID_TYPES = (str, int)


def detail_clip(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """A finding's detail, bounded (shared with the Gatekeeper)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def evidence_numbers(indexes: Iterable[int]) -> str:
    """Binding indexes (as the model wrote them, from 0) as people and models read them:
    ``evidence 1, 3``, numbered from 1 as the pages number evidence."""
    return "evidence " + ", ".join(str(index + 1) for index in indexes)


# What each parse status means, in a reader's language (the audit pages' labels; a retry
# instruction that names why an output did not parse can say it in words).
PARSE_STATUS_WORDS: dict[str, Promise] = {
    "parsed_v2": _("已解析"),
    "parsed_v1": _("已解析（旧格式 v1）"),
    "empty": _("输出为空"),
    "invalid_json": _("输出中没有 JSON"),
    "not_an_object": _("JSON 不是对象"),
    "schema_invalid": _("结构不符合约定"),
    "truncated": _("输出被截断（达到 max_tokens 上限，对象不完整）"),
}

# What a parse finding's (or a stage's) ``detail`` says, as a stable code and its
# parameters, in a reader's language. ``claim`` and ``item`` number from 1, as pages do;
# ``value`` is what the model wrote, as written; ``fields`` are the contract's field paths.
PARSE_DETAILS: dict[str, Promise] = {
    "output_empty": _("输出是空的"),
    "output_no_json": _("输出中找不到 JSON 值"),
    "output_truncated": _("输出在 JSON 对象闭合前就被截断了（可能达到了 max_tokens 上限）"),
    "output_not_object": _("输出的 JSON 值不是对象（JSON 类型：%(type)s）"),
    "output_invalid": _("输出不符合约定"),
    "output_fields_invalid": _("输出中这些字段不符合约定：%(fields)s"),
    "parse_failed": _("解析输出时出错（%(error)s）"),
    "claims_missing": _("输出没有 claims 字段，不是 Executor 的回答"),
    "claims_not_list": _("claims 不是列表：%(value)s"),
    "answer_version_unknown": _("answer_version %(value)s 未知，按 %(read_as)s 读取"),
    "claim_not_object": _("第 %(claim)s 条论断不是对象（%(value)s），已丢弃"),
    "claim_id_missing": _("第 %(claim)s 条论断没有可用的 claim_id（%(value)s），已丢弃"),
    "claim_fields_invalid": _(
        "第 %(claim)s 条论断（%(claim_id)s）的这些字段不符合约定：%(fields)s，已丢弃"
    ),
    "claim_text_missing": _("claim_text 缺失或不是字符串（%(value)s），论断一律降级"),
    "claim_type_unknown": _("claim_type %(value)s 不是已知类型（%(known)s），按 other 处理"),
    "support_level_unknown": _(
        "support_level %(value)s 不是 direct、indirect 或 none，按 direct 检查"
    ),
    "bindings_not_list": _("第 %(claim)s 条论断的 evidence_bindings 不是列表：%(value)s"),
    "binding_not_object": _("这条证据绑定不是对象：%(value)s"),
    "binding_field_missing": _("%(field)s 缺失或不是字符串：%(value)s"),
    "binding_field_not_string": _("%(field)s 不是字符串：%(value)s"),
    "binding_ids_not_integers": _("source_invocation_ids 不是整数列表：%(value)s"),
    "binding_fields_invalid": _("这条证据绑定的这些字段不符合约定：%(fields)s"),
    "items_not_list": _("%(field)s 不是列表（%(value)s），按空列表读取"),
    "item_not_object": _("%(field)s 的第 %(item)s 项不是对象（%(value)s），已丢弃"),
    "item_text_missing": _(
        "%(field)s 的第 %(item)s 项缺少 %(text_field)s 或它不是字符串（%(value)s），已丢弃"
    ),
    "item_empty": _("%(field)s 的第 %(item)s 项是空字符串，已丢弃"),
    "item_not_string": _("%(field)s 的第 %(item)s 项不是字符串（%(value)s），已丢弃"),
    "item_failed": _("%(field)s 的第 %(item)s 项解析出错（%(error)s），已丢弃"),
}

Params = dict[str, str | int | list[int]]


@dataclass(frozen=True)
class _Problem:
    """What was wrong: the English ``text`` (stored as ``detail``), and it as a code."""

    text: str
    code: str
    params: Mapping[str, str | int | list[int]] = field(default_factory=dict)


# JSON's names for the types a JSON value decodes to (a reader knows JSON, not Python)
_JSON_TYPES = {"list": "array", "str": "string", "int": "number", "float": "number"}
_JSON_TYPES |= {"bool": "boolean", "NoneType": "null"}


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
    for _attempt in range(_MAX_CANDIDATES):
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
ItemT = TypeVar("ItemT")  # an item a list parser keeps (a hypothesis, an action, a text)


def _bounded(params: Mapping[str, str | int | list[int]]) -> Params:
    return {
        name: detail_clip(value, _PARAM_MAX_CHARS) if isinstance(value, str) else value
        for name, value in params.items()
    }


@dataclass(frozen=True)
class Parsed(Generic[ModelT]):
    """A whole-object contract after tolerant parsing: ``output`` is set only when ``ok``.

    ``detail`` says in English what was wrong; ``detail_code`` and ``detail_params`` say
    the same as a code (``PARSE_DETAILS``) a page words in its own language.
    """

    status: str
    output: ModelT | None
    detail: str
    detail_code: str = ""
    detail_params: Params = field(default_factory=dict)


def detail_coded(result: object) -> dict[str, object]:
    """A stage result's ``detail_code`` and ``detail_params``, to store beside its ``detail``.

    ``{}`` when it has no code, so a record without a problem reads as it always did.
    """
    code = getattr(result, "detail_code", "")
    if not code:
        return {}
    return {"detail_code": code, "detail_params": dict(getattr(result, "detail_params", {}))}


def _problem_parsed(status: ParseStatus, problem: _Problem) -> Parsed[Any]:
    return Parsed(status.value, None, problem.text, problem.code, _bounded(problem.params))


def _output_problem(raw: object, status: str, value: object) -> tuple[ParseStatus, _Problem] | None:
    """Why what was extracted from ``raw`` is not a JSON object (None when it is one)."""
    if status != EXTRACT_OK and (status == EXTRACT_UNTERMINATED or text_cut(raw)):
        return ParseStatus.TRUNCATED, _Problem(_TRUNCATED_DETAIL, "output_truncated")
    if status == EXTRACT_EMPTY:
        return ParseStatus.EMPTY, _Problem("the output is empty", "output_empty")
    if status != EXTRACT_OK:
        detail = "no JSON value found in the output"
        return ParseStatus.INVALID_JSON, _Problem(detail, "output_no_json")
    if not isinstance(value, dict):
        name = type(value).__name__
        detail = f"the JSON value is a {name}, not an object"
        params: Params = {"type": _JSON_TYPES.get(name, name)}
        return ParseStatus.NOT_AN_OBJECT, _Problem(detail, "output_not_object", params)
    return None


def _failed_problem(exc: BaseException, text: str, code: str = "parse_failed") -> _Problem:
    """Parsing itself raised ``exc`` (a model's own validator, RecursionError, …)."""
    return _Problem(text, code, {"error": type(exc).__name__})


def model_output_parse(raw: object, model: type[ModelT]) -> Parsed[ModelT]:
    """Tolerant parse of a whole-object contract (verifier_v2, composer_v1, planner).

    The status is one of ``ok``, ``empty``, ``invalid_json``, ``not_an_object``,
    ``schema_invalid``, ``truncated``; ``detail`` says what was wrong. Validation
    of the object is strict (the model's own rules). Never raises.
    """
    try:
        status, value = json_object_extract(raw)  # type: ignore[arg-type]
        problem = _output_problem(raw, status, value)
        if problem is not None:
            return _problem_parsed(*problem)
        try:
            return Parsed("ok", model.model_validate(value), "")
        except ValidationError as exc:
            fields = _invalid_fields(exc)
            problem_ = _Problem(
                detail_clip(_validation_summary(exc), 1000),
                "output_fields_invalid" if fields else "output_invalid",
                {"fields": fields} if fields else {},
            )
            return _problem_parsed(ParseStatus.SCHEMA_INVALID, problem_)
    except Exception as exc:  # a model's own validator misbehaving, RecursionError, …
        text = detail_clip(f"{type(exc).__name__}: {exc}", 1000)
        return _problem_parsed(ParseStatus.SCHEMA_INVALID, _failed_problem(exc, text))


_TRUNCATED_DETAIL = "the output was cut off before its JSON object closed (max_tokens?)"


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg', '')}")
    return "; ".join(parts)


def _invalid_fields(exc: ValidationError) -> str:
    """The field paths a validation error names ("" when it names the whole object)."""
    locs = (
        ".".join(str(p) for p in err.get("loc", ()))
        for err in exc.errors(include_url=False, include_input=False)[:10]
    )
    return ", ".join(dict.fromkeys(loc for loc in locs if loc))


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


def finding(
    code: FindingCode | str,
    detail: str = "",
    binding: int | None = None,
    *,
    detail_code: str | None = None,
    params: Mapping[str, str | int | list[int]] | None = None,
) -> Finding:
    """One finding with a bounded detail (shared with the Gatekeeper).

    ``detail_code`` and ``params`` say what the English ``detail`` says, so a page words
    it in its own language (``PARSE_DETAILS``, the Gatekeeper's ``FINDING_DETAILS``).
    ``params`` is a mapping, not keyword arguments, so a parameter may have any name
    (``code``, ``detail``, ``binding``) without taking the finding's own.
    """
    return Finding(
        code=str(getattr(code, "value", code)),
        binding=binding,
        detail=detail_clip(detail),
        detail_code=detail_code,
        detail_params=_bounded(params or {}),
    )


def _problem_finding(code: FindingCode, problem: _Problem, binding: int | None = None) -> Finding:
    return finding(code, problem.text, binding, detail_code=problem.code, params=problem.params)


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
