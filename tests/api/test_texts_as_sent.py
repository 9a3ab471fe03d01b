"""A patterned request text is matched as sent, as the OpenAPI schema's pattern says.

DRF trims a text before its pattern check, so " shop " passed the slug pattern and
whitespace alone passed as a blank callback URL, though the schema refuses both. The
environment (body and list filter) and the callback URL are checked untrimmed: a 400 in
the caller's language, and nothing created.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.response import Response
from rest_framework.test import APIClient

from diagnosis.models import DiagnosisSession

pytestmark = pytest.mark.django_db

HOOK = "https://ops.example.com/hook"
SLUG_MESSAGES = {
    "en": 'Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.',
    "zh-hans": "请输入合法的“短语“，只能包含字母，数字，下划线或者中划线。",
}
URL_MESSAGES = {"en": "Enter a valid URL.", "zh-hans": "请输入合法的URL。"}


@dataclass(frozen=True)
class PatternedText:
    """One patterned text of a request: how to send it and where the schema describes it."""

    send: Callable[[APIClient, str, str], Response]  # client, value, Accept-Language
    schema: Callable[[dict[str, Any]], dict[str, Any]]  # the OpenAPI document → its schema
    valid: tuple[str, ...]
    messages: dict[str, str]


def _create(field: str) -> Callable[[APIClient, str, str], Response]:
    def send(api: APIClient, value: str, language: str) -> Response:
        body = {"question": "q", "environment": "shop", field: value}
        return api.post("/api/v1/diagnoses", body, format="json", HTTP_ACCEPT_LANGUAGE=language)

    return send


def _list_filter(api: APIClient, value: str, language: str) -> Response:
    return api.get("/api/v1/diagnoses", {"environment": value}, HTTP_ACCEPT_LANGUAGE=language)


def _list_parameter(document: dict[str, Any]) -> dict[str, Any]:
    parameters = document["paths"]["/api/v1/diagnoses"]["get"]["parameters"]
    return next(p["schema"] for p in parameters if p["name"] == "environment")


def _create_property(name: str, branch: int | None = None) -> Callable[[dict], dict]:
    def schema(document: dict[str, Any]) -> dict[str, Any]:
        node = document["components"]["schemas"]["DiagnosisCreateRequest"]["properties"][name]
        return node if branch is None else node["oneOf"][branch]

    return schema


TEXTS = {
    "environment": PatternedText(
        _create("environment"), _create_property("environment"), ("shop",), SLUG_MESSAGES
    ),
    "environment filter": PatternedText(_list_filter, _list_parameter, ("shop",), SLUG_MESSAGES),
    "callback_url": PatternedText(
        _create("callback_url"), _create_property("callback_url", 0), (HOOK, ""), URL_MESSAGES
    ),
}
REFUSED = {
    "environment": (" shop", "shop ", "\tshop", "shop\n", "   "),
    "environment filter": (" shop", "shop ", "shop\n", "   "),
    "callback_url": ("   ", "\n", " " + HOOK, "\t" + HOOK, HOOK + " ", HOOK + "\n"),
}
CASES = [(name, value) for name, values in REFUSED.items() for value in values]


@pytest.fixture(autouse=True)
def _no_flow_runs(no_flow_runs):
    """These tests build sessions in the database; the flow itself is not run here."""


@pytest.fixture(scope="module")
def document(django_db_blocker) -> dict[str, Any]:
    with django_db_blocker.unblock():
        return APIClient().get("/api/schema/?format=json").json()


def _schema_matches(schema: dict[str, Any], value: str) -> bool:
    # ECMA's final $ is the end of the text; Python's $ would also match before a final
    # newline (a $ inside the pattern, in a character class, is a dollar).
    return re.search(re.sub(r"\$\Z", r"\\Z", schema["pattern"]), value) is not None


@pytest.mark.parametrize("name", TEXTS)
def test_a_valid_text_as_sent_is_taken(name, api, environment):
    for value in TEXTS[name].valid:
        response = TEXTS[name].send(api, value, "en")
        assert response.status_code in (200, 202), (value, response.json())


@pytest.mark.parametrize(("name", "value"), CASES)
def test_the_schemas_pattern_refuses_the_texts_the_api_refuses(name, value, document):
    schema = TEXTS[name].schema(document)
    if not value.strip():  # whitespace alone: no pattern match, and not the blank (empty) text
        assert not _schema_matches(schema, value) and len(value) > 0
        return
    assert _schema_matches(schema, value.strip())
    assert not _schema_matches(schema, value)  # the pattern itself refuses it


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize(("name", "value"), CASES)
def test_whitespace_around_a_valid_text_is_a_400_in_the_users_language(
    name, value, language, api, environment
):
    text = TEXTS[name]
    sessions = DiagnosisSession.objects.count()
    response = text.send(api, value, language)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "invalid"
    field = name.removesuffix(" filter")
    assert error["details"]["fields"][field] == [text.messages[language]]
    assert DiagnosisSession.objects.count() == sessions


def test_without_a_language_the_message_is_chinese(api, environment):
    response = TEXTS["environment"].send(api, " shop ", "")
    assert response.json()["error"]["details"]["fields"]["environment"] == [
        SLUG_MESSAGES["zh-hans"]
    ]
