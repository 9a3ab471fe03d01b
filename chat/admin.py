"""The admin of the chat's models: conversations are read-only."""

from __future__ import annotations

from django.contrib import admin

from chat.models import Conversation
from diagnosis.admin import ReadOnlyAdmin


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["title", "owner", "environment", "created_at", "updated_at"]
    list_filter = ["environment"]
    list_select_related = ["owner", "environment"]
    search_fields = ["title", "owner__username"]
