from __future__ import annotations

from django.db.models import QuerySet

from chat.models import Conversation


def conversation_list_for_user(*, user) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=user).select_related("environment")
