"""JSON schemas for structured output, generated from the pydantic contracts.

A server with structured output (OpenAI, vLLM, Ollama, llama.cpp) compiles the
schema into a grammar, so every answer it returns has the contract's shape.
The schemas are kept to what grammar compilers handle (llama.cpp's
json-schema-to-grammar, OpenAI's strict mode): ``$ref`` inlined, no ``title`` or
``default``, every object closed (``additionalProperties: false``) with all its
properties required (optional ones are nullable instead), enums and consts as
they are.

``bounded_schema`` adds what makes a grammar close the object within the call's
token budget: every list a ``maxItems``, every free-text string a ``maxLength``,
sized so that the longest answer the schema allows fits in ``max_tokens``. Under
a grammar a small model fills strings and lists until the budget runs out (a cut
answer parses as ``truncated``); with the bounds the grammar ends it in time,
whatever the model writes. The bounds exist only in the schema sent to the model:
validation stays the contract's own, and the Gatekeeper and Verifier judge content.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import BaseModel

# The most items a list in a structured answer may hold (when the contract says nothing);
# the budget lowers it, never below LIST_MIN_ITEMS.
LIST_MAX_ITEMS = 8
LIST_MIN_ITEMS = 1
# Free-text strings: first shortened to STRING_MID_CHARS, then the lists to two items,
# then the strings to STRING_FLOOR_CHARS, the lists to one, the strings to STRING_MIN_CHARS.
STRING_MID_CHARS = 120
STRING_FLOOR_CHARS = 24
STRING_MIN_CHARS = 8
# (lists shortened down to, while free strings stay at least): tried in order.
_PHASES = (
    (2, STRING_MID_CHARS),
    (2, STRING_FLOOR_CHARS),
    (LIST_MIN_ITEMS, STRING_FLOOR_CHARS),
    (LIST_MIN_ITEMS, STRING_MIN_CHARS),
)

# Worst-case token costs (byte-level BPE tokenizers: a string's character is at most
# about a token; keys and punctuation are about two characters a token; llama.cpp's
# grammar allows integers of up to 16 digits and one space after each token).
_STRUCTURE_CHARS_PER_TOKEN = 2.0
_INTEGER_TOKENS = 17.0
_NUMBER_TOKENS = 40.0
_SMALL_TOKENS = 2.0  # true / false / null / a quote pair

# Keywords that carry no constraint, or that grammar compilers reject.
_DROPPED = frozenset({"title", "default", "examples", "$defs", "definitions"})
# A string with one of these is not free text: it needs no length of ours.
_SHAPED_STRING_KEYS = frozenset({"enum", "const", "format", "pattern", "maxLength"})


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 32:  # the contracts are not recursive; a cycle here is a bug, not input
        raise ValueError("schema nesting too deep (recursive contract?)")
    if isinstance(node, list):
        return [_inline(item, defs, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[str(node["$ref"]).rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline(merged, defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _inline(sub, defs, depth + 1) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs, depth + 1)
    if isinstance(out.get("properties"), dict):
        out["type"] = "object"
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


@cache
def _contract_schema_cached(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(mode="validation")
    return _inline(raw, raw.get("$defs", {}))


def contract_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The grammar-friendly JSON schema of one contract, without bounds of ours (a copy)."""
    return copy.deepcopy(_contract_schema_cached(model))


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def _is_free_string(node: dict[str, Any]) -> bool:
    return node.get("type") == "string" and not _SHAPED_STRING_KEYS & node.keys()


def _literal_tokens(value: Any) -> float:
    return len(json.dumps(value, ensure_ascii=False)) / _STRUCTURE_CHARS_PER_TOKEN + 1


