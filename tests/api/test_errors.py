import json

import pytest
from django.core.exceptions import ValidationError

from diagnosis.api.errors import api_exception_handler
from diagnosis.api.services import diagnosis_api_submit
from diagnosis.contracts import ConflictError
from diagnosis.models import DiagnosisSession

pytestmark = pytest.mark.django_db


def _shape(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]


@pytest.mark.parametrize(
    "path", ["/api/v1/no-such-thing", "/api/v1/diagnoses/%0A/tool-invocations", "/api/v1/%0A"]
)
def test_an_unknown_api_path_is_a_404_in_the_error_shape(api, path):
    response = api.get(path)
    assert response.status_code == 404
    assert _shape(response)["code"] == "not_found"


def test_a_malformed_diagnosis_id_is_a_404_in_the_error_shape(api):
    response = api.get("/api/v1/diagnoses/not-a-uuid")
    assert response.status_code == 404
    assert _shape(response)["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "url", "allowed"),
    [
        ("delete", "/api/v1/diagnoses", "GET, POST"),
        ("put", "/api/v1/api-keys", "GET, POST"),
        ("get", "/api/v1/diagnoses/00000000-0000-0000-0000-000000000000/cancel", "POST"),
        ("patch", "/api/v1/tool-invocations/1", "GET"),
    ],
)
def test_a_wrong_method_is_a_405_naming_the_allowed_ones(api, method, url, allowed):
    response = getattr(api, method)(url)
    assert response.status_code == 405
    assert _shape(response)["code"] == "method_not_allowed"
    assert set(response["Allow"].replace(" ", "").split(",")) >= set(
        allowed.replace(" ", "").split(",")
    )


def test_an_oversized_body_is_a_413_before_it_is_parsed(api, environment, settings):
    settings.API_MAX_BODY_BYTES = 2048
    body = json.dumps({"question": "x" * 5000, "environment": "shop"})
    response = api.generic("POST", "/api/v1/diagnoses", body, content_type="application/json")
    assert response.status_code == 413
    assert _shape(response)["code"] == "payload_too_large"
    assert DiagnosisSession.objects.count() == 0


def test_malformed_json_is_a_400(api):
    response = api.generic(
        "POST", "/api/v1/diagnoses", "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert _shape(response)["code"] == "parse_error"


def test_a_key_over_its_rate_limit_gets_a_429_with_retry_after(api, outsider_api, settings):
    settings.API_RATE_LIMIT = "3/min"
    codes = [api.get("/api/v1/diagnoses").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = api.get("/api/v1/diagnoses")
    assert _shape(response)["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["details"]["retry_after_seconds"] > 0
    # the limit is per key: another key is unaffected
    assert outsider_api.get("/api/v1/diagnoses").status_code == 200


def test_an_unexpected_error_is_a_500_in_the_error_shape(api, owner, environment, monkeypatch):
    from diagnosis.api import diagnoses

    def boom(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(diagnoses, "diagnosis_list_for_user", boom)
    response = api.get("/api/v1/diagnoses")
    assert response.status_code == 500
    error = _shape(response)
    assert error["code"] == "server_error" and "boom" not in error["message"]


@pytest.mark.parametrize("url", ["/api/v1/diagnoses", "/api/v1/api-keys"])
def test_options_names_every_method_a_path_takes(api, url):
    response = api.options(url)
    assert response.status_code == 200
    assert set(response["Allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "OPTIONS", "POST"}


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("zh-hans", "请求体不是有效的 JSON（第 1 行第 2 列）。"),
        ("en", "The body is not valid JSON"),
    ],
)
def test_invalid_json_is_explained_in_the_requests_language(api, environment, language, expected):
    response = api.generic(
        "POST",
        "/api/v1/diagnoses",
        "{bad",
        content_type="application/json",
        HTTP_ACCEPT_LANGUAGE=language,
    )
    assert response.status_code == 400
    error = _shape(response)
    assert error["code"] == "parse_error"
    assert error["message"].startswith(expected)
    assert "Expecting" not in error["message"]


@pytest.mark.parametrize("body", ["null", "[1, 2]", '"question"'])
def test_a_body_that_is_not_an_object_gets_one_translated_message(api, environment, body):
    response = api.generic(
        "POST",
        "/api/v1/diagnoses",
        body,
        content_type="application/json",
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert response.status_code == 400
    fields = _shape(response)["details"]["fields"]
    assert fields == {"non_field_errors": ["The request body must be a JSON object."]}


def test_a_bad_callback_url_is_one_message(api, environment):
    response = api.post(
        "/api/v1/diagnoses",
        {"question": "q", "environment": "shop", "callback_url": "not a url"},
        format="json",
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert _shape(response)["details"]["fields"] == {"callback_url": ["Enter a valid URL."]}


def test_a_nul_in_a_question_is_one_message(api, environment):
    response = api.post(
        "/api/v1/diagnoses",
        {"question": "a\u0000b", "environment": "shop"},
        format="json",
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert _shape(response)["details"]["fields"] == {
        "question": ["Must not contain NUL characters."]
    }


def test_services_refuse_with_django_errors_that_the_api_shows_in_the_error_shape(
    owner, environment
):
    with pytest.raises(ValidationError) as refused:
        diagnosis_api_submit(
            owner=owner,
            api_key=None,
            question="q",
            environment=environment,
            callback_url="https://example.org/hook",
        )
    response = api_exception_handler(refused.value, {})
    assert response is not None and response.status_code == 400
    assert response.data["error"]["code"] == "invalid"
    assert list(response.data["error"]["details"]["fields"]) == ["callback_url"]

    conflict = api_exception_handler(ConflictError("busy", code="idempotency_conflict"), {})
    assert conflict is not None and conflict.status_code == 409
    assert conflict.data["error"] == {
        "code": "idempotency_conflict",
        "message": "busy",
        "details": {},
    }
