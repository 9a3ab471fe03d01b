import pytest
from django.db.utils import OperationalError


@pytest.mark.django_db
def test_healthz_is_200_when_database_and_broker_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["database"]["ok"] is True


@pytest.mark.django_db
def test_healthz_is_503_when_the_broker_is_unreachable(client, settings):
    from config.celery import app

    original = (app.conf.broker_url, app.conf.broker_write_url)
    app.conf.broker_url = app.conf.broker_write_url = "redis://127.0.0.1:1/0"
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url, app.conf.broker_write_url = original
    assert response.status_code == 503
    assert response.json()["broker"]["ok"] is False


@pytest.mark.django_db
def test_healthz_is_503_when_the_database_is_unreachable(client, monkeypatch):
    from django.db.backends.utils import CursorWrapper

    def broken(self, *args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(CursorWrapper, "execute", broken)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"]["ok"] is False


@pytest.mark.django_db
def test_the_login_page_and_admin_are_served(client):
    assert client.get("/accounts/login/").status_code == 200
    assert client.get("/admin/login/").status_code == 200


def test_the_favicon_is_served_for_every_page(client):
    from django.contrib.staticfiles import finders

    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("favicon.svg")
    assert finders.find("favicon.svg")
