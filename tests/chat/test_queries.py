"""The conversation page costs a bounded number of queries, however long it gets."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.chat.factories import session_make


@pytest.mark.django_db
def test_the_conversation_page_with_50_answered_questions_uses_a_bounded_number_of_queries(
    owner_client, conversation, django_assert_max_num_queries
):
    start = timezone.now() - timedelta(hours=5)
    for index in range(50):
        session_make(
            conversation=conversation,
            question=f"第 {index} 个问题",
            created_at=start + timedelta(minutes=index),
        )
    session_make(conversation=conversation, status="running")
    url = reverse("chat:conversation_detail", args=[conversation.pk])
    with django_assert_max_num_queries(12):
        response = owner_client.get(url)
    body = response.content.decode()
    assert body.count('class="turn"') == 51
    assert body.index("第 0 个问题") < body.index("第 49 个问题")
