"""The API's JSON is a contract: what integrators read today, field by field, in order.

A fixed world (a completed session with claims, facts, routing notes and a delivered
callback; a failed, a cancelled, a running and a queued one; tool invocations with an
error row; API keys) is read through every GET endpoint and the callback body, and the
bodies must equal ``golden/wire_bodies.json`` as text, so a field that disappears, moves,
is renamed or changes type fails here. The response components of the OpenAPI schema
(each property's type, format, nullability and reference) must equal
``golden/response_components.json``, so the schema cannot drift from the bodies silently.

After an intended change of the contract, rewrite both files with
``GOLDEN_UPDATE=1 .venv/bin/pytest tests/api/test_wire_contract.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from diagnosis.callbacks.delivery import callback_body
from diagnosis.models import (
    ApiKey,
    ApiSubmission,
    CallbackAttempt,
    DiagnosisSession,
    SessionEvent,
    ToolInvocation,
)
from tests.api.conftest import client_for, completed_session_make, session_make

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).parent / "golden"
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
IDS = {
    "completed": uuid.UUID("00000000-0000-4000-8000-000000000001"),
    "failed": uuid.UUID("00000000-0000-4000-8000-000000000002"),
    "cancelled": uuid.UUID("00000000-0000-4000-8000-000000000003"),
    "running": uuid.UUID("00000000-0000-4000-8000-000000000004"),
    "queued": uuid.UUID("00000000-0000-4000-8000-000000000005"),
}
CURSOR = re.compile(r"cursor=[^&\"]+")
# Objects stored as JSON and passed through as they are: their key order is the database's
# (PostgreSQL's jsonb sorts keys), not the API's, so they compare sorted.
STORED_OBJECTS = {"window", "model_usage", "arguments", "summary", "data", "params"}


def _dated(session: DiagnosisSession, *, minutes: int, public_id: uuid.UUID) -> None:
    """Fixed ids and moments, so the bodies are the same on every run."""
    DiagnosisSession.objects.filter(pk=session.pk).update(
        public_id=public_id, created_at=T0 + timedelta(minutes=minutes)
    )
    SessionEvent.objects.filter(session=session).update(created_at=T0 + timedelta(minutes=minutes))


def _completed(owner, environment, api_key: ApiKey) -> DiagnosisSession:
    session = completed_session_make(owner=owner, environment=environment)
    evaluation = session.self_evaluation
    evaluation["gatekeeper"]["gatekeeper_version"] = "gatekeeper_v2"
    evaluation["gatekeeper"]["claims"][0]["facts"] = [
        {"text": "payment-service", "kind": "service", "start": 0, "end": 15, "binding": 0,
         "via": "argument"},
        {"text": "5000", "kind": "number", "start": 20, "end": 24, "binding": None, "via": None},
    ]  # fmt: skip
    evaluation["verifier_evaluation"].update(
        decision="PASS",
        routed_decision="LOW_CONFID",
        route_notes=["question names services the environment lacks", "an older note"],
        route_note_codes=[{"code": "scope_unknown_services", "params": {"services": ["mysql"]}}],
        composer_output={
            "status": "ok",
            "source": "composer",
            "final_answer": "…",
            "guard_findings": ["a finding"],
        },
    )
    session.self_evaluation = evaluation
    session.executor_structured_output["hypotheses"].append(
        {"hypothesis_text": "磁盘满", "entity": "payment-db", "basis": "日志"}
    )
    session.callback_url = "https://hooks.example.com/rootproof"
    session.started_at, session.finished_at = T0, T0 + timedelta(seconds=20.5)
    session.save()
    ToolInvocation.objects.filter(session=session).update(started_at=T0 + timedelta(seconds=3))
    ApiSubmission.objects.create(
        session=session,
        api_key=api_key,
        request_hash="0" * 64,
        callback_state=ApiSubmission.CallbackState.DELIVERED,
        callback_delivered_at=T0 + timedelta(minutes=1),
    )
    for attempt, status_code, error in ((1, None, "ConnectError: refused"), (2, 200, "")):
        CallbackAttempt.objects.create(
            session=session,
            attempt=attempt,
            url=session.callback_url,
            status_code=status_code,
            error=error,
            duration_ms=7,
        )
    CallbackAttempt.objects.filter(session=session).update(at=T0 + timedelta(minutes=1))
    _dated(session, minutes=0, public_id=IDS["completed"])
    return session


def _others(owner, environment, api_key: ApiKey) -> None:
    failed = session_make(
        owner=owner,
        environment=environment,
        status=DiagnosisSession.Status.FAILED,
        stage=DiagnosisSession.Stage.DONE,
        decision=DiagnosisSession.Decision.REJECT,
        answer_source=DiagnosisSession.AnswerSource.FALLBACK,
        error="timeout: the run took too long",
        started_at=T0,
        finished_at=T0 + timedelta(minutes=5),
        context={"window_hint": {"start": "2026-03-02T09:00:00Z", "end": "2026-03-02T10:00:00Z"}},
    )
    _dated(failed, minutes=1, public_id=IDS["failed"])
    cancelled = session_make(
        owner=owner,
        environment=environment,
        status=DiagnosisSession.Status.CANCELLED,
        cancel_requested=True,
        finished_at=T0 + timedelta(minutes=3),
        language="en",
    )
    _dated(cancelled, minutes=2, public_id=IDS["cancelled"])
    running = session_make(
        owner=owner,
        environment=environment,
        status=DiagnosisSession.Status.RUNNING,
        stage=DiagnosisSession.Stage.EXECUTOR,
        started_at=T0 + timedelta(minutes=3),
        attempt_count=1,
    )
    SessionEvent.objects.create(
        session=running, sequence=1, kind="tool_call", stage="executor", message="query_logs",
        data={"tool": "query_logs"},
    )  # fmt: skip
    ToolInvocation.objects.create(
        session=running,
        sequence=1,
        trace_ref="trace-1",
        tool_name="query_logs",
        arguments={"service": "checkout-service"},
        status=ToolInvocation.Status.ERROR,
        error="Loki answered 503",
        started_at=T0 + timedelta(minutes=3, seconds=1),
        duration_ms=30,
    )
    _dated(running, minutes=3, public_id=IDS["running"])
    queued = session_make(
        owner=owner, environment=environment, callback_url="https://hooks.example.com/q"
    )
    ApiSubmission.objects.create(session=queued, api_key=api_key, request_hash="1" * 64)
    _dated(queued, minutes=4, public_id=IDS["queued"])


def _stable(value: Any, names: dict[tuple[str, int], str]) -> Any:
    """The body with what differs between runs (row ids, key prefixes, now) named instead."""
    if isinstance(value, list):
        return [_stable(v, names) for v in value]
    if not isinstance(value, dict):
        return CURSOR.sub("cursor=<cursor>", value) if isinstance(value, str) else value
    stable = {}
    kind = "key" if "prefix" in value else "invocation"
    for key, item in value.items():
        if key in ("id", "invocation_id") and isinstance(item, int):
            item = names.get((kind, item), "<unknown id>")
        elif key == "prefix":
            item = "<prefix>"
        elif key == "last_used_at" and item is not None:
            item = "<now>"
        elif key == "elapsed_seconds" and value.get("finished_at") is None:
            item = "<since started>" if isinstance(item, float) else item
        elif key in STORED_OBJECTS and isinstance(item, dict):
            item = json.loads(json.dumps(item, sort_keys=True))
        stable[key] = _stable(item, names)
    return stable


def _bodies(api: APIClient) -> dict[str, Any]:
    bodies: dict[str, Any] = {"list": api.get("/api/v1/diagnoses").json()}
    for name, public_id in IDS.items():
        base = f"/api/v1/diagnoses/{public_id}"
        bodies[f"detail {name}"] = api.get(base).json()
        bodies[f"tool invocations {name}"] = api.get(f"{base}/tool-invocations").json()
        bodies[f"callback attempts {name}"] = api.get(f"{base}/callback-attempts").json()
    for invocation in ToolInvocation.objects.order_by("session__created_at", "sequence"):
        name = f"tool invocation {invocation.session.status} {invocation.trace_ref}"
        bodies[name] = api.get(f"/api/v1/tool-invocations/{invocation.pk}").json()
    bodies["api keys"] = api.get("/api/v1/api-keys").json()
    completed = DiagnosisSession.objects.get(public_id=IDS["completed"])
    callback = json.loads(callback_body(session=completed, attempt=1))
    bodies["callback body"] = {**callback, "sent_at": "<now>"}
    return bodies


def _matches_golden(name: str, actual: Any) -> None:
    text = json.dumps(actual, ensure_ascii=False, indent=1) + "\n"
    path = GOLDEN / name
    if os.environ.get("GOLDEN_UPDATE") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs; see the module docstring"


def test_every_get_endpoint_answers_the_recorded_json_field_for_field(
    owner, owner_key, environment
):
    api_key = owner_key.api_key
    _completed(owner, environment, api_key)
    _others(owner, environment, api_key)
    ApiKey.objects.filter(owner=owner).update(created_at=T0)
    names = {("key", api_key.pk): "<the request's key>"}
    for invocation in ToolInvocation.objects.select_related("session"):
        name = f"<invocation {invocation.session.status} {invocation.trace_ref}>"
        names[("invocation", invocation.pk)] = name
    bodies = _stable(_bodies(client_for(owner_key.key)), names)
    _matches_golden("wire_bodies.json", bodies)
    assert bodies["callback body"]["diagnosis"] == bodies["detail completed"]


def test_the_callback_carries_the_same_diagnosis_json_as_the_detail_in_the_same_order(
    owner, owner_key, environment
):
    session = _completed(owner, environment, owner_key.api_key)
    detail = client_for(owner_key.key).get(f"/api/v1/diagnoses/{IDS['completed']}").json()
    session.refresh_from_db()
    sent = json.loads(callback_body(session=session, attempt=1))["diagnosis"]
    assert json.dumps(sent, ensure_ascii=False) == json.dumps(detail, ensure_ascii=False)


def _shape(schema: Any) -> Any:
    """What a client relies on in a schema: types, formats, nullability, refs; not prose."""
    if isinstance(schema, list):
        return [_shape(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    kept = ("type", "format", "nullable", "$ref", "items", "properties", "required", "enum")
    kept += ("allOf", "oneOf", "anyOf", "additionalProperties")
    return {key: _shape(value) for key, value in schema.items() if key in kept}


def test_the_schema_describes_the_recorded_response_fields_and_types():
    schema = APIClient().get("/api/schema/?format=json").json()
    components = schema["components"]["schemas"]
    responses = {
        name: _shape(component)
        for name, component in components.items()
        if not name.endswith("Request") and component.get("additionalProperties") is not False
    }
    _matches_golden("response_components.json", responses)


def _queries(api: APIClient, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert api.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_reading_a_diagnosis_costs_the_key_the_session_its_events_and_its_invocations(
    owner, owner_key, environment
):
    _completed(owner, environment, owner_key.api_key)
    api = client_for(owner_key.key)
    api.get("/api/v1/api-keys")  # last_used_at is fresh: the key's lookup writes nothing
    base = f"/api/v1/diagnoses/{IDS['completed']}"
    assert _queries(api, base) == 4
    # Each invocation's diagnosis id comes from the session already read, not a query per row.
    assert _queries(api, f"{base}/tool-invocations") == 3
    assert _queries(api, "/api/v1/diagnoses") == 2
    assert _queries(api, "/api/v1/api-keys") == 2
