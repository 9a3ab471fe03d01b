"""Malformed Alertmanager payloads: the one error shape, no session, never a 500."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.test import Client

from diagnosis.alerts.services import alert_receiver_create
from diagnosis.models import AlertGroupStart, DiagnosisSession, Environment

URL = "/api/v1/integrations/alertmanager/prod-am"


def _alert(**overrides):
    alert = {
        "status": "firing",
        "labels": {"alertname": "HighErrorRate", "service": "checkout-service"},
        "annotations": {"summary": "5xx 比例超过 5%"},
        "startsAt": "2026-03-02T10:20:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
    }
    alert.update(overrides)
    return alert


def _payload(**overrides):
    body = {
        "version": "4",
        "groupKey": '{}:{alertname="HighErrorRate"}',
        "status": "firing",
        "receiver": "rootproof",
        "groupLabels": {"alertname": "HighErrorRate"},
        "commonLabels": {"alertname": "HighErrorRate"},
        "commonAnnotations": {},
        "alerts": [_alert()],
    }
    body.update(overrides)
    return body


def _without(key):
    body = _payload()
    del body[key]
    return body


def _json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


MALFORMED: dict[str, tuple[bytes, str]] = {
    "not JSON": (b'{"version": "4", "alerts": [', "application/json"),
    "empty body": (b"", "application/json"),
    "a JSON array": (_json([_payload()]), "application/json"),
    "a JSON string": (_json("firing"), "application/json"),
    "JSON null": (b"null", "application/json"),
    "NaN": (b'{"version": "4", "alerts": NaN}', "application/json"),
    "not UTF-8": (b'{"version": "4\xff\xfe", "alerts": []}', "application/json"),
    "not JSON at all (text/plain)": (b"alert!", "text/plain"),
    "missing alerts": (_json(_without("alerts")), "application/json"),
    "missing groupKey": (_json(_without("groupKey")), "application/json"),
    "alerts not a list": (_json(_payload(alerts={"0": _alert()})), "application/json"),
    "alerts holding null": (_json(_payload(alerts=[None])), "application/json"),
    "labels not an object": (
        _json(_payload(alerts=[_alert(labels="service=x")])),
        "application/json",
    ),
    "labels a list": (
        _json(_payload(alerts=[_alert(labels=["service", "x"])])),
        "application/json",
    ),
    "nested junk in labels": (
        _json(_payload(alerts=[_alert(labels={"service": {"a": [1, {"b": None}]}})])),
        "application/json",
    ),
    "NUL in a label": (
        _json(_payload(alerts=[_alert(labels={"service": "pay\u0000ment"})])),
        "application/json",
    ),
    "startsAt garbage": (
        _json(_payload(alerts=[_alert(startsAt="yesterday-ish")])),
        "application/json",
    ),
    "startsAt a number": (
        _json(_payload(alerts=[_alert(startsAt=1772446800)])),
        "application/json",
    ),
    "status unknown": (_json(_payload(status="exploded")), "application/json"),
    "version 3": (_json(_payload(version="3")), "application/json"),
    "deeply nested arrays": (
        b'{"alerts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "application/json",
    ),
    "1 MB of labels": (
        _json(_payload(alerts=[_alert(labels={"service": "x" * 1_100_000})])),
        "application/json",
    ),
}


@pytest.fixture
def receiver_token(owner, db):
    cache.clear()
    environment = Environment.objects.create(slug="shop", name="Shop", services=["checkout"])
    _, token = alert_receiver_create(
        slug="prod-am", name="Prod", owner=owner, environment=environment
    )
    yield token
    cache.clear()


@pytest.fixture(autouse=True)
def _no_flow_runs(no_flow_runs):
    """These tests build sessions in the database; the flow itself is not run here."""


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_alertmanager_payload_is_refused_in_the_one_error_shape(receiver_token, case):
    body, content_type = MALFORMED[case]
    client = Client(raise_request_exception=False)
    response = client.post(
        URL, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {receiver_token}"
    )
    assert response.status_code in {400, 413, 415}, (response.status_code, response.content[:300])
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    assert isinstance(error["message"], str) and error["message"]
    assert DiagnosisSession.objects.count() == 0
    assert AlertGroupStart.objects.count() == 0


def test_a_huge_but_valid_label_starts_a_session_whose_question_stays_bounded(
    receiver_token, settings
):
    body = _payload(alerts=[_alert(labels={"alertname": "X", "service": "y" * 500_000})])
    client = Client()
    response = client.post(
        URL,
        _json(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {receiver_token}",
    )
    assert response.status_code == 202
    session = DiagnosisSession.objects.get()
    assert len(session.original_query) <= settings.API_QUESTION_MAX_CHARS
    assert "y" * (settings.ALERTMANAGER_TEXT_MAX_CHARS + 1) not in session.original_query
