"""A user sees only their own conversations and sessions: 404 for every page and partial."""

import pytest
from django.urls import reverse

from chat.models import Feedback
from diagnosis.models import DiagnosisSession
from tests.chat.factories import session_make


def _get_urls(conversation, session):
    return [
        reverse("chat:conversation_detail", args=[conversation.pk]),
        reverse("chat:session_detail", args=[session.public_id]),
        reverse("chat:session_progress", args=[session.public_id]),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("htmx", [False, True])
def test_an_outsider_gets_404_for_every_page_and_partial(outsider_client, conversation, htmx):
    answered = session_make(conversation=conversation)
    running = session_make(conversation=conversation, status="running")
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    for url in _get_urls(conversation, answered) + _get_urls(conversation, running):
        assert outsider_client.get(url, **headers).status_code == 404, url


@pytest.mark.django_db
def test_an_outsider_cannot_ask_retry_or_give_feedback_in_someone_elses_conversation(
    outsider_client, conversation
):
    failed = session_make(conversation=conversation, status="failed")
    answered = session_make(conversation=conversation)
    before = DiagnosisSession.objects.count()
    posts = [
        (reverse("chat:conversation_question", args=[conversation.pk]), {"question": "hi"}),
        (reverse("chat:session_retry", args=[failed.public_id]), {}),
        (reverse("chat:session_feedback", args=[answered.public_id]), {"helpful": "1"}),
    ]
    for url, data in posts:
        assert outsider_client.post(url, data).status_code == 404, url
    assert DiagnosisSession.objects.count() == before
    assert not Feedback.objects.exists()


@pytest.mark.django_db
def test_the_conversation_list_shows_only_the_users_own_conversations(
    client, owner, outsider, conversation
):
    from tests.chat.factories import conversation_make

    theirs = conversation_make(owner=outsider)
    theirs.title = "outsider-secret-title"
    theirs.save()
    client.force_login(owner)
    body = client.get(reverse("chat:conversation_list")).content.decode()
    assert conversation.title in body
    assert "outsider-secret-title" not in body


@pytest.mark.django_db
def test_a_session_of_the_user_asked_outside_their_conversation_is_not_shown(
    client, owner, outsider, conversation
):
    # The owner's conversation, but a session owned by someone else (e.g. tampered data).
    session = session_make(conversation=conversation)
    DiagnosisSession.objects.filter(pk=session.pk).update(owner=outsider)
    client.force_login(outsider)
    assert client.get(reverse("chat:session_detail", args=[session.public_id])).status_code == 404


@pytest.mark.django_db
def test_pages_ask_an_anonymous_visitor_to_log_in(client, conversation):
    response = client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
