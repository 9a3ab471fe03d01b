"""Tolerant reading of what a model returns: the JSON value in its text, a whole-object
contract (a plan, a verdict, an answer) validated against its model, and the findings
a parse reports, each with a stable code a page words in its reader's language.

Models wrap their JSON in prose, fences and byte-order marks, and get types wrong;
nothing here raises. A reply cut by ``max_tokens`` (``ModelText.cut``), or whose
top-level object never closes, is ``truncated`` unless a complete top-level object
was found: a complete object nested inside the unterminated one is a fragment (a
plan's ``window``, a claim's binding), never the answer. Raw control characters
inside JSON strings (a grammar-constrained server lets a model write a raw newline
there) are read as the characters they are. The Executor's per-claim reading is the
Executor's own (``diagnosis.flow.parsing``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from diagnosis.contracts import Finding, FindingCode, ParseStatus
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


def detail_clip(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """A finding's detail, bounded (shared with the Gatekeeper)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def evidence_numbers(indexes: Iterable[int]) -> str:
    """Binding indexes (as the model wrote them, from 0) as people and models read them:
    ``evidence 1, 3``, numbered from 1 as the pages number evidence."""
    return "evidence " + ", ".join(str(index + 1) for index in indexes)


Params = dict[str, str | int | list[int]]


@dataclass(frozen=True)
class Problem:
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


def _bounded(params: Mapping[str, str | int | list[int]]) -> Params:
    return {
        name: detail_clip(value, _PARAM_MAX_CHARS) if isinstance(value, str) else value
        for name, value in params.items()
    }


@dataclass(frozen=True)
class Parsed(Generic[ModelT]):
    """A whole-object contract after tolerant parsing: ``output`` is set only when ``ok``.

    ``detail`` says in English what was wrong; ``detail_code`` and ``detail_params`` say
    the same as a code (``diagnosis.wording.PARSE_DETAILS``) a page words in its own language.
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


def _problem_parsed(status: ParseStatus, problem: Problem) -> Parsed[Any]:
    return Parsed(status.value, None, problem.text, problem.code, _bounded(problem.params))


def output_problem(raw: object, status: str, value: object) -> tuple[ParseStatus, Problem] | None:
    """Why what was extracted from ``raw`` is not a JSON object (None when it is one)."""
    if status != EXTRACT_OK and (status == EXTRACT_UNTERMINATED or text_cut(raw)):
        return ParseStatus.TRUNCATED, Problem(_TRUNCATED_DETAIL, "output_truncated")
    if status == EXTRACT_EMPTY:
        return ParseStatus.EMPTY, Problem("the output is empty", "output_empty")
    if status != EXTRACT_OK:
        detail = "no JSON value found in the output"
        return ParseStatus.INVALID_JSON, Problem(detail, "output_no_json")
    if not isinstance(value, dict):
        name = type(value).__name__
        detail = f"the JSON value is a {name}, not an object"
        params: Params = {"type": _JSON_TYPES.get(name, name)}
        return ParseStatus.NOT_AN_OBJECT, Problem(detail, "output_not_object", params)
    return None


def failed_problem(exc: BaseException, text: str, code: str = "parse_failed") -> Problem:
    """Parsing itself raised ``exc`` (a model's own validator, RecursionError, …)."""
    return Problem(text, code, {"error": type(exc).__name__})


def model_output_parse(raw: object, model: type[ModelT]) -> Parsed[ModelT]:
    """Tolerant parse of a whole-object contract (verifier_v2, composer_v1, planner).

    The status is one of ``ok``, ``empty``, ``invalid_json``, ``not_an_object``,
    ``schema_invalid``, ``truncated``; ``detail`` says what was wrong. Validation
    of the object is strict (the model's own rules). Never raises.
    """
    try:
        status, value = json_object_extract(raw)  # type: ignore[arg-type]
        problem = output_problem(raw, status, value)
        if problem is not None:
            return _problem_parsed(*problem)
        try:
            return Parsed("ok", model.model_validate(value), "")
        except ValidationError as exc:
            fields = invalid_fields(exc)
            problem_ = Problem(
                detail_clip(validation_summary(exc), 1000),
                "output_fields_invalid" if fields else "output_invalid",
                {"fields": fields} if fields else {},
            )
            return _problem_parsed(ParseStatus.SCHEMA_INVALID, problem_)
    except Exception as exc:  # a model's own validator misbehaving, RecursionError, …
        text = detail_clip(f"{type(exc).__name__}: {exc}", 1000)
        return _problem_parsed(ParseStatus.SCHEMA_INVALID, failed_problem(exc, text))


_TRUNCATED_DETAIL = "the output was cut off before its JSON object closed (max_tokens?)"


def validation_summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg', '')}")
    return "; ".join(parts)


def invalid_fields(exc: ValidationError) -> str:
    """The field paths a validation error names ("" when it names the whole object)."""
    locs = (
        ".".join(str(p) for p in err.get("loc", ()))
        for err in exc.errors(include_url=False, include_input=False)[:10]
    )
    return ", ".join(dict.fromkeys(loc for loc in locs if loc))


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
    it in its own language (``diagnosis.wording``: ``PARSE_DETAILS``, ``FINDING_DETAILS``).
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


def problem_finding(code: FindingCode, problem: Problem, binding: int | None = None) -> Finding:
    return finding(code, problem.text, binding, detail_code=problem.code, params=problem.params)
