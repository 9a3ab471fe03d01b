"""Every counted answer says where the caller's bucket stands (RateLimit-Limit, -Remaining,
-Reset, the IETF draft's names), a 429 also says Retry-After, and the schema documents both.

The throttle's clock is the test's: the window slides as the test moves it, not as time passes.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api.auth import ApiKeyRateThrottle
from diagnosis.api.schema import LINKS, RATE_LIMIT_HEADERS
from diagnosis.api.urls import OPERATIONS

pytestmark = pytest.mark.django_db

HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(ApiKeyRateThrottle, "timer", clock)
    return clock


def _bucket(response) -> tuple[int, int, int]:
    return tuple(int(response[name]) for name in HEADERS)  # type: ignore[return-value]


def test_each_answer_counts_down_and_the_reset_follows_the_oldest_request(api, settings, clock):
    settings.API_RATE_LIMIT = "3/min"
    first = api.get("/api/v1/diagnoses")
    assert _bucket(first) == (3, 2, 61)  # 60 s window, rounded up past the instant
    clock.now += 20
    second = api.get("/api/v1/api-keys")
    assert _bucket(second) == (3, 1, 41)  # the first request leaves the window in 40 s
    clock.now += 10
    refused = api.get("/api/v1/diagnoses/00000000-0000-0000-0000-000000000000")
    assert refused.status_code == 404  # an error is counted and says so too
    assert _bucket(refused) == (3, 0, 31)


def test_a_429_says_retry_after_and_the_bucket_it_is_in(api, settings, clock):
    settings.API_RATE_LIMIT = "2/min"
    api.get("/api/v1/diagnoses")
    clock.now += 15
    api.get("/api/v1/diagnoses")
    clock.now += 15
    throttled = api.get("/api/v1/diagnoses")
    assert throttled.status_code == 429
    assert _bucket(throttled) == (2, 0, 31)
    assert throttled["Retry-After"] == throttled["RateLimit-Reset"]
    assert throttled.json()["error"]["details"]["retry_after_seconds"] == 31
    clock.now += 31  # the oldest request has left the window: one more is let in
    again = api.get("/api/v1/diagnoses")
    assert again.status_code == 200 and _bucket(again) == (2, 0, 15)  # oldest: t=15


def test_a_receiver_has_its_own_bucket_and_its_answers_say_so(
    owner, environment, settings, clock, no_flow_runs
):
    settings.API_RATE_LIMIT = "5/min"
    _, token = alert_receiver_create(slug="am", name="AM", owner=owner, environment=environment)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post("/api/v1/integrations/alertmanager/am", {}, format="json")
    assert response.status_code == 400 and _bucket(response) == (5, 4, 61)


def test_an_uncounted_request_claims_no_bucket(settings, clock):
    settings.API_RATE_LIMIT = "3/min"
    anonymous = APIClient().get("/api/v1/diagnoses")
    assert anonymous.status_code == 401
    assert not any(name in anonymous for name in (*HEADERS, "Retry-After"))


def test_without_a_limit_no_answer_claims_one(api, settings, clock):
    settings.API_RATE_LIMIT = ""
    response = api.get("/api/v1/diagnoses")
    assert response.status_code == 200 and not any(name in response for name in HEADERS)


def test_the_schema_documents_the_headers_on_every_answer_and_retry_after_on_429(api):
    document = APIClient().get("/api/schema/?format=json").json()
    assert set(RATE_LIMIT_HEADERS) | {"Retry-After"} <= set(document["components"]["headers"])
    operations = 0
    for path, methods in document["paths"].items():
        for operation in methods.values():
            operations += 1
            for status, response in operation["responses"].items():
                documented = set(response.get("headers", {}))
                assert set(HEADERS) <= documented, (path, status)
                assert ("Retry-After" in documented) == (status == "429"), (path, status)
    assert operations == len(OPERATIONS)


def test_each_create_operation_links_to_what_it_enables() -> None:
    document = APIClient().get("/api/schema/?format=json").json()
    by_id = {
        operation["operationId"]: (path, operation)
        for path, methods in document["paths"].items()
        for operation in methods.values()
    }
    linked = {
        (creator, link["operationId"])
        for (creator, status), _ in LINKS.items()
        for link in by_id[creator][1]["responses"][status]["links"].values()
    }
    assert linked == {
        ("diagnosis_create", "diagnosis_retrieve"),
        ("diagnosis_create", "diagnosis_tool_invocations"),
        ("diagnosis_create", "diagnosis_callback_attempts"),
        ("diagnosis_create", "diagnosis_cancel"),
        ("api_key_create", "api_key_revoke"),
    }
    for (creator, status), _ in LINKS.items():
        for link in by_id[creator][1]["responses"][status]["links"].values():
            (parameter,) = link["parameters"]
            assert f"{{{parameter}}}" in by_id[link["operationId"]][0]
            pointer = link["parameters"][parameter].removeprefix("$response.body#/")
            response_schema = by_id[creator][1]["responses"][status]["content"]
            ref = response_schema["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            assert pointer in document["components"]["schemas"][ref]["properties"]
