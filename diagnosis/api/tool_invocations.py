"""Tool invocations: what each tool call of a diagnosis returned, as the model read it."""

from __future__ import annotations

from uuid import UUID

from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from diagnosis.api.base import ID_PARAMETER, TAG_DIAGNOSES, ApiView, diagnosis_or_404
from diagnosis.api.errors import error_responses
from diagnosis.api.pagination import PageFilterSerializer, ToolInvocationCursorPagination
from diagnosis.api.selectors import tool_invocation_get_for_user, tool_invocations_for_session
from diagnosis.api.serializers import ToolInvocationListSerializer, ToolInvocationSerializer


class DiagnosisToolInvocationListApi(ApiView):
    OutputSerializer = ToolInvocationListSerializer

    @extend_schema(
        operation_id="diagnosis_tool_invocations",
        tags=[TAG_DIAGNOSES],
        summary="The tool invocations of a diagnosis, with outputs",
        description="In call order, cursor-paginated like the diagnosis list.",
        parameters=[ID_PARAMETER, PageFilterSerializer],
        responses={200: ToolInvocationListSerializer, **error_responses(400, 401, 404, 429)},
    )
    def get(self, request: Request, public_id: UUID) -> Response:
        PageFilterSerializer(data=request.query_params).is_valid(raise_exception=True)
        session = diagnosis_or_404(request, public_id)
        paginator = ToolInvocationCursorPagination()
        page = paginator.paginate_queryset(
            tool_invocations_for_session(session=session), request, view=self
        )
        return paginator.get_paginated_response(ToolInvocationSerializer(page, many=True).data)


class ToolInvocationDetailApi(ApiView):
    OutputSerializer = ToolInvocationSerializer

    @extend_schema(
        operation_id="tool_invocation_retrieve",
        tags=[TAG_DIAGNOSES],
        summary="One tool invocation with its output",
        parameters=[
            OpenApiParameter(
                "invocation_id",
                OpenApiTypes.INT,
                OpenApiParameter.PATH,
                description="The id a binding cites.",
            )
        ],
        responses={200: ToolInvocationSerializer, **error_responses(401, 404, 429)},
    )
    def get(self, request: Request, invocation_id: int) -> Response:
        invocation = tool_invocation_get_for_user(user=request.user, invocation_id=invocation_id)
        if invocation is None:
            raise exceptions.NotFound(_("没有这个工具调用。"))
        return Response(self.OutputSerializer(invocation).data)
