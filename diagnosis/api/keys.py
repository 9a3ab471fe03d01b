"""API keys: create (the secrets are shown once), list, revoke."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from diagnosis.api.base import TAG_KEYS, ApiView
from diagnosis.api.errors import error_responses
from diagnosis.api.selectors import api_key_get_for_user, api_keys_for_user
from diagnosis.api.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyListSerializer,
    ApiKeySerializer,
    StrictInputSerializer,
    StrictTextField,
)
from diagnosis.api.services import api_key_create, api_key_revoke


class ApiKeyCreateApi(ApiView):
    class InputSerializer(StrictInputSerializer):
        name = StrictTextField(max_length=100)

        class Meta:
            ref_name = "ApiKeyCreate"

    OutputSerializer = ApiKeyCreatedSerializer

    @extend_schema(
        operation_id="api_key_create",
        tags=[TAG_KEYS],
        summary="Create an API key",
        description="The key and its callback signing secret are in this response only.",
        request=InputSerializer,
        responses={201: ApiKeyCreatedSerializer, **error_responses(400, 401, 403, 413, 429)},
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        created = api_key_create(owner=request.user, name=serializer.validated_data["name"])
        return Response(self.OutputSerializer(created).data, status=status.HTTP_201_CREATED)


class ApiKeyListApi(ApiView):
    OutputSerializer = ApiKeyListSerializer

    @extend_schema(
        operation_id="api_key_list",
        tags=[TAG_KEYS],
        summary="List your API keys (never their secrets)",
        responses={200: ApiKeyListSerializer, **error_responses(401, 429)},
    )
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer(api_keys_for_user(user=request.user)).data)


class ApiKeyRevokeApi(ApiView):
    OutputSerializer = ApiKeySerializer

    @extend_schema(
        operation_id="api_key_revoke",
        tags=[TAG_KEYS],
        summary="Revoke an API key",
        description="From now on the key answers 401. Revoking twice is a no-op.",
        request=None,
        parameters=[OpenApiParameter("key_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: ApiKeySerializer, **error_responses(401, 403, 404, 413, 429)},
    )
    def post(self, request: Request, key_id: int) -> Response:
        api_key = api_key_get_for_user(user=request.user, key_id=key_id)
        if api_key is None:
            raise exceptions.NotFound(_("没有这个 API 密钥。"))
        api_key = api_key_revoke(api_key=api_key, actor=request.user)
        return Response(self.OutputSerializer(api_key).data)
