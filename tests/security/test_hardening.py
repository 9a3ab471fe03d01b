"""Production hardening: deploy checks, TLS cookies and HSTS, the CSP, login and API limits."""

from __future__ import annotations

import os
import re
import runpy
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse

from tests.chat.factories import conversation_make, environment_make, session_make

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DEBUG": "false",
    "SECURE_TLS": "true",
    "SECRET_KEY": secrets.token_urlsafe(64),
    "ALLOWED_HOSTS": "rootproof.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://rootproof.example.com",
}
TLS_SETTINGS = (
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
)


def _settings_with(monkeypatch, **env: str) -> dict:
    """config/settings.py evaluated under these environment variables."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(ROOT / "config" / "settings.py"))


# --- deploy checks and TLS --------------------------------------------------------------


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for Playwright; production never has it.
    inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {**inherited, **PRODUCTION_ENV, "ROOTPROOF_VAR_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues (0 silenced)." in output


def test_with_tls_on_cookies_are_secure_and_hsts_is_a_year_with_subdomains(monkeypatch):
    tls = _settings_with(monkeypatch, **PRODUCTION_ENV)
    assert tls["SESSION_COOKIE_SECURE"] and tls["CSRF_COOKIE_SECURE"]
    assert tls["SECURE_SSL_REDIRECT"]
    assert tls["SECURE_HSTS_SECONDS"] >= 31_536_000
    assert tls["SECURE_HSTS_INCLUDE_SUBDOMAINS"] and tls["SECURE_HSTS_PRELOAD"]
    assert tls["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert tls["SESSION_COOKIE_HTTPONLY"] and tls["CSRF_COOKIE_HTTPONLY"]


def test_without_tls_nothing_forces_https(monkeypatch):
    plain = _settings_with(monkeypatch, SECURE_TLS="false", SECRET_KEY="x" * 60)
    assert not plain["SECURE_SSL_REDIRECT"]
    assert plain["SECURE_HSTS_SECONDS"] == 0
    assert not plain["SESSION_COOKIE_SECURE"]


@pytest.mark.django_db
def test_over_tls_the_login_sets_secure_httponly_cookies_and_sends_hsts(
    monkeypatch, settings, owner
):
    tls = _settings_with(monkeypatch, **PRODUCTION_ENV)
    for name in TLS_SETTINGS:
        setattr(settings, name, tls[name])
    client = Client()
    https = {"HTTP_X_FORWARDED_PROTO": "https"}
    page = client.get(reverse("login"), **https)
    assert page.status_code == 200
    assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    csrf = page.cookies["csrftoken"]
    assert csrf["secure"] and csrf["httponly"] and csrf["samesite"] == "Lax"
    response = client.post(
        reverse("login"),
        {"username": "owner", "password": "pw-owner-1"},
        **https,
    )
    assert response.status_code == 302
    session_cookie = response.cookies["sessionid"]
    assert session_cookie["secure"] and session_cookie["httponly"]
    assert session_cookie["samesite"] == "Lax"


@pytest.mark.django_db
def test_over_plain_http_pages_redirect_to_https_but_the_health_check_answers(
    monkeypatch, settings
):
    tls = _settings_with(monkeypatch, **PRODUCTION_ENV)
    for name in TLS_SETTINGS:
        setattr(settings, name, tls[name])
    client = Client()
    redirected = client.get(reverse("login"))
    assert redirected.status_code == 301
    assert redirected["Location"].startswith("https://")
    assert client.get("/healthz").status_code in (200, 503)  # answered, not redirected


# --- Content-Security-Policy ------------------------------------------------------------

TEMPLATE_DIRS = [ROOT / "templates", *sorted(ROOT.glob("*/templates"))]
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc\s*=)[^>]*>", re.I)
INLINE_STYLE = re.compile(r"<style\b|\sstyle\s*=", re.I)
EVENT_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.I)
JAVASCRIPT_URL = re.compile(r"""(?:href|src|action)\s*=\s*["']?\s*javascript:""", re.I)


