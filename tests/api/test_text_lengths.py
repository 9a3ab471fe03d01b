"""A request text's maxLength counts the text as sent, as the OpenAPI schema says.

DRF trims a text before it checks ``max_length``, so whitespace plus the maximum would
be accepted though the schema calls it too long; every length-bounded input text is
one of the fields that count it untrimmed.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from diagnosis.alerts.services import alert_receiver_create
from diagnosis.models import ApiKey, DiagnosisSession
from tests.api.conftest import client_for
from tests.api.test_alertmanager import payload

pytestmark = pytest.mark.django_db

PADDING = "  \t"


@dataclass(frozen=True)
class BoundedText:
    """One length-bounded text of a request body: where it goes and what the schema says."""

    url: str
    component: str
    path: tuple[str, ...]  # from the component to the text's own schema
    maximum: int
    body: Callable[[str], dict[str, Any]]
    error_field: str
    text: Callable[[int], str] = "x".__mul__  # a valid text of the given length


def _url(length: int) -> str:
    head = "https://ops.example.com/"
    return head + "h" * (length - len(head))


TEXTS = {
    "question": BoundedText(
        url="/api/v1/diagnoses",
        component="DiagnosisCreateRequest",
        path=("properties", "question"),
        maximum=settings.API_QUESTION_MAX_CHARS,
        body=lambda text: {"question": text, "environment": "shop"},
        error_field="question",
    ),
    "context service": BoundedText(
        url="/api/v1/diagnoses",
        component="DiagnosisContextInputRequest",
        path=("properties", "services", "items"),
        maximum=100,
        body=lambda text: {"question": "q", "environment": "shop", "context": {"services": [text]}},
        error_field="context",
    ),
    "api key name": BoundedText(
        url="/api/v1/api-keys",
        component="ApiKeyCreateRequest",
        path=("properties", "name"),
        maximum=100,
        body=lambda text: {"name": text},
        error_field="name",
    ),
    "callback url": BoundedText(
        url="/api/v1/diagnoses",
        component="DiagnosisCreateRequest",
        path=("properties", "callback_url", "oneOf", "0"),
        maximum=500,
        body=lambda text: {"question": "q", "environment": "shop", "callback_url": text},
        error_field="callback_url",
        text=_url,
    ),
    "alert group key": BoundedText(
        url="/api/v1/integrations/alertmanager/prod-am",
        component="AlertmanagerWebhookRequest",
        path=("properties", "groupKey"),
        maximum=5000,
        body=lambda text: payload(group_key=text),
        error_field="groupKey",
    ),
}


@pytest.fixture(autouse=True)
def _no_flow_runs(no_flow_runs):
    """These tests build sessions in the database; the flow itself is not run here."""


@pytest.fixture
def client_of(api, owner, environment) -> Callable[[BoundedText], APIClient]:
    _, token = alert_receiver_create(
        slug="prod-am", name="Prod", owner=owner, environment=environment
    )
    return lambda text: client_for(token) if "alertmanager" in text.url else api


def _path_step(node: Any, step: str) -> Any:
    return node[int(step)] if isinstance(node, list) else node[step]


def _schema_of(bounded: BoundedText) -> dict[str, Any]:
    node: Any = APIClient().get("/api/schema/?format=json").json()
    node = node["components"]["schemas"][bounded.component]
    for step in bounded.path:
        node = _path_step(node, step)
    return node


@pytest.mark.parametrize("name", TEXTS)
def test_the_schemas_max_length_is_the_one_the_api_enforces(name):
    bounded = TEXTS[name]
    assert _schema_of(bounded)["maxLength"] == bounded.maximum


@pytest.mark.parametrize("name", TEXTS)
def test_a_text_of_exactly_the_maximum_is_accepted(name, client_of):
    bounded = TEXTS[name]
    response = client_of(bounded).post(
        bounded.url, bounded.body(bounded.text(bounded.maximum)), format="json"
    )
    assert response.status_code in (200, 201, 202), response.json()


@pytest.mark.parametrize(
    ("language", "message"),
    [
        ("en", "Ensure this field has no more than {max} characters."),
        ("zh-hans", "请确保这个字段不能超过 {max} 个字符。"),
    ],
)
@pytest.mark.parametrize("name", TEXTS)
def test_whitespace_and_the_maximum_is_too_long_in_the_users_language(
    name, language, message, client_of
):
    bounded = TEXTS[name]
    sessions, keys = DiagnosisSession.objects.count(), ApiKey.objects.count()
    response = client_of(bounded).post(
        bounded.url,
        bounded.body(PADDING + bounded.text(bounded.maximum)),
        format="json",
        HTTP_ACCEPT_LANGUAGE=language,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert message.format(max=bounded.maximum) in str(
        error["details"]["fields"][bounded.error_field]
    )
    assert (DiagnosisSession.objects.count(), ApiKey.objects.count()) == (sessions, keys)
