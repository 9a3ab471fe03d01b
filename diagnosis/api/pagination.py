"""Cursor pagination for the API's lists, with the page size read per request."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions, serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

from diagnosis.api.errors import FieldNotFound
from diagnosis.api.serializers import RawTextField


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
            # No page has this cursor: a 404 like DRF's (a schema cannot say which exist).
            raise FieldNotFound("cursor", _("无效的游标。"), code="invalid_cursor") from None


class ToolInvocationCursorPagination(DiagnosisCursorPagination):
    ordering = ("sequence", "id")


class PageFilterSerializer(serializers.Serializer):
    cursor = RawTextField(
        required=False,  # any text is a cursor to try; one that names no page is a 404
        help_text="Opaque; from the `next`/`previous` link. One that names no page is a 404 "
        "`invalid_cursor`.",
    )
    page_size = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.API_PAGE_SIZE_MAX,
        help_text=f"Default {settings.API_PAGE_SIZE}.",
    )

    class Meta:
        ref_name = "PageFilter"

    def to_internal_value(self, data: Any) -> Any:
        # DRF reads "?status=" as no status filter; the schema says a value is one of its
        # kind, so a blank one is refused, not silently dropped (a cursor may be blank).
        blank = {
            name: [_("参数不能为空。")]
            for name, field in self.fields.items()
            if data.get(name) == "" and not getattr(field, "allow_blank", False)
        }
        if blank:
            raise exceptions.ValidationError(blank)
        return super().to_internal_value(data)
