"""The reviewer's pages and the chat's answer card in Chromium, at 1440 px and at 390 px.

Nothing is wider than its box, identifiers stay whole on one line, labels are shown where
a code has one, and the English UI reads in English. Every page is saved as a screenshot.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.browser.layout import (
    broken_words,
    overflow_problems,
    overlapping_axis_labels,
    raw_codes,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUESTION = "payment-service 从 10:20 开始大量超时，订单也下不了，帮我看看原因"
WIDTHS = (1440, 390)
LANGUAGES = ("zh-hans", "en")
CJK = re.compile(r"[\u4e00-\u9fff]")
# Where the reading and review pages show labels for codes.
LABELLED = (
    ".rp-card-head, .rp-verdict, .rp-classification, .rp-placement, "
    ".rp-calls summary .rp-status, .rp-parse"
)


def _diagnose(*, environment, owner=None, conversation=None):
    from diagnosis.flow.run import diagnosis_run
    from diagnosis.models import DiagnosisSession
    from diagnosis.services import diagnosis_submit

    session = diagnosis_submit(
        question=QUESTION,
        environment=environment,
        owner=owner,
        conversation=conversation,
        enqueue=False,
    )
    diagnosis_run(session_id=session.id)
    session = DiagnosisSession.objects.get(pk=session.pk)
    assert session.status == "completed", session.error
    return session


def _context(browser, live_server, user, *, width: int, language: str):
    """A browser context logged in as ``user`` (the test client's session cookie)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_cookies(
        [
            {
                "name": "sessionid",
                "value": client.cookies["sessionid"].value,
                "url": live_server.url,
            },
            {"name": "django_language", "value": language, "url": live_server.url},
        ]
    )
    page = context.new_page()
    page.set_default_timeout(60_000)
    return context, page


