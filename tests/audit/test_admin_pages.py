"""The audit pages: what a reviewer reads, escaped, in a bounded number of queries."""

import pytest
from django.urls import reverse

from audit.selectors import excerpt_in_context
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from tests.audit.conftest import XSS

pytestmark = pytest.mark.django_db

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _pages(session):
    invocation = ToolInvocation.objects.filter(session=session).first()
    call = LLMCall.objects.filter(session=session, role="executor").first()
    return {
        "changelist": reverse("admin:diagnosis_diagnosissession_changelist"),
        "change": reverse("admin:diagnosis_diagnosissession_change", args=[session.pk]),
        "invocation": reverse("admin:diagnosis_toolinvocation_change", args=[invocation.pk]),
        "invocations": reverse("admin:diagnosis_toolinvocation_changelist"),
        "llmcall": reverse("admin:diagnosis_llmcall_change", args=[call.pk]),
        "dashboard": reverse("audit:dashboard"),
        "review": reverse("audit:session_review", args=[session.public_id]),
    }


def test_model_and_tool_text_is_escaped_on_every_audit_page(client, reviewer, make_session):
    session = make_session(text=XSS)
    client.force_login(reviewer)
    for name, url in _pages(session).items():
        response = client.get(url)
        assert response.status_code == 200, name
        content = response.content.decode()
        assert XSS not in content, name
        assert "<script>alert" not in content, name
    change = client.get(_pages(session)["change"]).content.decode()
    assert ESCAPED in change


def test_the_change_page_reads_top_to_bottom_like_the_session_ran(client, reviewer, make_session):
    session = make_session()
    client.force_login(reviewer)
    content = client.get(_pages(session)["change"]).content.decode()
    order = [
        'id="question"',
        'id="attempts"',
        'id="executor"',
        'id="claims"',
        'id="hypotheses"',
        'id="verifier"',
        'id="composer"',
        'id="llm-calls"',
        'id="invocations"',
        'id="reviews"',
    ]
    positions = [content.index(marker) for marker in order]
    assert positions == sorted(positions)
    # Each claim is a compact card: its excerpt, and a link to where the reading page shows
    # it highlighted in its invocation output (the change page has no excerpts in context).
    read = reverse("audit:session_read", args=[session.public_id])
    assert f'href="{read}#claim-claim-1-b0"' in content
    assert "Connection is not available, request timed out after 30000ms" in content
    assert "<mark>" not in content
    assert 'class="rp-card ' in content and '<table class="rp-table rp-claims"' not in content
    invocation = ToolInvocation.objects.get(session=session, trace_ref="trace-1")
    assert reverse("admin:diagnosis_toolinvocation_change", args=[invocation.pk]) in content
    assert "excerpt_not_found" in content  # the Gatekeeper finding of the demoted claim
    assert "<details>" in content  # raw answers are folded
    assert reverse("audit:session_review", args=[session.public_id]) in content
    # Read-only: no save buttons.
    assert 'name="_save"' not in content


def test_an_excerpt_is_shown_with_a_few_lines_of_context_and_everything_escaped():
    text = "\n".join(f"line {n}" for n in range(20)) + "\n<b>boom</b> request timed out\nafter"
    html = str(excerpt_in_context("request TIMED out", text))
    assert "<mark>request timed out</mark>" in html
    assert "&lt;b&gt;boom&lt;/b&gt;" in html
    assert "line 18" in html and "line 17" not in html  # two lines before the match
    assert "after" in html


def test_an_excerpt_that_is_not_in_the_output_is_marked_as_missing():
    assert "<mark>" not in str(excerpt_in_context("not there at all", "something else"))


def test_the_session_list_shows_the_numbers_a_reviewer_filters_on(client, reviewer, make_session):
    session = make_session()
    make_session(attempt_count=2)
    client.force_login(reviewer)
    url = reverse("admin:diagnosis_diagnosissession_changelist")
    response = client.get(url)
    assert response.status_code == 200
    row = response.context["cl"].result_list[0]
    assert (row.claims_accepted, row.claims_demoted, row.tokens_total) == (2, 1, 1200)
    for params in (
        {"reviewed": "no"},
        {"demoted": "yes"},
        {"accepted": "yes"},
        {"retried": "yes"},
        {"duration": "10to60"},
        {"tokens": "lt5k"},
        {"decision__exact": "PASS"},
        {"status__exact": "completed"},
        {"source__exact": "chat"},
        {"answer_source__exact": "composer"},
        {"executor_output_parse_status__exact": "parsed_v2"},
        {"q": "大量超时"},
        {"q": str(session.public_id)[:8]},
    ):
        response = client.get(url, params)
        assert response.status_code == 200, params
        assert response.context["cl"].result_count >= 1, params
    assert client.get(url, {"reviewed": "yes"}).context["cl"].result_count == 0
    assert client.get(url, {"demoted": "no"}).context["cl"].result_count == 0
    assert client.get(url, {"retried": "yes"}).context["cl"].result_count == 1
    assert client.get(url, {"retried": "no"}).context["cl"].result_count == 1


