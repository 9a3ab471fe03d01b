"""The OpenAPI schema, and Schemathesis against it: every check, every phase, stateful too.

Schemathesis runs in-process against the WSGI app (no server thread), with an API key the
run cannot revoke for itself: a generated ``key_id`` that names it is aimed at a decoy key
instead, so the run's credentials stay valid to its last request. Alertmanager operations
authenticate with the receiver's token. The run is bounded (examples per operation, steps
per scenario, a per-example deadline) so that it stays a small part of CI.

``object_level_authorization`` needs a second identity: a second run over the API-key
operations has two users, each with a key, named in a Web Fuzzing Commons auth document
(``schemathesis_peers.json``) as peers. The owner runs the scenarios; every object the
owner created or listed and then read is read again as the peer, who must not get it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.case import Case
from schemathesis.openapi.checks import ObjectLevelAuthorizationViolation

from config.wsgi import application
from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api import base, serializers, services
from diagnosis.api.services import api_key_create
from diagnosis.api.urls import OPERATIONS
from diagnosis.models import ApiKey, DiagnosisSession, Environment
from tests.api.conftest import completed_session_make
from tests.api.served import RECEIVER, WEBHOOK_PREFIX, case_aim

SCHEMA_URL = "/api/schema/?format=json"
SCHEMA = schemathesis.openapi.from_wsgi(SCHEMA_URL, application)
PEERS_DOCUMENT = Path(__file__).parent / "schemathesis_peers.json"
PEERS_AUTH = {"wfc": {"path": str(PEERS_DOCUMENT), "user": "owner", "peers": ["owner", "peer"]}}
# Filled by the fixture for each test: the keys and the receiver token of its world.
CREDENTIALS: dict[str, Any] = {}
BOUNDS = {
    "deadline": timedelta(seconds=10),
    "database": None,
    "suppress_health_check": list(HealthCheck),
}
STATELESS = hypothesis_settings(max_examples=20, **BOUNDS)
STATEFUL = hypothesis_settings(max_examples=15, stateful_step_count=5, **BOUNDS)
# A run that must find a planted fault: the same examples every run (a random search found
# it in some runs and not in others), and enough of them to reach the planted lookup.
PLANTED = hypothesis_settings(STATEFUL, max_examples=30, derandomize=True)


@pytest.mark.django_db
def test_the_schema_documents_every_operation_and_its_errors():
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    documented = {
        (path, method.upper())
        for path, operations in schema["paths"].items()
        for method in operations
    }
    for route, _, method, _ in OPERATIONS:
        path = "/api/v1/" + route
        for converter in ("uuid:", "int:", "slug:"):
            path = path.replace(f"<{converter}", "{")
        path = path.replace(">", "}")
        assert (path, method) in documented
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            assert "401" in operation["responses"], path
            assert operation["responses"]["401"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"
            }
    assert {"apiKey", "alertmanagerReceiverToken"} <= set(schema["components"]["securitySchemes"])


@pytest.mark.django_db
def test_the_docs_page_serves_swagger_ui_from_our_own_static_files():
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "unpkg" not in page.lower()


@SCHEMA.auth(refresh_interval=None)
class _Credentials:
    """The run's API key, or the receiver's token for the Alertmanager webhook."""

    def get(self, case: Case, ctx: Any) -> str:
        webhook = case.operation.path.startswith(WEBHOOK_PREFIX)
        # Cases are also built while tests are collected, before any world exists.
        return CREDENTIALS.get("receiver" if webhook else "key", "rp_none_none")

    def set(self, case: Case, data: str, ctx: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def _aim(case: Case) -> None:
    case_aim(
        case,
        run_key_id=CREDENTIALS["key_id"],
        decoy_key_id=CREDENTIALS["decoy_id"],
        receiver=RECEIVER,
    )


@pytest.fixture
def world(transactional_db, settings, monkeypatch, django_user_model) -> Iterator[None]:
    """An owner with a run key and a decoy key, a finished session, a receiver; no flow runs."""
    from diagnosis import tasks

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)
    settings.API_RATE_LIMIT = "100000/min"
    settings.DIAGNOSIS_DEFAULT_ENVIRONMENT = "shop"
    user = django_user_model.objects.create_user(username="integrator", password="pw-int-1")
    environment = Environment.objects.create(slug="shop", name="Shop")
    completed_session_make(owner=user, environment=environment)
    _, token = alert_receiver_create(
        slug=RECEIVER, name="Prod", owner=user, environment=environment
    )
    decoy = api_key_create(owner=user, name="decoy")
    run = api_key_create(owner=user, name="schemathesis")
    CREDENTIALS.update(
        key=run.key, key_id=run.api_key.pk, decoy_id=decoy.api_key.pk, receiver=token
    )
    yield
    assert ApiKey.objects.get(pk=run.api_key.pk).is_active, "the run revoked its own key"
    CREDENTIALS.clear()


def test_the_run_has_every_check_and_phase_and_one_test_per_operation() -> None:
    load_all_checks()
    checks = SCHEMA.config.checks_config_for()
    assert all(checks.get_by_name(name=name).enabled for name in CHECKS.get_all_names())
    phases = SCHEMA.config.phases_for(operation=None)
    assert all(
        phases.get_by_name(name=name).enabled
        for name in ("examples", "coverage", "fuzzing", "stateful")
    )
    assert len([r.ok() for r in SCHEMA.get_all_operations()]) == len(OPERATIONS)


@SCHEMA.parametrize()
@STATELESS
def test_every_operation_conforms_to_the_schema(case: Case, world: None) -> None:
    _aim(case)
    case.call_and_validate()


def _scenarios(schema: Any) -> Any:
    class Scenario(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Case) -> None:
            _aim(case)

    return Scenario


def test_sequences_of_linked_operations_conform_to_the_schema(world: None) -> None:
    _scenarios(SCHEMA).run(settings=STATEFUL)


def _document_keys() -> dict[str, str]:
    """The bearer key of each identity of the peers' auth document."""
    document = json.loads(PEERS_DOCUMENT.read_text(encoding="utf-8"))
    return {
        entry["name"]: entry["fixedHeaders"][0]["value"].removeprefix("Bearer ")
        for entry in document["auth"]
    }


