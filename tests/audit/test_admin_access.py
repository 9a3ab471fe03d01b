"""Who may enter the audit admin, and that diagnosis data is never editable there."""

import pytest
from django.contrib import admin
from django.urls import reverse

from diagnosis.models import (
    DiagnosisSession,
    KnowledgeChunk,
    KnowledgeDocument,
    LLMCall,
    SessionEvent,
    ToolInvocation,
)

pytestmark = pytest.mark.django_db

DIAGNOSIS_MODELS = ["diagnosissession", "toolinvocation", "llmcall", "sessionevent"]


def _rows(session):
    from diagnosis.services import session_event_add

    event = session_event_add(session=session, kind="stage", stage="done", message="done")
    return {
        "diagnosissession": session.pk,
        "toolinvocation": ToolInvocation.objects.filter(session=session).first().pk,
        "llmcall": LLMCall.objects.filter(session=session).first().pk,
        "sessionevent": SessionEvent.objects.get(pk=event.pk).pk,
    }


def test_a_reviewer_can_read_every_diagnosis_page(client, reviewer, make_session):
    session = make_session()
    client.force_login(reviewer)
    for model, pk in _rows(session).items():
        assert client.get(reverse(f"admin:diagnosis_{model}_changelist")).status_code == 200
        assert client.get(reverse(f"admin:diagnosis_{model}_change", args=[pk])).status_code == 200
    assert client.get(reverse("admin:chat_conversation_changelist")).status_code == 200
    assert client.get(reverse("admin:audit_review_changelist")).status_code == 200
    assert client.get(reverse("admin:audit_auditevent_changelist")).status_code == 200


@pytest.mark.parametrize("who", ["reviewer", "superuser"])
def test_nobody_can_add_change_or_delete_diagnosis_data_in_admin(
    client, request, who, make_session
):
    session = make_session()
    client.force_login(request.getfixturevalue(who))
    for model, pk in _rows(session).items():
        change = reverse(f"admin:diagnosis_{model}_change", args=[pk])
        delete = reverse(f"admin:diagnosis_{model}_delete", args=[pk])
        add = reverse(f"admin:diagnosis_{model}_add")
        assert client.post(change, {"original_query": "edited"}).status_code == 403, model
        assert client.get(delete).status_code == 403, model
        assert client.post(delete, {"post": "yes"}).status_code == 403, model
        assert client.get(add).status_code == 403, model
        assert client.post(add, {}).status_code == 403, model
    session.refresh_from_db()
    assert session.original_query.startswith("payment-service")
    assert ToolInvocation.objects.filter(session=session).count() == 2


def test_the_bulk_delete_action_is_not_offered_on_diagnosis_lists(client, superuser, make_session):
    session = make_session()
    client.force_login(superuser)
    url = reverse("admin:diagnosis_diagnosissession_changelist")
    response = client.post(url, {"action": "delete_selected", "_selected_action": [session.pk]})
    assert response.status_code in (200, 302)
    assert b"delete_selected" not in client.get(url).content
    assert session.__class__.objects.filter(pk=session.pk).exists()


def test_a_reviewer_cannot_edit_runbooks_environments_or_reviews(client, reviewer, environment):
    doc = KnowledgeDocument.objects.create(slug="pool", title="Pool", body="# Pool\n\n## A\nx\n")
    client.force_login(reviewer)
    assert (
        client.get(reverse("admin:diagnosis_knowledgedocument_change", args=[doc.pk])).status_code
        == 200
    )
    response = client.post(
        reverse("admin:diagnosis_knowledgedocument_change", args=[doc.pk]),
        {"title": "hacked", "slug": "pool", "body": "x"},
    )
    assert response.status_code == 403
    assert client.get(reverse("admin:diagnosis_environment_add")).status_code == 403
    assert client.get(reverse("admin:audit_review_add")).status_code == 403


