"""The schema and the validators are one rule: what the schema accepts, the endpoint accepts.

The test walks the OpenAPI document the API serves: every request-body property (nested
objects and blank branches included), query parameter, path parameter and header that
states a pattern, a length, an enum, a range or a date-time format. For each it builds the
boundary cases of what it states (the limit and one past it, each enum value and near
misses, the pattern's edges from a shared corpus: whitespace at either end, a NUL, a
non-ASCII letter, URLs and times that some parsers take and others refuse), sends each in
an otherwise valid request to the real endpoint, and checks that the endpoint accepts it
exactly when the schema does (schemathesis's own validator, formats included). A 400 is
"refused"; anything else (a 202, a 200, a 404 for an environment no one created) is
"accepted": the schema cannot know which environments exist.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import jsonschema_rs
import pytest
from rest_framework.test import APIClient

from diagnosis.alerts.services import alert_receiver_create
from tests.api.conftest import session_make
from tests.api.served import RECEIVER

pytestmark = pytest.mark.django_db

HOOK = "https://ops.example.com/hook"
TEXT_EDGES = ("", " ", "a", "-", "_", "a b", " a", "a ", "a\n", "\na", "a\x00b", "é", "\u00a0", "0")
URL_EDGES = (
    "https://0.a",
    "https://a.b",
    "https://a.bc",
    "http://localhost",
    "HTTP://LOCALHOST:8000/x",
    "http://127.0.0.1:9/hook",
    "http://256.1.1.1/",
    "http://1.2.3.4.5/",
    "http://[::1]/",
    "http://[2001:db8::1]:443/a?b=c#d",
    "http://[1::2::3]/",
    "http://[::ffff:10.0.0.1]/",
    "https://a-.example.com/",
    "https://-a.example.com/",
    "https://xn--fiqs8s.cn/",
    "https://例子.cn/",
    "https://ops.example.com:65535/",
    "https://ops.example.com:65536/",
    "https://ops.example.com:0/",
    "https://ops.example.com/%zz",
    "https://ops.example.com/%2F",
    "https://ops.example.com/a b",
    'https://ops.example.com/"',
    "https://user:pw@ops.example.com/",
    "https://ops.example.com./",
    "ftp://ops.example.com/",
    "https:/ops.example.com",
    "https://",
)
TIME_EDGES = (
    "2026-03-02T10:20:00Z",
    "2026-03-02t10:20:00z",
    "2026-03-02T10:20:00+05:30",
    "2026-03-02T10:20:00.123456789-00:00",
    "2026-03-02T10:20:00",
    "2026-03-02 10:20:00Z",
    "2026-03-02T10:20Z",
    "2026-03-02",
    "2026-02-29T00:00:00Z",
    "2024-02-29T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-03-02T23:59:60Z",
    "2026-03-02T24:00:00Z",
    "2026-03-02T10:20:00+24:00",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-01:00",
)


@dataclass(frozen=True)
class Slot:
    """One place in a request where the schema states a rule."""

    operation: str  # "METHOD /path" in the schema
    location: str  # body, query, path, header
    name: tuple[str, ...]  # the property's path in the body, else (name,)
    schema: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.operation} {self.location}:{'.'.join(self.name)}"


def _resolved(node: Any, document: dict[str, Any]) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


RULES = {"pattern", "maxLength", "minLength", "enum", "minimum", "maximum"}


def _constrained(schema: dict[str, Any]) -> bool:
    if "oneOf" in schema:
        return _constrained(schema["oneOf"][0])
    return bool(RULES & set(schema)) or schema.get("format") == "date-time"


def _leaves(node: Any, document: dict[str, Any], name: tuple[str, ...]) -> Iterator[Any]:
    """(property path, leaf schema) of every constrained leaf under a body schema."""
    node = _resolved(node, document)
    if "allOf" in node and len(node["allOf"]) == 1:  # drf-spectacular's enum with a description
        yield from _leaves(node["allOf"][0], document, name)
    elif node.get("type") == "object" and "properties" in node:
        for key, child in node["properties"].items():
            yield from _leaves(child, document, (*name, key))
    elif node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
        yield from _leaves(node["additionalProperties"], document, (*name, "*"))
    elif node.get("type") == "array" and "items" in node:
        yield from _leaves(node["items"], document, (*name, "0"))
    elif "oneOf" in node:  # text or blank: the first branch states the text's rule
        leaf = {"oneOf": [_resolved(b, document) for b in node["oneOf"]]}
        if _constrained(leaf):
            yield name, leaf
    elif _constrained(node):
        yield name, node


def _slots(document: dict[str, Any]) -> list[Slot]:
    slots: list[Slot] = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            label = f"{method.upper()} {path}"
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                for name, schema in _leaves(body["schema"], document, ()):
                    slots.append(Slot(label, "body", name, schema))
            for parameter in operation.get("parameters", []):
                schema = _resolved(parameter["schema"], document)
                if parameter["in"] in ("query", "path", "header") and _constrained(schema):
                    slots.append(Slot(label, parameter["in"], (parameter["name"],), schema))
    return slots


def _text_rules(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["oneOf"][0] if "oneOf" in schema else schema


def _cases(schema: dict[str, Any], valid: Any, *, in_body: bool) -> list[Any]:
    """The boundary cases of a leaf's rules, around a value the request takes.

    Outside the body a value is text on the wire: an integer parameter's cases are integers
    (sent as their digits), as a client that follows the schema sends them.
    """
    rules = _text_rules(schema)
    if "enum" in rules:
        values = [v for v in rules["enum"] if v is not None]
        return [*values, *(f"{v}x" for v in values), *(str(v).upper() for v in values), "", 4]
    if rules.get("type") == "integer":
        cases: list[Any] = [valid, "1", 1.0, True] if in_body else [valid]
        for bound, step in (("minimum", -1), ("maximum", 1)):
            if bound in rules:
                cases += [rules[bound], rules[bound] + step]
        return cases
    cases = [valid, *TEXT_EDGES, valid + " ", " " + valid, valid + "\n"]
    if rules.get("format") == "date-time" or "date-time" in str(rules.get("pattern", "")):
        cases += TIME_EDGES
    if "[Hh][Tt][Tt][Pp]" in rules.get("pattern", ""):
        cases += URL_EDGES
    for limit, reach in (("maxLength", 0), ("maxLength", 1), ("minLength", 0), ("minLength", -1)):
        if limit in rules and isinstance(valid, str):
            length = rules[limit] + reach
            if length >= 0:
                cases.append((valid + "a" * length)[:length] if length < len(valid) else None)
                cases.append(valid + "a" * max(length - len(valid), 0))
    return [c for c in cases if c is not None]


def _schema_accepts(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema_rs.Draft4Validator(schema, validate_formats=True).is_valid(value)


def _alert_body() -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HighErrorRate"}',
        "status": "firing",
        "receiver": "rootproof",
        "groupLabels": {"alertname": "HighErrorRate"},
        "commonLabels": {"alertname": "HighErrorRate", "service": "checkout-service"},
        "commonAnnotations": {"summary": "5xx above 5%"},
        "externalURL": "http://alertmanager:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "HighErrorRate", "service": "checkout-service"},
                "annotations": {"summary": "5xx above 5%"},
                "startsAt": "2026-03-02T10:20:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus:9090/graph",
                "fingerprint": "abc",
            }
        ],
    }


# A request each operation takes: the body, query, path and headers a case varies.
def _valid_request(operation: str, public_id: str = "") -> dict[str, Any]:
    bodies = {
        "POST /api/v1/diagnoses": {
            "question": "q",
            "environment": "shop",
            "callback_url": HOOK,
            "language": "en",
            "context": {
                "services": ["checkout-service"],
                "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:30:00Z"},
            },
        },
        "POST /api/v1/api-keys": {"name": "ci"},
        "POST /api/v1/integrations/alertmanager/{receiver}": _alert_body(),
    }
    path = {"receiver": RECEIVER, "public_id": public_id}
    query = {
        "environment": "shop",
        "created_after": "2026-03-01T00:00:00Z",
        "created_before": "2026-03-03T00:00:00Z",
        "page_size": 5,
        "status": "completed",
        "decision": "PASS",
        "source": "api",
    }
    return {
        "body": bodies.get(operation),
        "path": path,
        "query": query,
        "header": {"Idempotency-Key": "k-1"},
    }


def _key(node: Any, part: str) -> Any:
    """Where a path part points: a list's index, a map's first key for "*", else the key."""
    if isinstance(node, list):
        return int(part)
    return next(iter(node)) if part == "*" else part


def _step(node: Any, part: str) -> Any:
    return node[_key(node, part)]


# Values a request may carry but the valid one above leaves out.
OPTIONAL = {"cursor": "opaque"}


def _valid_value(slot: Slot) -> Any:
    node: Any = _valid_request(slot.operation)[slot.location]
    if slot.location != "body":
        return node.get(slot.name[0], OPTIONAL.get(slot.name[0]))
    for part in slot.name:
        node = _step(node, part)
    return node


def _send(
    clients: tuple[APIClient, APIClient], slot: Slot, value: Any, n: int, public_id: str
) -> int:
    api, receiver_api = clients
    request = copy.deepcopy(_valid_request(slot.operation, public_id))
    if slot.location == "body":
        node = request["body"]
        for part in slot.name[:-1]:
            node = _step(node, part)
        node[_key(node, slot.name[-1])] = value
        if slot.operation.endswith("{receiver}") and slot.name != ("groupKey",):
            request["body"]["groupKey"] = f"group-{n}"  # a new group each time: 202, not 200
    else:
        request[slot.location] = {**request[slot.location], slot.name[0]: value}
    method, path = slot.operation.split(" ", 1)
    client = receiver_api if path.endswith("{receiver}") else api
    for name, part in request["path"].items():  # percent-encoded, as a client sends it
        path = path.replace(f"{{{name}}}", quote(str(part), safe=""))
    headers = {f"HTTP_{k.upper().replace('-', '_')}": str(v) for k, v in request["header"].items()}
    headers["HTTP_IDEMPOTENCY_KEY"] = (
        request["header"]["Idempotency-Key"] if slot.location == "header" else f"k-{n}"
    )
    if method == "GET":
        return client.get(path, {k: str(v) for k, v in request["query"].items()}).status_code
    return client.post(path, request["body"], format="json", **headers).status_code


@pytest.fixture
def receiver_api(owner, environment) -> APIClient:
    _, token = alert_receiver_create(
        slug=RECEIVER, name="Prod", owner=owner, environment=environment
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def document() -> dict[str, Any]:
    return APIClient().get("/api/schema/?format=json").json()


def test_the_walk_finds_every_rule_the_schema_states(document) -> None:
    found = {str(slot) for slot in _slots(document)}
    expected = {
        "POST /api/v1/diagnoses body:question",
        "POST /api/v1/diagnoses body:environment",
        "POST /api/v1/diagnoses body:callback_url",
        "POST /api/v1/diagnoses body:language",
        "POST /api/v1/diagnoses body:context.services.0",
        "POST /api/v1/diagnoses body:context.window.start",
        "POST /api/v1/diagnoses body:context.window.end",
        "POST /api/v1/diagnoses header:Idempotency-Key",
        "GET /api/v1/diagnoses query:environment",
        "GET /api/v1/diagnoses query:created_after",
        "GET /api/v1/diagnoses query:created_before",
        "GET /api/v1/diagnoses query:page_size",
        "GET /api/v1/diagnoses query:status",
        "POST /api/v1/api-keys body:name",
        "POST /api/v1/integrations/alertmanager/{receiver} path:receiver",
        "POST /api/v1/integrations/alertmanager/{receiver} body:version",
        "POST /api/v1/integrations/alertmanager/{receiver} body:groupKey",
        "POST /api/v1/integrations/alertmanager/{receiver} body:alerts.0.startsAt",
        "POST /api/v1/integrations/alertmanager/{receiver} body:alerts.0.labels.*",
        "POST /api/v1/integrations/alertmanager/{receiver} body:commonAnnotations.*",
    }
    assert expected <= found, sorted(expected - found)


def _disagreements(
    document: dict[str, Any], clients: tuple[APIClient, APIClient], public_id: str
) -> tuple[list[str], int]:
    """Each boundary case on which the schema and the endpoint differ, and the cases sent."""
    disagreements: list[str] = []
    sent = 0
    for slot in _slots(document):
        for value in _cases(slot.schema, _valid_value(slot), in_body=slot.location == "body"):
            sent += 1
            status = _send(clients, slot, value, sent, public_id)
            assert status < 500, (str(slot), value, status)
            schema = _schema_accepts(slot.schema, value)
            # A path the schema refuses names no endpoint (404); a refused value elsewhere is 400.
            refused = status == (404 if slot.location == "path" else 400)
            if refused == schema:
                disagreements.append(f"{slot} {value!r}: schema {schema}, endpoint {status}")
    return disagreements, sent


@pytest.fixture
def world(api, receiver_api, settings, no_flow_runs, owner, environment) -> Any:
    settings.API_RATE_LIMIT = ""
    public_id = str(session_make(owner=owner, environment=environment).public_id)
    return (api, receiver_api), public_id


def test_each_boundary_case_is_accepted_by_the_endpoint_exactly_when_by_the_schema(
    document, world
) -> None:
    disagreements, sent = _disagreements(document, *world)
    assert not disagreements, "\n".join(disagreements)
    assert sent > 300  # the walk found the rules and their cases


def test_the_walk_sees_a_schema_looser_than_its_validator(document, world) -> None:
    """The issue's schema: a callback pattern that checks the scheme only."""
    create = document["components"]["schemas"]["DiagnosisCreateRequest"]
    create["properties"]["callback_url"]["oneOf"][0]["pattern"] = "^[Hh][Tt][Tt][Pp][Ss]?://"
    disagreements, _ = _disagreements(document, *world)
    assert "POST /api/v1/diagnoses body:callback_url 'https://0.a': schema True, endpoint 400" in (
        disagreements
    )
    assert all("body:callback_url" in found for found in disagreements)


def test_a_time_past_the_calendar_in_utc_is_its_first_or_last_instant(api, owner, environment):
    session_make(owner=owner, environment=environment)
    early, late = "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"
    listed = api.get("/api/v1/diagnoses", {"created_after": early, "created_before": late})
    assert listed.status_code == 200 and len(listed.json()["results"]) == 1
    assert api.get("/api/v1/diagnoses", {"created_after": late}).json()["results"] == []
    assert api.get("/api/v1/diagnoses", {"created_before": early}).json()["results"] == []
