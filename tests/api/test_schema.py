"""The OpenAPI schema, and Schemathesis against it: every check, every phase, stateful too.

Schemathesis runs in-process against the WSGI app (no server thread), with an API key the
run cannot revoke for itself: a generated ``key_id`` that names it is aimed at a decoy key
instead, so the run's credentials stay valid to its last request. Alertmanager operations
authenticate with the receiver's token. The run is bounded (examples per operation, steps
per scenario, a per-example deadline) so that it stays a small part of CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.case import Case

from config.wsgi import application
from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api.services import api_key_create
from diagnosis.api.urls import OPERATIONS
from diagnosis.models import ApiKey, Environment
from tests.api.conftest import completed_session_make

SCHEMA = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
RECEIVER = "prod-am"
WEBHOOK_PREFIX = "/api/v1/integrations/"
# Filled by the fixture for each test: the keys and the receiver token of its world.
CREDENTIALS: dict[str, Any] = {}
BOUNDS = {
    "deadline": timedelta(seconds=10),
    "database": None,
    "suppress_health_check": list(HealthCheck),
}
STATELESS = hypothesis_settings(max_examples=20, **BOUNDS)
STATEFUL = hypothesis_settings(max_examples=15, stateful_step_count=5, **BOUNDS)


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
    """Point a schema-valid path at the world: never the run's own key, the real receiver."""
    if case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH):
        return
    path = case.path_parameters or {}
    if path.get("key_id") == CREDENTIALS["key_id"]:
        path["key_id"] = CREDENTIALS["decoy_id"]
    if case.operation.path.startswith(WEBHOOK_PREFIX):
        path["receiver"] = RECEIVER


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


def test_sequences_of_linked_operations_conform_to_the_schema(world: None) -> None:
    class Scenario(SCHEMA.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Case) -> None:
            _aim(case)

    Scenario.run(settings=STATEFUL)


@pytest.mark.django_db
def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/v1/integrations/alertmanager/{receiver}" in out.read_text()