def _open(page, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    page.wait_for_load_state("networkidle")


def _short(language: str) -> str:
    return "zh" if language.startswith("zh") else "en"


def test_the_reading_page_the_review_form_and_the_session_list_fit_and_read_in_words(
    live_server, browser, reviewer, owner, pack_environment, make_session, screenshots
):
    real = _diagnose(environment=pack_environment, owner=owner)
    demoted = make_session()  # claim-3 demoted for an excerpt that is not in the output
    problems: list[str] = []
    for language in LANGUAGES:
        for width in WIDTHS:
            context, page = _context(browser, live_server, reviewer, width=width, language=language)
            tag = f"{_short(language)}-{width}"

            # The reading page of a real diagnosis, every claim open to its evidence.
            _open(page, f"{live_server.url}{reverse('audit:session_read', args=[real.public_id])}")
            page.screenshot(path=str(screenshots / f"audit-read-{tag}.png"), full_page=True)
            where = f"reading page {tag}"
            problems += [f"{where}: {p}" for p in overflow_problems(page, "#content-main")]
            problems += [f"{where}: {p}" for p in overflow_problems(page, ".rp-card")]
            seen, broken = broken_words(page, "#content-main", "payment-service")
            assert seen >= 5, "the claims name payment-service"
            problems += [f"{where}: {p}" for p in broken]
            problems += [f"{where}: {p}" for p in raw_codes(page, LABELLED)]

            # A session with a demoted claim: the claim stands apart, its finding in words.
            _open(
                page, f"{live_server.url}{reverse('audit:session_read', args=[demoted.public_id])}"
            )
            page.screenshot(path=str(screenshots / f"audit-read-demoted-{tag}.png"), full_page=True)
            assert page.locator("#claims-apart #claim-claim-3").count() == 1
            assert page.locator("#claims #claim-claim-3").count() == 0
            problems += [f"demoted {tag}: {p}" for p in overflow_problems(page, ".rp-card")]
            problems += [
                f"demoted {tag}: {p}" for p in raw_codes(page, LABELLED + ", .rp-findings li")
            ]

            # The review form: each claim with its evidence beside the question about it.
            _open(
                page, f"{live_server.url}{reverse('audit:session_review', args=[real.public_id])}"
            )
            page.screenshot(path=str(screenshots / f"audit-review-{tag}.png"), full_page=True)
            first = page.locator("#claims .rp-card").first
            assert first.locator(".rp-card-evidence mark").count() >= 1
            assert first.locator(".rp-card-judge input[type=radio]").count() == 3
            where = f"review form {tag}"
            problems += [f"{where}: {p}" for p in overflow_problems(page, "#content-main")]
            problems += [f"{where}: {p}" for p in overflow_problems(page, ".rp-card")]
            problems += [
                f"{where}: {p}" for p in broken_words(page, "#claims", "payment-service")[1]
            ]
            problems += [f"{where}: {p}" for p in raw_codes(page, LABELLED)]

            # The session list: every column on screen at 1440 px, labels not codes.
            _open(
                page, f"{live_server.url}{reverse('admin:diagnosis_diagnosissession_changelist')}"
            )
            page.screenshot(path=str(screenshots / f"admin-sessions-{tag}.png"), full_page=True)
            where = f"session list {tag}"
            if width >= 1440:
                problems += [
                    f"{where}: {p}" for p in overflow_problems(page, "#changelist .results")
                ]
            else:  # a phone scrolls the table inside its box, never the page
                problems += [f"{where}: {p}" for p in overflow_problems(page, "#content")]
            problems += [
                f"{where}: {p}"
                for p in raw_codes(page, "#result_list tbody td:not(.field-question)")
            ]
            problems += [f"{where}: {p}" for p in raw_codes(page, "#changelist-filter li")]

            # A tool call's admin page: long output lines wrap, none is cut off.
            invocation = real.invocations.order_by("-output_size").first()
            url = reverse("admin:diagnosis_toolinvocation_change", args=[invocation.pk])
            _open(page, f"{live_server.url}{url}")
            page.screenshot(path=str(screenshots / f"admin-tool-call-{tag}.png"), full_page=True)
            problems += [f"tool call {tag}: {p}" for p in overflow_problems(page, ".form-row")]

            if language == "en":
                labels = page.locator("#result_list thead th").all_inner_texts()
                problems += [f"{where}: untranslated header {t}" for t in labels if CJK.search(t)]
                _open(
                    page, f"{live_server.url}{reverse('audit:session_read', args=[real.public_id])}"
                )
                for text in page.locator(".rp-label").all_inner_texts():
                    if CJK.search(text):
                        problems.append(f"English reading page {width}: Chinese label {text}")
                assert page.locator("h1").first.inner_text() == "Read the session"
            context.close()
    assert problems == [], "\n".join(problems)


def test_the_dashboard_shows_shares_without_rounding_to_whole_and_its_labels_apart(
    live_server, browser, reviewer, make_session, screenshots
):
    make_session()
    problems: list[str] = []
    for language in LANGUAGES:
        for width in WIDTHS:
            context, page = _context(browser, live_server, reviewer, width=width, language=language)
            tag = f"{_short(language)}-{width}"
            _open(page, f"{live_server.url}{reverse('audit:dashboard')}")
            page.screenshot(path=str(screenshots / f"audit-dashboard-{tag}.png"), full_page=True)
            problems += [f"dashboard {tag}: {p}" for p in overlapping_axis_labels(page)]
            problems += [f"dashboard {tag}: {p}" for p in overflow_problems(page, "#content")]
            context.close()
    assert problems == [], "\n".join(problems)


def test_the_chat_answer_card_fits_its_column_and_keeps_service_names_whole(
    live_server, browser, owner, pack_environment, screenshots
):
    from tests.chat.factories import conversation_make

    conversation = conversation_make(owner=owner, environment=pack_environment)
    session = _diagnose(environment=pack_environment, owner=owner, conversation=conversation)
    problems: list[str] = []
    for language in LANGUAGES:
        for width in WIDTHS:
            context, page = _context(browser, live_server, owner, width=width, language=language)
            tag = f"{_short(language)}-{width}"
            _open(page, f"{live_server.url}/conversations/{conversation.pk}/")
            card = f"#answer-{session.public_id}"
            page.locator(f"{card} .evidence").wait_for()
            page.evaluate(
                "(c) => document.querySelectorAll(c + ' details').forEach((d) => (d.open = true))",
                card,
            )
            page.locator(card).screenshot(path=str(screenshots / f"chat-answer-{tag}.png"))
            problems += [f"answer card {tag}: {p}" for p in overflow_problems(page, card)]
            seen, broken = broken_words(page, card, "payment-service")
            assert seen >= 3
            problems += [f"answer card {tag}: {p}" for p in broken]
            context.close()
    assert problems == [], "\n".join(problems)