def _csp(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {
        part.split()[0]: part.split()[1:] for part in (p.strip() for p in header.split(";")) if part
    }


def _inline_code(html: str) -> list[str]:
    found = []
    for pattern in (INLINE_SCRIPT, INLINE_STYLE, EVENT_HANDLER, JAVASCRIPT_URL):
        found += [m.group(0)[:80] for m in pattern.finditer(html)]
    return found


def test_no_template_holds_inline_scripts_styles_or_event_handlers():
    offenders = {}
    for directory in TEMPLATE_DIRS:
        for path in directory.rglob("*.html"):
            found = _inline_code(path.read_text(encoding="utf-8"))
            if found:
                offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


@pytest.fixture
def answered_world(owner, reviewer):
    conversation = conversation_make(owner=owner, environment=environment_make())
    session = session_make(conversation=conversation)
    return conversation, session


@pytest.mark.django_db
def test_every_page_sends_a_csp_that_allows_only_the_sites_own_scripts(
    client, owner, reviewer, answered_world
):
    conversation, session = answered_world
    client.force_login(owner)
    pages = [
        reverse("chat:conversation_list"),
        reverse("chat:conversation_detail", args=[conversation.pk]),
        reverse("chat:session_detail", args=[session.public_id]),
    ]
    reviewer_client = Client()
    reviewer_client.force_login(reviewer)
    reviewer_pages = [
        reverse("admin:index"),
        reverse("admin:diagnosis_diagnosissession_changelist"),
        reverse("admin:diagnosis_diagnosissession_change", args=[session.pk]),
        reverse("audit:dashboard"),
        reverse("audit:session_review", args=[session.public_id]),
    ]
    responses = [client.get(url) for url in pages]
    responses += [reviewer_client.get(url) for url in reviewer_pages]
    responses += [Client().get(reverse("login"))]
    for response in responses:
        assert response.status_code == 200, response.request["PATH_INFO"]
        policy = _csp(response)
        assert policy["default-src"] == ["'self'"]
        assert policy["script-src"] == ["'self'"]
        assert policy["style-src"] == ["'self'"]
        assert policy["img-src"] == ["'self'", "data:"]
        assert policy["frame-ancestors"] == ["'none'"]
        assert policy["form-action"] == ["'self'"]
        assert policy["base-uri"] == ["'self'"]
        assert policy["object-src"] == ["'none'"]


@pytest.mark.django_db
def test_our_rendered_pages_hold_no_inline_code(client, owner, reviewer, answered_world):
    """Markup built in Python (charts, admin columns) obeys the CSP as templates do."""
    conversation, session = answered_world
    client.force_login(owner)
    html = {
        "conversation": client.get(reverse("chat:conversation_detail", args=[conversation.pk])),
        "session": client.get(reverse("chat:session_detail", args=[session.public_id])),
    }
    reviewer_client = Client()
    reviewer_client.force_login(reviewer)
    html["dashboard"] = reviewer_client.get(reverse("audit:dashboard"))
    html["review"] = reviewer_client.get(reverse("audit:session_review", args=[session.public_id]))
    html["admin_session"] = reviewer_client.get(
        reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    )
    html["admin_sessions"] = reviewer_client.get(
        reverse("admin:diagnosis_diagnosissession_changelist")
    )
    offenders = {}
    for name, response in html.items():
        assert response.status_code == 200, name
        found = _inline_code(response.content.decode())
        if found:
            offenders[name] = found
    assert offenders == {}


@pytest.mark.django_db
def test_the_api_docs_load_their_script_from_a_url_and_keep_script_src_self():
    client = Client()
    page = client.get(reverse("api:docs"))
    assert page.status_code == 200
    policy = _csp(page)
    assert policy["script-src"] == ["'self'"]
    assert "'unsafe-inline'" in policy["style-src"]  # Swagger UI's markup; this page only
    html = page.content.decode()
    assert INLINE_SCRIPT.search(html) is None
    script_url = re.search(r'<script src="([^"]*\?[^"]*script[^"]*)"', html).group(1)
    script = client.get(script_url.replace("&amp;", "&"))
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()


# --- Login and API rate limits -------------------------------------------------------------


def _login(client: Client, username: str, password: str, ip: str = "198.51.100.7"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip
    )


@pytest.mark.django_db
def test_ten_failed_logins_lock_that_username_from_that_address_with_a_clear_message(owner):
    client = Client()
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "owner", "wrong").status_code == 200  # the form, with its error
    locked = _login(client, "owner", "wrong")
    assert locked.status_code == 429
    assert "登录已暂时锁定" in locked.content.decode()
    assert "15 分钟" in locked.content.decode()
    # Even the right password is refused while locked.
    assert _login(client, "owner", "pw-owner-1").status_code == 429
    # Another address, or another username, is not locked.
    assert _login(Client(), "owner", "pw-owner-1", ip="198.51.100.8").status_code == 302


@pytest.mark.django_db
def test_the_lockout_message_is_translated(owner):
    client = Client()
    client.post(reverse("set_language"), {"language": "en", "next": "/"})
    for _ in range(django_settings.AXES_FAILURE_LIMIT):
        response = _login(client, "owner", "wrong")
    assert response.status_code == 429
    assert "Try again in 15 minutes" in response.content.decode()


@pytest.mark.django_db
def test_the_lock_lifts_after_the_cool_off(owner):
    from axes.models import AccessAttempt

    client = Client()
    for _ in range(django_settings.AXES_FAILURE_LIMIT):
        _login(client, "owner", "wrong")
    assert _login(client, "owner", "pw-owner-1").status_code == 429
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.first().attempt_time - timedelta(minutes=16)
    )
    assert _login(client, "owner", "pw-owner-1").status_code == 302


@pytest.mark.django_db
def test_a_successful_login_resets_the_failure_count(owner):
    client = Client()
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "owner", "wrong")
    assert _login(client, "owner", "pw-owner-1").status_code == 302
    client.post(reverse("logout"))
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "owner", "wrong").status_code == 200


@pytest.mark.django_db
def test_each_api_key_has_its_own_rate_limit(settings, owner):
    from diagnosis.api.services import api_key_create

    settings.API_RATE_LIMIT = "2/min"
    first = api_key_create(owner=owner, name="one").key
    second = api_key_create(owner=owner, name="two").key
    client = Client()

    def status(key: str) -> int:
        headers = {"Authorization": f"Bearer {key}"}
        return client.get("/api/v1/diagnoses", headers=headers).status_code

    assert [status(first) for _ in range(3)] == [200, 200, 429]
    assert status(second) == 200


@pytest.mark.django_db
def test_a_browser_session_is_rate_limited_on_the_api_too(settings, owner):
    settings.API_RATE_LIMIT = "2/min"
    client = Client()
    client.force_login(owner)
    codes = [client.get("/api/v1/diagnoses").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