def test_a_plain_sre_user_is_sent_to_the_admin_login(client, owner, make_session):
    session = make_session()
    client.force_login(owner)
    for url in (
        reverse("admin:index"),
        reverse("admin:diagnosis_diagnosissession_changelist"),
        reverse("admin:diagnosis_diagnosissession_change", args=[session.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert response.url.startswith(reverse("admin:login"))


def test_a_plain_sre_user_gets_403_on_the_reviewer_pages(client, owner, make_session):
    session = make_session()
    client.force_login(owner)
    assert client.get(reverse("audit:dashboard")).status_code == 403
    review_url = reverse("audit:session_review", args=[session.public_id])
    assert client.get(review_url).status_code == 403
    assert client.post(review_url, {"verdict": "wrong"}).status_code == 403
    assert not session.reviews.exists()


def test_anonymous_visitors_are_sent_to_login_from_reviewer_pages(client, make_session):
    session = make_session()
    for url in (
        reverse("audit:dashboard"),
        reverse("audit:session_review", args=[session.public_id]),
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert "login" in response.url


def test_a_superuser_edits_a_runbook_and_it_is_rechunked(client, superuser, environment):
    doc = KnowledgeDocument.objects.create(
        slug="pool", title="Pool", body="# Pool\n\n## Symptoms\nold\n", environment=environment
    )
    client.force_login(superuser)
    response = client.post(
        reverse("admin:diagnosis_knowledgedocument_change", args=[doc.pk]),
        {
            "title": "Pool",
            "slug": "pool",
            "environment": environment.pk,
            "body": "# Pool\n\n## Symptoms\nConnection is not available\n\n## Fix\nmore\n",
            "chunks-TOTAL_FORMS": "0",
            "chunks-INITIAL_FORMS": "0",
            "chunks-MIN_NUM_FORMS": "0",
            "chunks-MAX_NUM_FORMS": "1000",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    chunks = list(KnowledgeChunk.objects.filter(document=doc).order_by("ordinal"))
    assert [c.heading for c in chunks] == ["Symptoms", "Fix"]
    assert "Connection is not available" in chunks[0].text


def test_a_superuser_manages_environments(client, superuser):
    client.force_login(superuser)
    response = client.post(
        reverse("admin:diagnosis_environment_add"),
        {
            "slug": "prod",
            "name": "Prod",
            "kind": "live",
            "services": "[]",
            "is_active": "on",
            "prometheus_url": "https://prometheus.example.com",
        },
    )
    assert response.status_code == 302, response.content[:3000]
    from diagnosis.models import Environment

    assert Environment.objects.get(slug="prod").prometheus_url == "https://prometheus.example.com"


def test_a_superuser_creates_an_api_key_in_admin_and_sees_its_secret_once(client, superuser):
    from django.contrib.messages import get_messages

    from diagnosis.api.auth import secret_hash
    from diagnosis.models import ApiKey

    client.force_login(superuser)
    response = client.post(
        reverse("admin:diagnosis_apikey_add"), {"owner": superuser.pk, "name": "grafana"}
    )
    assert response.status_code == 302, response.content[:2000]
    api_key = ApiKey.objects.get(name="grafana")
    [message] = [m for m in get_messages(response.wsgi_request) if "<code>" in str(m)]
    key = str(message).split("<code>")[1].split("</code>")[0]
    assert key.startswith(f"rp_{api_key.prefix}_")
    assert api_key.secret_hash == secret_hash(key) != key
    client.post(
        reverse("admin:diagnosis_apikey_changelist"),
        {"action": "revoke", "_selected_action": [api_key.pk]},
    )
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None


def test_a_reviewer_cannot_create_api_keys_or_receivers(client, reviewer):
    client.force_login(reviewer)
    assert client.get(reverse("admin:diagnosis_apikey_add")).status_code == 403
    assert client.get(reverse("admin:diagnosis_alertmanagerreceiver_add")).status_code == 403


def test_each_models_admin_is_registered_by_its_own_app_but_the_audited_session():
    """An app's admin.py registers its own models; the session list is the audit app's.

    The diagnosis session's admin reads it through the audit app (reviews, claim cards,
    the export of regression cases), which the core may not import.
    """
    registered_by = {
        model: type(model_admin).__module__
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in ("diagnosis", "chat", "audit")
    }
    home = {model: f"{model._meta.app_label}.admin" for model in registered_by}
    home[DiagnosisSession] = "audit.admin"
    misplaced = {m._meta.label: where for m, where in registered_by.items() if where != home[m]}
    assert not misplaced
    assert {m._meta.app_label for m in registered_by} == {"diagnosis", "chat", "audit"}
