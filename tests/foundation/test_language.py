import pytest
from django.conf import settings


@pytest.mark.django_db
def test_pages_are_chinese_even_when_the_browser_asks_for_english(client):
    response = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")
    assert "登录" in response.content.decode()
    assert response["Content-Language"] == "zh-hans"


@pytest.mark.django_db
def test_the_language_switch_sticks_across_pages(client):
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/accounts/login/"})
    assert response.status_code == 302
    page = client.get("/accounts/login/")
    assert page["Content-Language"] == "en"
    assert "Log in" in page.content.decode()


@pytest.mark.django_db
def test_an_unknown_language_cookie_falls_back_to_chinese(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "xx"
    assert client.get("/accounts/login/")["Content-Language"] == "zh-hans"


@pytest.mark.django_db
def test_api_errors_follow_accept_language(client):
    english = client.get("/api/v1/diagnoses", HTTP_ACCEPT_LANGUAGE="en")
    chinese = client.get("/api/v1/diagnoses")
    assert english.status_code == chinese.status_code == 401
    assert english.json()["error"]["message"] != chinese.json()["error"]["message"]
