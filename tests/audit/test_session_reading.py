"""The reading page: a session as a reviewer reads it, with the review form beside its claims."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from audit.models import Review
from tests.audit.conftest import XSS

pytestmark = pytest.mark.django_db


def _read(session) -> str:
    return reverse("audit:session_read", args=[session.public_id])


def test_a_reviewer_reads_the_flow_then_the_answer_then_the_claims_with_demoted_ones_apart(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    response = client.get(_read(session))
    assert response.status_code == 200
    content = response.content.decode()
    order = ['id="step-plan"', 'id="step-attempt-1"', 'id="step-verifier"', 'id="step-composer"']
    order += ['id="answer"', 'id="claims"', 'id="claims-apart"', 'id="verdict"']
    positions = [content.index(marker) for marker in order]
    assert positions == sorted(positions)
    confirmed = content[content.index('id="claims"') : content.index('id="claims-apart"')]
    apart = content[content.index('id="claims-apart"') : content.index('id="verdict"')]
    assert 'id="claim-claim-1"' in confirmed and 'id="claim-claim-2"' in confirmed
    assert 'id="claim-claim-3"' in apart and 'id="claim-claim-3"' not in confirmed
    # Findings and classifications in words, the code only in the tooltip.
    assert '<span class="rp-label" title="excerpt_not_found">摘录不在工具输出中</span>' in apart
    assert '<span class="rp-label" title="unsupported">缺乏支持</span>' in apart
    assert '<span class="rp-label" title="direct_observation">直接观测</span>' in confirmed
    # The excerpt is highlighted in its output; the one not found is quoted as written.
    assert "<mark>Connection is not available, request timed out after 30000ms</mark>" in confirmed
    assert "mysql down" in apart


def test_the_answer_is_rendered_and_the_raw_material_is_folded_and_indented(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    content = client.get(_read(session)).content.decode()
    answer = content[content.index('id="answer"') : content.index("Executor 原始回答")]
    assert "<strong>结论</strong>" in answer  # the final answer as Markdown
    assert "**结论**" not in answer
    # The raw Executor answer (one line of JSON) is shown indented, line by line.
    raw = content[content.index("Executor 原始回答") :]
    assert "\n  &quot;answer_version&quot;: &quot;executor_evidence_v2&quot;" in raw
    assert content.count("<details>") >= 5  # plan, tool calls, model answers, Composer input


def test_each_claim_card_carries_the_review_question_about_it_and_the_review_returns_here(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    content = client.get(_read(session)).content.decode()
    card = content[content.index('id="claim-claim-2"') :]
    card = card[: card.index("</article>")]
    assert 'name="claim_1_agrees"' in card and 'name="claim_1_note"' in card
    assert "csrfmiddlewaretoken" in content
    response = client.post(
        reverse("audit:session_review", args=[session.public_id]),
        {"verdict": "correct", "claim_1_agrees": "agree", "return_to": "read"},
    )
    assert response.status_code == 302 and response.url == _read(session)
    review = Review.objects.get(session=session)
    assert list(review.claim_reviews.values_list("claim_id", "agrees_with_verifier")) == [
        ("claim-2", True)
    ]


def test_a_return_address_other_than_the_reading_page_goes_back_to_the_admin_page(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    response = client.post(
        reverse("audit:session_review", args=[session.public_id]),
        {"verdict": "correct", "return_to": "https://evil.example/"},
    )
    assert response.url == reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])


def test_only_reviewers_read_the_page(client, owner, reviewer, make_session, django_user_model):
    session = make_session()
    url = _read(session)
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(owner)  # the session's own asker, not staff
    assert client.get(url).status_code == 403
    staff = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_diagnosissession"))
    client.force_login(staff)
    assert client.get(url).status_code == 403  # may browse admin, may not review
    client.force_login(reviewer)
    assert client.get(url).status_code == 200
    missing = reverse("audit:session_read", args=["00000000-0000-0000-0000-000000000000"])
    assert client.get(missing).status_code == 404
    assert client.post(url).status_code == 405


def test_model_and_tool_text_on_the_reading_page_is_escaped(client, reviewer, make_session):
    session = make_session(text=XSS)
    client.force_login(reviewer)
    content = client.get(_read(session)).content.decode()
    assert XSS not in content and "<script>alert" not in content
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in content


def test_the_admin_page_and_the_session_list_link_to_the_reading_page(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    change = client.get(reverse("admin:diagnosis_diagnosissession_change", args=[session.pk]))
    listing = client.get(reverse("admin:diagnosis_diagnosissession_changelist"))
    assert _read(session) in change.content.decode()
    assert _read(session) in listing.content.decode()


def test_the_reading_page_of_a_session_with_30_tool_calls_uses_a_bounded_number_of_queries(
    client, reviewer, make_session, django_assert_max_num_queries
):
    session = make_session(extra_invocations=28)
    client.force_login(reviewer)
    with django_assert_max_num_queries(15):
        response = client.get(_read(session))
    assert response.content.decode().count('id="inv-') == 30


def test_the_english_ui_reads_the_session_in_english(client, reviewer, make_session):
    session = make_session()
    client.force_login(reviewer)
    client.post(reverse("set_language"), {"language": "en", "next": "/"})
    content = client.get(_read(session)).content.decode()
    assert "Read the session" in content
    assert "Confirmed claims (2)" in content and "Demoted or unused claims (1)" in content
    assert '<span class="rp-label" title="root_cause">Root cause</span>' in content
    assert "3 claims: 2 accepted, 1 demoted" in content
