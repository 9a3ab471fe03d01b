"""In a real Chromium, the Content-Security-Policy blocks nothing the pages need."""

from __future__ import annotations

import os

import pytest

from tests.chat.factories import conversation_make, environment_make, session_make
from tests.support.binaries import require_binary

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page():
    chromium = require_binary("/usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        context = browser.new_context(locale="zh-CN")
        page = context.new_page()
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def _violations(page, url: str) -> list[str]:
    messages: list[str] = []
    page.on("console", lambda m: messages.append(m.text))
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return [m for m in messages if "Content Security Policy" in m]


def test_chat_admin_and_api_docs_run_under_the_policy(page, live_server, owner, reviewer):
    conversation = conversation_make(owner=owner, environment=environment_make())
    session_make(conversation=conversation)
    base = live_server.url

    assert _violations(page, f"{base}/api/docs/") == []
    page.wait_for_selector("#swagger-ui .information-container")  # Swagger UI rendered

    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", "pw-owner-1")
    page.click("button.primary")
    page.wait_for_url(f"{base}/")
    assert _violations(page, f"{base}/conversations/{conversation.pk}/") == []
    # htmx runs: the lazily loaded evidence fragment replaces its placeholder.
    page.wait_for_function("typeof window.htmx !== 'undefined'")

    page.context.clear_cookies()
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "reviewer")
    page.fill("#id_password", "pw-rev-1")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    assert _violations(page, f"{base}/admin/diagnosis/diagnosissession/") == []
    assert _violations(page, f"{base}/audit/dashboard") == []
