"""Cursor pagination for the API's lists, with the page size read per request."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions, serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request


class DiagnosisCursorPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"

    def __init__(self) -> None:
        # Read per request, not at import, so a changed setting takes effect.
        self.page_size = settings.API_PAGE_SIZE
        self.max_page_size = settings.API_PAGE_SIZE_MAX

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise exceptions.ValidationError({"cursor": [_("无效的游标。")]}) from None


class ToolInvocationCursorPagination(DiagnosisCursorPagination):
    ordering = ("sequence", "id")


class PageFilterSerializer(serializers.Serializer):
    cursor = serializers.CharField(
        required=False, help_text="Opaque; from the `next`/`previous` link."
    )
    page_size = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.API_PAGE_SIZE_MAX,
        help_text=f"Default {settings.API_PAGE_SIZE}.",
    )

    class Meta:
        ref_name = "PageFilter"
