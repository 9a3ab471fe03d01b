"""Asking through the page runs the real flow (offline provider, a demo pack) to an answer."""

from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from chat.models import Conversation

PACK = Path(settings.BASE_DIR) / "scenarios" / "payment-pool-saturation"


@pytest.fixture
def pack_environment(db):
    pytest.importorskip("diagnosis.offline")
    from diagnosis.evidence.services import environments_sync_from_packs

    [environment] = environments_sync_from_packs(dirs=[PACK])
    return environment


@pytest.mark.django_db
def test_asking_through_the_page_shows_the_evidence_checked_answer(
    owner_client, owner, pack_environment, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        owner_client.post(
            reverse("chat:conversation_new"),
            {"environment": pack_environment.pk},
        )
    conversation = Conversation.objects.get(owner=owner)
    question = "payment-service 从 10:20 开始大量超时，订单也下不了，帮我看看原因"
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(
            reverse("chat:conversation_question", args=[conversation.pk]),
            {"question": question},
            HTTP_HX_REQUEST="true",
        )
    session = conversation.sessions.get()
    session.refresh_from_db()
    assert session.status == "completed", session.error
    assert response.status_code == 200

    page = owner_client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    body = page.content.decode()
    assert session.get_decision_display() in body
    assert "连接池" in body
    assert 'class="claim"' in body and "<mark>" in body
    assert 'hx-trigger="every 1s"' not in body
