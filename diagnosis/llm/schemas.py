"""JSON schemas for structured output, generated from the pydantic contracts.

A server with structured output (OpenAI, vLLM, Ollama, llama.cpp) compiles the
schema into a grammar, so every answer it returns has the contract's shape.
The schemas are kept to what grammar compilers handle (llama.cpp's
json-schema-to-grammar, OpenAI's strict mode): ``$ref`` inlined, no ``title`` or
``default``, every object closed (``additionalProperties: false``) with all its
properties required (optional ones are nullable instead), enums and consts as
they are. Every list gets a ``maxItems`` unless the contract sets one: under a
grammar a small model fills lists until its token budget runs out, and an answer
an SRE reads has no use for a ninth claim or a ninth symptom. Validation stays the
contract's own: the schema only shapes the output.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel

from diagnosis.contracts import ComposerOutput, ExecutorEvidenceV2, PlannerOutput, VerifierOutput
from diagnosis.llm.base import Role

# What a role's final answer must be.
ROLE_CONTRACTS: dict[Role, type[BaseModel]] = {
    Role.PLANNER: PlannerOutput,
    Role.EXECUTOR: ExecutorEvidenceV2,
    Role.VERIFIER: VerifierOutput,
    Role.COMPOSER: ComposerOutput,
}

# The most items a list in a structured answer may hold (when the contract says nothing).
LIST_MAX_ITEMS = 8

# Keywords that carry no constraint, or that grammar compilers reject.
_DROPPED = frozenset({"title", "default", "examples", "$defs", "definitions"})


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
    if out.get("type") == "array" and "items" in out:
        out.setdefault("maxItems", LIST_MAX_ITEMS)
    if isinstance(out.get("properties"), dict):
        out["type"] = "object"
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


@cache
def contract_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The grammar-friendly JSON schema of one contract (cached: contracts are static)."""
    raw = model.model_json_schema(mode="validation")
    return _inline(raw, raw.get("$defs", {}))


def role_response_schema(role: Role) -> tuple[str, dict[str, Any]]:
    """``(name, schema)`` of the role's answer, for ``response_format``."""
    model = ROLE_CONTRACTS[role]
    version = model.model_fields
    name = next(
        (
            str(field.default)
            for key, field in version.items()
            if key.endswith("_version") and isinstance(field.default, str)
        ),
        role.value,
    )
    return name, contract_schema(model)
