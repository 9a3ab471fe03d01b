"""Secrets never land in clear in the database, the logs or an audit snapshot.

The test uses each secret for real (an LLM key on a session run through the `openai`
provider, an API key, a callback signing secret, an Alertmanager receiver token, a
password typed at the login form), then reads every text and JSON column of every
table, every log record and the exported regression case, looking for them.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import zipfile

import pytest
from django.apps import apps
from django.db import models
from django.test import Client
from django.urls import reverse

from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api.services import api_key_create
from diagnosis.models import ApiSubmission, DiagnosisSession
from tests.api.test_callbacks import Receiver
from tests.flow.conftest import MINI_PACK
from tests.support.openai_roles import role_responder
from tests.support.openai_server import openai_server_running

pytestmark = pytest.mark.django_db(transaction=True)


def _alert(starts_at: str) -> dict:
    labels = {"alertname": "PaymentTimeouts", "service": "payment-service", "severity": "page"}
    return {
        "version": "4",
        "groupKey": '{}:{alertname="PaymentTimeouts"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "rootproof",
        "groupLabels": {"alertname": "PaymentTimeouts"},
        "commonLabels": labels,
        "commonAnnotations": {"summary": "payment-service 超时"},
        "externalURL": "http://alertmanager.local:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": "payment-service 超时"},
                "startsAt": starts_at,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.local/graph",
                "fingerprint": "f00d",
            }
        ],
    }


def _text_columns(model: type[models.Model]) -> list[str]:
    return [
        f.attname
        for f in model._meta.concrete_fields
        if isinstance(f, models.CharField | models.TextField | models.JSONField)
    ]


def _database_text() -> dict[str, str]:
    """Every text and JSON value of every table, as one string per model."""
    dumps = {}
    for model in apps.get_models(include_auto_created=True):
        columns = _text_columns(model)
        if not columns:
            continue
        rows = model._default_manager.values_list(*columns)
        dumps[model._meta.label] = "\n".join(
            json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
            for row in rows
            for value in row
            if value is not None
        )
    return dumps


def test_no_secret_is_stored_logged_or_exported_in_clear(
    owner, settings, caplog, django_capture_on_commit_callbacks
):
    from audit.services import sessions_export_archive
    from diagnosis.models import Environment

    caplog.set_level(logging.DEBUG)
    settings.API_RATE_LIMIT = "100000/min"
    settings.API_CALLBACK_ALLOW_PRIVATE = True  # the callback receiver is on loopback
    llm_key = f"sk-rootproof-canary-{secrets.token_hex(12)}"
    password = f"pw-canary-{secrets.token_hex(8)}"
    environment = Environment.objects.create(
        slug="mini-pool",
        name="mini",
        pack_path=str(MINI_PACK),
        services=["payment-service", "order-service", "mysql"],
    )
    created = api_key_create(owner=owner, name="ci")
    receiver, receiver_token = alert_receiver_create(
        slug="prod-alerts", name="Prod", owner=owner, environment=environment
    )
    api_secret = created.key.rsplit("_", 1)[1]  # the part after rp_<prefix>_
    canaries = {
        "LLM API key": llm_key,
        "API key": created.key,
        "API key secret part": api_secret,
        "callback signing secret": created.signing_secret,
        "receiver token": receiver_token,
        "login password": password,
    }

    hook = Receiver([200])
    with openai_server_running(responder=role_responder) as server:
        settings.LLM_PROVIDER = "openai"
        settings.LLM_API_KEY = llm_key
        settings.LLM_MAX_RETRIES = 0
        settings.LLM_ROLE_SETTINGS = {
            role: {"provider": "openai", "base_url": server.base_url, "api_key": llm_key}
            | {"model": "m"}
            for role in settings.LLM_ROLES
        }
        client = Client()
        bearer = {"Authorization": f"Bearer {created.key}"}
        with django_capture_on_commit_callbacks(execute=True):
            submitted = client.post(
                "/api/v1/diagnoses",
                json.dumps(
                    {
                        "question": "payment-service 为什么超时？",
                        "environment": "mini-pool",
                        "callback_url": hook.url,
                    }
                ),
                content_type="application/json",
                headers={**bearer, "Idempotency-Key": "canary-1"},
            )
        assert submitted.status_code == 202, submitted.content
        with django_capture_on_commit_callbacks(execute=True):
            alerted = client.post(
                reverse("api:alertmanager_webhook", args=[receiver.slug]),
                json.dumps(_alert("2026-03-02T10:20:00Z")),
                content_type="application/json",
                headers={"Authorization": f"Bearer {receiver_token}"},
            )
        assert alerted.status_code in (200, 202), alerted.content
        listed = client.get("/api/v1/diagnoses", headers=bearer)
        assert listed.status_code == 200
        # The LLM key really travelled to the model endpoint, so it was in use.
        sent = {r.headers.get("authorization") for r in server.requests}
    hook.close()
    assert sent == {f"Bearer {llm_key}"}
    # The signed callback went out, so the signing secret was in use too.
    assert ApiSubmission.objects.get().callback_state == "delivered"
    assert len(hook.received) == 1

    # A password typed at the login form (wrong, so it is a recorded failure).
    Client().post(reverse("login"), {"username": "owner", "password": password})

    sessions = list(DiagnosisSession.objects.all())
    assert len(sessions) == 2
    assert all(s.status == "completed" for s in sessions), [s.error for s in sessions]
    archive = sessions_export_archive(sessions=sessions, actor=owner)

    leaks = []
    for label, text in _database_text().items():
        leaks += [f"{name} in the {label} table" for name, v in canaries.items() if v in text]
    log_text = caplog.text + "\n".join(
        f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records
    )
    leaks += [f"{name} in the logs" for name, value in canaries.items() if value in log_text]
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        exported = "\n".join(zipped.read(n).decode("utf-8", "replace") for n in zipped.namelist())
    leaks += [f"{name} in the export" for name, value in canaries.items() if value in exported]
    assert leaks == []
    assert caplog.records, "the run logged nothing: the log search would prove nothing"
