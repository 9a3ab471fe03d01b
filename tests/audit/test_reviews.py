"""Reviews: recorded on the reviewer page, each with its audit event in the same transaction."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from audit.models import AuditEvent, ClaimReview, Review
from audit.services import ClaimJudgement, audit_event_record, review_record

pytestmark = pytest.mark.django_db


def test_a_reviewer_records_a_verdict_and_per_claim_agreement_from_the_review_page(
    client, reviewer, make_session
):
    session = make_session()
    client.force_login(reviewer)
    url = reverse("audit:session_review", args=[session.public_id])
    page = client.get(url)
    assert page.status_code == 200
    assert "csrfmiddlewaretoken" in page.content.decode()
    response = client.post(
        url,
        {
            "verdict": "partly_correct",
            "notes": "claim-2 overstated",
            "claim_0_agrees": "agree",
            "claim_1_agrees": "disagree",
            "claim_1_note": "the limit is 30, not 20",
            "claim_2_agrees": "",
        },
    )
    assert response.status_code == 302
    assert response.url == reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    review = Review.objects.get(session=session)
    assert (review.reviewer, review.verdict, review.notes) == (
        reviewer,
        "partly_correct",
        "claim-2 overstated",
    )
    assert sorted(review.claim_reviews.values_list("claim_id", "agrees_with_verifier")) == [
        ("claim-1", True),
        ("claim-2", False),
    ]
    event = AuditEvent.objects.get()
    assert (event.actor, event.action, event.target_type, event.target_id) == (
        reviewer,
        "review_recorded",
        "diagnosis.diagnosissession",
        str(session.pk),
    )
    assert event.details["verdict"] == "partly_correct"
    assert event.details["disagreements"] == ["claim-2"]
    # The session page now shows the review and the list marks it reviewed.
    change = client.get(response.url).content.decode()
    assert "the limit is 30, not 20" in change
    listing = client.get(
        reverse("admin:diagnosis_diagnosissession_changelist"), {"reviewed": "yes"}
    )
    assert listing.context["cl"].result_count == 1


def test_the_review_page_rejects_a_post_without_a_verdict(client, reviewer, make_session):
    session = make_session()
    client.force_login(reviewer)
    url = reverse("audit:session_review", args=[session.public_id])
    response = client.post(url, {"notes": "no verdict"})
    assert response.status_code == 200
    assert response.context["form"].errors["verdict"]
    assert not Review.objects.exists() and not AuditEvent.objects.exists()


def test_the_review_page_needs_a_csrf_token(reviewer, make_session):
    from django.test import Client

    session = make_session()
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    url = reverse("audit:session_review", args=[session.public_id])
    assert client.post(url, {"verdict": "correct"}).status_code == 403
    assert not Review.objects.exists()


def test_a_review_and_its_audit_event_roll_back_together(reviewer, make_session, monkeypatch):
    session = make_session()

    def broken(**kwargs):
        raise RuntimeError("audit store down")

    monkeypatch.setattr("audit.services.audit_event_record", broken)
    with pytest.raises(RuntimeError):
        review_record(
            session=session,
            reviewer=reviewer,
            verdict="wrong",
            claims=[ClaimJudgement(claim_id="claim-1", agrees_with_verifier=False)],
        )
    assert not Review.objects.exists()
    assert not ClaimReview.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_review_cannot_judge_a_claim_the_session_does_not_have(reviewer, make_session):
    session = make_session()
    with pytest.raises(ValidationError):
        review_record(
            session=session,
            reviewer=reviewer,
            verdict="wrong",
            claims=[ClaimJudgement(claim_id="claim-99", agrees_with_verifier=False)],
        )
    assert not Review.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_audit_event_outside_a_transaction_is_refused(make_session):
    session = make_session()
    with pytest.raises(RuntimeError):
        audit_event_record(actor=None, action="review_recorded", target=session)
    assert not AuditEvent.objects.exists()