class _StoppedClock:
    """``timezone`` for the serializers with a clock that does not move.

    The peer check compares the owner's body and the peer's field by field; a queued
    diagnosis's ``elapsed_seconds`` grows between the two reads and would make every
    leaked body look like another object.
    """

    moment = timezone.now()

    @classmethod
    def now(cls) -> datetime:
        return cls.moment


@pytest.fixture
def peers(transactional_db, settings, monkeypatch, django_user_model) -> Iterator[None]:
    """Two users, each with a finished session and the key the auth document names."""
    from diagnosis import tasks

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)
    monkeypatch.setattr(serializers, "timezone", _StoppedClock)
    settings.API_RATE_LIMIT = "100000/min"
    settings.DIAGNOSIS_DEFAULT_ENVIRONMENT = "shop"
    environment = Environment.objects.create(slug="shop", name="Shop")
    keys, decoys = {}, {}
    for name, key in _document_keys().items():
        user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-1")
        completed_session_make(owner=user, environment=environment)
        decoys[name] = api_key_create(owner=user, name="decoy").api_key
        prefix = key.removeprefix("rp_").partition("_")[0]
        with monkeypatch.context() as fixed:
            fixed.setattr(services, "api_key_generate", lambda p=prefix, k=key: (p, k))
            keys[name] = api_key_create(owner=user, name="schemathesis").api_key
    CREDENTIALS.update(key_id=keys["owner"].pk, decoy_id=decoys["owner"].pk)
    yield
    assert all(ApiKey.objects.get(pk=k.pk).is_active for k in keys.values()), "a run key revoked"
    CREDENTIALS.clear()


def _peers_schema() -> Any:
    """The API-key operations, run as the owner with the peer at hand.

    Loaded per test, with its own config: the check probes each operation once per run
    and remembers it with the peers' auth (a shared config would remember across tests).
    """
    config = schemathesis.config.SchemathesisConfig.from_dict({"auth": PEERS_AUTH})
    schema = schemathesis.openapi.from_wsgi(SCHEMA_URL, application, config=config)
    return schema.exclude(path_regex=f"^{WEBHOOK_PREFIX}")


# schemathesis writes callback URLs with public IP literals (no DNS to fail first).
@pytest.mark.unreachable_network
def test_one_user_never_reads_what_another_user_created_or_listed(peers: None) -> None:
    _scenarios(_peers_schema()).run(settings=STATEFUL)


def _any_owners_diagnosis(*, user: Any, public_id: Any) -> DiagnosisSession | None:
    return DiagnosisSession.objects.filter(public_id=public_id).first()  # no owner check


# schemathesis writes callback URLs with public IP literals (no DNS to fail first).
@pytest.mark.unreachable_network
def test_the_peer_run_fails_on_an_api_that_shows_one_users_diagnosis_to_another(
    peers: None, monkeypatch
) -> None:
    monkeypatch.setattr(base, "diagnosis_get_for_user", _any_owners_diagnosis)
    with pytest.raises(FailureGroup) as found:
        _scenarios(_peers_schema()).run(settings=PLANTED)
    (violation,) = found.value.exceptions
    assert isinstance(violation, ObjectLevelAuthorizationViolation)
    assert "`peer` received the `DiagnosisDetail` that `owner` owns" in violation.message


@pytest.mark.django_db
def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/v1/integrations/alertmanager/{receiver}" in out.read_text()