def _cost(node: Any, chars: int) -> float:
    """The most tokens an answer to ``node`` may take, free strings being ``chars`` long."""
    if not isinstance(node, dict) or not node:
        return 64.0  # an unconstrained value: the contracts have none
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        return max(_cost(branch, chars) for branch in branches)
    if "const" in node:
        return _literal_tokens(node["const"])
    if "enum" in node:
        return max(_literal_tokens(value) for value in node["enum"])
    kind = node.get("type")
    if kind == "object":
        properties = node.get("properties") or {}
        return _SMALL_TOKENS + sum(
            _literal_tokens(name) + 1 + _cost(sub, chars) for name, sub in properties.items()
        )
    if kind == "array":
        items = int(node.get("maxItems", LIST_MAX_ITEMS))
        return _SMALL_TOKENS + items * (_cost(node.get("items"), chars) + 1)
    if kind == "string":
        length = node.get("maxLength", chars if _is_free_string(node) else 32)
        return _SMALL_TOKENS + int(length)
    return {"integer": _INTEGER_TOKENS, "number": _NUMBER_TOKENS}.get(str(kind), _SMALL_TOKENS)


def _fitted_chars(schema: dict[str, Any], budget: float, ceiling: int, floor: int) -> int | None:
    """The longest free-string length in ``[floor, ceiling]`` that fits, or None."""
    fixed = _cost(schema, 0)
    per_char = _cost(schema, 1) - fixed
    if per_char <= 0:
        return ceiling if fixed <= budget else None
    chars = min(ceiling, int((budget - fixed) / per_char))
    return chars if chars >= floor else None


def _lists_shrink(
    schema: dict[str, Any], budget: float, ceiling: int, chars: int, floor: int
) -> None:
    """Take items off the lists, the one saving most first (each down to ``floor``), until
    free strings of ``chars`` fit the budget."""
    arrays = [n for n in _nodes(schema) if n.get("type") == "array" and "items" in n]
    while _fitted_chars(schema, budget, ceiling, chars) is None:
        best: tuple[float, dict[str, Any]] | None = None
        for array in (a for a in arrays if a["maxItems"] > floor):
            array["maxItems"] -= 1
            cost = _cost(schema, chars)
            array["maxItems"] += 1
            if best is None or cost < best[0]:
                best = (cost, array)
        if best is None:
            return
        best[1]["maxItems"] -= 1


def _chars_within(schema: dict[str, Any], budget: float) -> int:
    """Sets every list's ``maxItems`` and returns the free strings' length (the phases above)."""
    for array in (n for n in _nodes(schema) if n.get("type") == "array" and "items" in n):
        array["maxItems"] = min(int(array.get("maxItems", LIST_MAX_ITEMS)), LIST_MAX_ITEMS)
    ceiling = max(int(budget), STRING_MIN_CHARS)
    for list_floor, string_floor in _PHASES:
        _lists_shrink(schema, budget, ceiling, string_floor, list_floor)
        chars = _fitted_chars(schema, budget, ceiling, string_floor)
        if chars is not None:
            return chars
        ceiling = string_floor
    return STRING_MIN_CHARS  # too small a budget for the contract: the reply will be cut


@cache
def _bounded_schema_cached(model: type[BaseModel], max_tokens: int) -> dict[str, Any]:
    schema = contract_schema(model)
    chars = _chars_within(schema, float(max_tokens))
    for node in _nodes(schema):
        if _is_free_string(node):
            node["maxLength"] = chars
    return schema


def bounded_schema(model: type[BaseModel], max_tokens: int) -> dict[str, Any]:
    """The contract's schema with every list and free string bounded to fit ``max_tokens``."""
    return copy.deepcopy(_bounded_schema_cached(model, max_tokens))


def schema_cost(schema: dict[str, Any]) -> float:
    """The most tokens an answer to a bounded schema may take (its free strings at maxLength)."""
    return _cost(schema, 0)


def contract_schema_name(model: type[BaseModel]) -> str:
    """A contract's version (``planner_v1``…): the schema's name in response_format."""
    return next(
        (
            str(field.default)
            for key, field in model.model_fields.items()
            if key.endswith("_version") and isinstance(field.default, str)
        ),
        model.__name__,
    )


def contract_response_schema(
    model: type[BaseModel], max_tokens: int | None = None
) -> tuple[str, dict[str, Any]]:
    """``(name, schema)`` of an answer to ``model``, for ``response_format``: bounded to
    ``max_tokens`` when given, the contract's own shape otherwise."""
    schema = contract_schema(model) if max_tokens is None else bounded_schema(model, max_tokens)
    return contract_schema_name(model), schema
