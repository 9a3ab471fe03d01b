import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient
from schemathesis.specs.openapi.checks import positive_data_acceptance

from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api.services import api_key_create
from diagnosis.api.urls import OPERATIONS
from tests.api.conftest import completed_session_make

MAX_EXAMPLES = 25


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


@pytest.fixture
def schemathesis_world(transactional_db, settings, monkeypatch, django_user_model):
    """An owner with a key, a finished session, a receiver; the flow is not run."""
    from diagnosis import tasks
    from diagnosis.models import Environment

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)
    settings.API_RATE_LIMIT = "100000/min"
    settings.DIAGNOSIS_DEFAULT_ENVIRONMENT = "shop"
    user = django_user_model.objects.create_user(username="integrator", password="pw-int-1")
    environment = Environment.objects.create(slug="shop", name="Shop")
    completed_session_make(owner=user, environment=environment)
    alert_receiver_create(slug="prod-am", name="Prod", owner=user, environment=environment)
    return api_key_create(owner=user, name="schemathesis")


def _without_cursor(case):
    # A cursor is opaque: a made-up one is rightly a 400 (tested in test_diagnoses).
    if case.query:
        case.query.pop("cursor", None)
    return case


def _conformance_test(operation, *, base_url: str, headers: dict, excluded: list):
    @given(case=operation.as_strategy().map(_without_cursor))
    @hypothesis_settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case):
        case.call_and_validate(base_url=base_url, headers=headers, excluded_checks=excluded)

    return check


def test_every_response_conforms_to_the_schema_and_none_is_a_5xx(live_server, schemathesis_world):
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json")
    headers = {"Authorization": f"Bearer {schemathesis_world.key}"}
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        # A new diagnosis names an environment and a conversation that must exist: a
        # schema cannot say that, so schema-valid bodies may rightly get a 400 there.
        excluded = [positive_data_acceptance] if operation.label == "POST /api/v1/diagnoses" else []
        check = _conformance_test(
            operation, base_url=live_server.url, headers=headers, excluded=excluded
        )
        try:
            check()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {exc}")
    assert operations == len(OPERATIONS)
    assert not failures, "\n\n".join(failures)


@pytest.mark.django_db
def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/v1/integrations/alertmanager/{receiver}" in out.read_text()