def test_the_session_list_of_200_sessions_uses_a_bounded_number_of_queries(
    client, reviewer, make_session, django_assert_max_num_queries
):
    first = make_session()
    # Copies of one realistic session (the list never loads the big JSON columns anyway).
    template = DiagnosisSession.objects.get(pk=first.pk)
    copies = []
    for _ in range(199):
        template.pk = None
        template.id = None
        template.public_id = __import__("uuid").uuid4()
        copies.append(
            DiagnosisSession(
                **{
                    f.attname: getattr(template, f.attname)
                    for f in DiagnosisSession._meta.concrete_fields
                }
            )
        )
    DiagnosisSession.objects.bulk_create(copies)
    client.force_login(reviewer)
    url = reverse("admin:diagnosis_diagnosissession_changelist")
    with django_assert_max_num_queries(15):
        response = client.get(url, {"all": "", "o": "-10"})
    assert response.status_code == 200
    assert response.context["cl"].result_count == 200


def test_the_change_page_of_a_session_with_30_invocations_uses_a_bounded_number_of_queries(
    client, reviewer, make_session, django_assert_max_num_queries
):
    session = make_session(extra_invocations=28)
    assert session.invocations.count() == 30
    client.force_login(reviewer)
    url = reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    with django_assert_max_num_queries(15):
        response = client.get(url)
    assert response.status_code == 200
    assert response.content.decode().count('id="inv-') == 30


def test_codes_are_shown_as_labels_with_the_code_kept_in_the_tooltip(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    pages = _pages(session)
    change = client.get(pages["change"]).content.decode()
    review = client.get(pages["review"]).content.decode()
    for content in (change, review):
        assert '<span class="rp-label" title="accepted">通过</span>' in content
        assert '<span class="rp-label" title="demoted">降级</span>' in content
        assert '<span class="rp-label" title="direct_observation">直接观测</span>' in content
        assert '<span class="rp-label" title="missing_info">列为待补信息</span>' in content
        assert '<span class="rp-label" title="allowed_claim">已确认</span>' in content
        assert ">allowed_claim<" not in content  # the code is never read as a label
    assert '<span class="rp-label" title="excerpt_not_found">摘录不在工具输出中</span>' in change
    assert '<span class="rp-label" title="parsed_v2">已解析</span>' in change
    assert ">excerpt_not_found<" not in change

    client.post(reverse("set_language"), {"language": "en", "next": "/"})
    change = client.get(pages["change"]).content.decode()
    review = client.get(pages["review"]).content.decode()
    for content in (change, review):
        assert '<span class="rp-label" title="accepted">Accepted</span>' in content
        assert '<span class="rp-label" title="demoted">Demoted</span>' in content
        assert '<span class="rp-label" title="direct_observation">Direct observation</span>' in (
            content
        )
    assert "Excerpt not found in the tool output" in change
    assert '<span class="rp-label" title="parsed_v2">Parsed</span>' in change


def test_every_admin_and_reviewer_page_is_laid_out_without_the_nav_sidebar(
    client, reviewer, make_session
):
    # Intended: the audit tables and claim cards need the page's width; the breadcrumbs and
    # the index (which links the quality dashboard) lead to every model and reviewer page.
    session = make_session()
    client.force_login(reviewer)
    pages = {**_pages(session), "index": reverse("admin:index")}
    for name, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, name
        assert response.context["is_nav_sidebar_enabled"] is False, name
        assert 'id="nav-sidebar"' not in response.content.decode(), name


def test_stored_text_says_which_language_it_was_recorded_in_when_the_ui_reads_in_another(
    client, reviewer, make_session
):
    session = make_session()  # asked and answered in Chinese
    client.force_login(reviewer)
    read = reverse("audit:session_read", args=[session.public_id])
    chinese_ui = client.get(read, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert 'lang="zh"' in chinese_ui
    assert "（原文：中文）" not in chinese_ui
    client.cookies["django_language"] = "en"
    english_ui = client.get(read).content.decode()
    assert '<span class="recorded-in">(recorded in Chinese)</span>' in english_ui
    # The Gatekeeper's own notes are English: labelled in the Chinese UI, not in the English.
    assert "(recorded in English)" not in english_ui
