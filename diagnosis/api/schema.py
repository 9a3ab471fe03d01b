"""What the OpenAPI schema says beyond the serializers: links between operations, and the
rate-limit headers of every answer (drf-spectacular postprocessing hooks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

API_PREFIX = "/api/v1/"


@dataclass(frozen=True)
class Link:
    """An operation that a created object's response enables, and how to name the object."""

    name: str  # the link's name in the response's ``links``
    operation_id: str
    parameter: str  # the linked operation's path parameter
    value: str  # an OpenAPI runtime expression into the creating response
    description: str


_DIAGNOSIS_LINKS = (
    ("GetDiagnosis", "diagnosis_retrieve", "Read the diagnosis: its progress, claims, answer."),
    (
        "ListToolInvocations",
        "diagnosis_tool_invocations",
        "The tool invocations it made, with outputs.",
    ),
    (
        "ListCallbackAttempts",
        "diagnosis_callback_attempts",
        "Each delivery attempt of its callback.",
    ),
    ("CancelDiagnosis", "diagnosis_cancel", "Cancel it while it is queued or running."),
)

# (operation id, status) of each create operation → the operations its response enables.
# The Alertmanager webhook creates a diagnosis too, but enables nothing for its caller:
# a receiver token authenticates the webhook only, so a link from it would lead nowhere.
LINKS: dict[tuple[str, str], tuple[Link, ...]] = {
    ("diagnosis_create", "202"): tuple(
        Link(name, operation, "public_id", "$response.body#/id", description)
        for name, operation, description in _DIAGNOSIS_LINKS
    ),
    ("api_key_create", "201"): (
        Link(
            "RevokeApiKey",
            "api_key_revoke",
            "key_id",
            "$response.body#/id",
            "Revoke the key (the run's credentials stop working).",
        ),
    ),
}

RATE_LIMIT_HEADERS: dict[str, dict[str, Any]] = {
    "RateLimit-Limit": {
        "description": "Requests the caller's bucket allows per window (API_RATE_LIMIT). "
        "On every answer to an authenticated request (an API key, a receiver token, a browser "
        "session) while a limit is set.",
        "schema": {"type": "integer", "minimum": 1},
    },
    "RateLimit-Remaining": {
        "description": "Requests left in the window, this one counted.",
        "schema": {"type": "integer", "minimum": 0},
    },
    "RateLimit-Reset": {
        "description": "Seconds until the oldest request counted in the window leaves it "
        "(the window slides); on a 429, equal to Retry-After.",
        "schema": {"type": "integer", "minimum": 1},
    },
}
RETRY_AFTER = {
    "description": "Seconds to wait before the next request is let in.",
    "schema": {"type": "integer", "minimum": 1},
}


def _operations(result: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each operation of the schema by its id: (its path, the operation)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            if isinstance(operation, dict) and "operationId" in operation:
                found[operation["operationId"]] = (path, operation)
    return found


def _links_add(operations: dict[str, tuple[str, dict[str, Any]]]) -> None:
    for (creator, status), links in LINKS.items():
        response = operations[creator][1]["responses"][status]
        for link in links:
            path, _ = operations[link.operation_id]
            if f"{{{link.parameter}}}" not in path:
                raise ValueError(f"{link.operation_id} has no path parameter {link.parameter}")
            response.setdefault("links", {})[link.name] = {
                "operationId": link.operation_id,
                "parameters": {link.parameter: link.value},
                "description": link.description,
            }


def links_and_rate_limit_headers(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular hook: the create operations' links; RateLimit-* on every answer.

    A link that names an operation or a parameter the schema lacks fails the schema's
    generation (a KeyError or ValueError), so a renamed operation cannot leave one dangling.
    """
    operations = _operations(result)
    _links_add(operations)
    headers = result.setdefault("components", {}).setdefault("headers", {})
    headers.update(RATE_LIMIT_HEADERS)
    headers["Retry-After"] = RETRY_AFTER
    refs = {name: {"$ref": f"#/components/headers/{name}"} for name in RATE_LIMIT_HEADERS}
    for path, operation in operations.values():
        if not path.startswith(API_PREFIX):
            continue
        for status, response in operation["responses"].items():
            response.setdefault("headers", {}).update(refs)
            if status == "429":
                response["headers"]["Retry-After"] = {"$ref": "#/components/headers/Retry-After"}
    return result
