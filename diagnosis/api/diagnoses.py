"""Diagnoses: submit, list, read, cancel, and the callback attempts of one."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from diagnosis.api.base import ID_PARAMETER, TAG_DIAGNOSES, ApiView, diagnosis_or_404, diagnosis_url
from diagnosis.api.errors import FieldNotFound, error_responses
from diagnosis.api.pagination import DiagnosisCursorPagination, PageFilterSerializer
from diagnosis.api.selectors import (
    OwnConversation,
    callback_attempts_for_session,
    conversation_get_for_user,
    diagnosis_detail,
    diagnosis_list_for_user,
)
from diagnosis.api.serializers import (
    CallbackAttemptListSerializer,
    DiagnosisDetailSerializer,
    DiagnosisPageSerializer,
    DiagnosisSummarySerializer,
    HttpUrlField,
    Rfc3339DateTimeField,
    SlugTextField,
    StrictInputSerializer,
    StrictIntegerField,
    StrictTextField,
    schema_pattern,
)
from diagnosis.api.services import diagnosis_api_submit
from diagnosis.models import ApiKey, DiagnosisSession, Environment
from diagnosis.services import answer_language_pick, diagnosis_cancel, environment_default

LANGUAGES = ("zh-CN", "en")
MAX_WINDOW = timedelta(days=7)
MIN_WINDOW_MINUTES = 1
MIN_WINDOW = timedelta(minutes=MIN_WINDOW_MINUTES)
IDEMPOTENCY_KEY_MAX = 200
# A header's value as HTTP has it (RFC 9110 field-value): tabs and visible characters, no
# other control character. The schema states it and the view checks it: one rule.
IDEMPOTENCY_KEY = r"^[^\x00-\x08\x0a-\x1f\x7f]*\Z"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY)


class WindowSerializer(StrictInputSerializer):
    start = Rfc3339DateTimeField()
    end = Rfc3339DateTimeField()

    class Meta:
        ref_name = "DiagnosisWindowInput"

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = window_bounds(attrs["start"], attrs["end"])
        return {"start": start, "end": end}


def window_bounds(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The window two moments give: in either order, at least MIN_WINDOW, at most MAX_WINDOW.

    A schema cannot compare two fields, so every pair it allows is taken; the 202's
    ``context.window`` shows the window used. Too long keeps its last MAX_WINDOW; too
    short becomes the MIN_WINDOW that ends at the later moment (or starts at the earlier
    one, at the calendar's first minute).
    """
    start, end = sorted((start, end))
    if end - start > MAX_WINDOW:
        return end - MAX_WINDOW, end
    if end - start < MIN_WINDOW:
        try:
            return end - MIN_WINDOW, end
        except OverflowError:
            return start, start + MIN_WINDOW
    return start, end


def _environment_named(slug: str | None) -> Environment | None:
    """The active environment a body names (None when it names none); else a 404."""
    if slug is None:
        return None
    environment = Environment.objects.filter(slug=slug, is_active=True).first()
    if environment is None:
        raise FieldNotFound("environment", _("没有使用这个标识的已启用环境。"))
    return environment


def _conversation_named(conversation_id: int | None, request: Request) -> OwnConversation | None:
    """The caller's conversation a body names (None when it names none); else a 404."""
    if conversation_id is None:
        return None
    conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise FieldNotFound("conversation", _("没有这个对话。"))
    return conversation


class DiagnosisCreateApi(ApiView):
    class InputSerializer(StrictInputSerializer):
        class ContextInputSerializer(StrictInputSerializer):
            services = serializers.ListField(
                child=StrictTextField(max_length=100), max_length=20, required=False
            )
            window = WindowSerializer(
                required=False,
                help_text="The period to look at: start and end in either order; shorter "
                f"than {MIN_WINDOW_MINUTES} minute it becomes the minute that ends at the later "
                f"one, longer than {MAX_WINDOW.days} days it keeps its last {MAX_WINDOW.days} "
                "days. The response's `context.window` is the window used.",
            )

            class Meta:
                ref_name = "DiagnosisContextInput"

        question = StrictTextField(max_length=settings.API_QUESTION_MAX_CHARS)
        environment = SlugTextField(
            required=False,
            help_text="An active environment's slug (one that names none is a 404 `not_found`); "
            "default: the conversation's, else the configured default.",
        )
        context = ContextInputSerializer(required=False)
        language = serializers.ChoiceField(
            choices=LANGUAGES,
            required=False,
            help_text="The answer's language. Default: the question's language (Chinese when "
            "it has CJK script, English when it is plain English words), else Accept-Language, "
            "else zh-CN.",
        )
        conversation = StrictIntegerField(
            required=False,
            allow_null=True,
            help_text="A conversation id of yours (one that names none is a 404 `not_found`).",
        )
        callback_url = HttpUrlField(
            required=False,
            allow_blank=True,
            help_text="http(s) URL that receives the signed result when the diagnosis ends "
            "(API key authentication only).",
        )

        class Meta:
            ref_name = "DiagnosisCreate"

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            # Run once every field is valid, so a malformed body is a 400 before a lookup 404s.
            conversation = _conversation_named(attrs.get("conversation"), self.context["request"])
            environment = _environment_named(attrs.get("environment"))
            if conversation and environment and conversation.environment_id != environment.pk:
                raise serializers.ValidationError({"environment": [_("这个对话属于另一个环境。")]})
            if environment is None:
                try:
                    environment = (
                        Environment.objects.get(pk=conversation.environment_id)
                        if conversation
                        else environment_default()
                    )
                except Environment.DoesNotExist:
                    raise serializers.ValidationError(
                        {"environment": [_("尚未配置默认环境，请指定一个。")]}
                    ) from None
            row = conversation.row if conversation else None
            return {**attrs, "conversation": row, "environment": environment}

    OutputSerializer = DiagnosisDetailSerializer

    @extend_schema(
        operation_id="diagnosis_create",
        tags=[TAG_DIAGNOSES],
        summary="Submit a diagnosis",
        description="Queues a diagnosis and answers 202 with it and a Location header. "
        "With an `Idempotency-Key` header, a retry with the same key and the same body returns "
        "the first diagnosis (202, `Idempotent-Replayed: true`); the same key with a different "
        "body is a 409 `idempotency_conflict`.",
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                {
                    "type": "string",
                    "maxLength": IDEMPOTENCY_KEY_MAX,
                    "pattern": schema_pattern(IDEMPOTENCY_KEY),
                },
                OpenApiParameter.HEADER,
                required=False,
                description=f"Up to {IDEMPOTENCY_KEY_MAX} characters (no control character but "
                "a tab), unique per owner.",
            ),
            OpenApiParameter(
                "Location",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                response=[202],
                description="The diagnosis's URL.",
            ),
            OpenApiParameter(
                "Idempotent-Replayed",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                response=[202],
                description='"true" when an earlier request with this Idempotency-Key answered.',
            ),
        ],
        request=InputSerializer,
        responses={
            202: OpenApiResponse(DiagnosisDetailSerializer, description="Queued (or replayed)."),
            **error_responses(400, 401, 403, 404, 409, 413, 429),
        },
    )
    def post(self, request: Request) -> Response:
        # Checked as sent, as the schema checks it; then without the spaces or tabs around
        # it, which HTTP does not count as part of a header's value.
        sent = request.headers.get("Idempotency-Key", "")
        if len(sent) > IDEMPOTENCY_KEY_MAX:
            raise exceptions.ValidationError(
                {"Idempotency-Key": [_("最多 %(max)s 个字符。") % {"max": IDEMPOTENCY_KEY_MAX}]}
            )
        if not _IDEMPOTENCY_KEY.match(sent):
            raise exceptions.ValidationError({"Idempotency-Key": [_("不能包含控制字符。")]})
        idempotency_key = sent.strip(" \t")
        serializer = self.InputSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        context = data.get("context") or {}
        window = context.get("window")
        submitted = diagnosis_api_submit(
            owner=request.user,
            api_key=request.auth if isinstance(request.auth, ApiKey) else None,
            question=data["question"],
            environment=data["environment"],
            language=data.get("language")
            or answer_language_pick(
                question=data["question"], ui_language=request.headers.get("Accept-Language")
            ),
            services=list(context.get("services") or []),
            window={k: v.isoformat().replace("+00:00", "Z") for k, v in window.items()}
            if window
            else None,
            conversation=data.get("conversation"),
            callback_url=data.get("callback_url", ""),
            idempotency_key=idempotency_key,
        )
        session = diagnosis_or_404(request, submitted.session.public_id)
        headers = {"Location": diagnosis_url(session)}
        if submitted.replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(
            self.OutputSerializer(diagnosis_detail(session=session)).data,
            status=status.HTTP_202_ACCEPTED,
            headers=headers,
        )


class DiagnosisListApi(ApiView):
    class FilterSerializer(PageFilterSerializer):
        status = serializers.ChoiceField(choices=DiagnosisSession.Status.choices, required=False)
        decision = serializers.ChoiceField(
            choices=DiagnosisSession.Decision.choices, required=False
        )
        source = serializers.ChoiceField(choices=DiagnosisSession.Source.choices, required=False)
        environment = SlugTextField(required=False, help_text="Environment slug.")
        created_after = Rfc3339DateTimeField(required=False, help_text="Inclusive.")
        created_before = Rfc3339DateTimeField(required=False, help_text="Exclusive.")

        class Meta:
            ref_name = "DiagnosisListFilter"

    OutputSerializer = DiagnosisSummarySerializer

    @extend_schema(
        operation_id="diagnosis_list",
        tags=[TAG_DIAGNOSES],
        summary="List your diagnoses",
        description="Newest first, cursor-paginated. Filters combine with AND.",
        parameters=[FilterSerializer],
        responses={200: DiagnosisPageSerializer, **error_responses(400, 401, 404, 429)},
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        sessions: QuerySet[DiagnosisSession] = diagnosis_list_for_user(
            user=request.user, filters=filters.validated_data
        )
        paginator = DiagnosisCursorPagination()
        page = paginator.paginate_queryset(sessions, request, view=self) or []
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class DiagnosisDetailApi(ApiView):
    OutputSerializer = DiagnosisDetailSerializer

    @extend_schema(
        operation_id="diagnosis_retrieve",
        tags=[TAG_DIAGNOSES],
        summary="Get a diagnosis with its claims and evidence",
        parameters=[ID_PARAMETER],
        responses={200: DiagnosisDetailSerializer, **error_responses(401, 404, 429)},
    )
    def get(self, request: Request, public_id: UUID) -> Response:
        session = diagnosis_or_404(request, public_id)
        return Response(self.OutputSerializer(diagnosis_detail(session=session)).data)


class DiagnosisCancelApi(ApiView):
    OutputSerializer = DiagnosisDetailSerializer

    @extend_schema(
        operation_id="diagnosis_cancel",
        tags=[TAG_DIAGNOSES],
        summary="Cancel a queued or running diagnosis",
        description="A queued diagnosis ends as cancelled at once; a running one stops at its "
        "next step (`cancel_requested` is true until then). Cancelling a cancelled diagnosis "
        "is a no-op; a completed or failed one is a 409 `not_cancellable`.",
        request=None,
        parameters=[ID_PARAMETER],
        responses={
            200: DiagnosisDetailSerializer,
            **error_responses(401, 403, 404, 409, 413, 429),
        },
    )
    def post(self, request: Request, public_id: UUID) -> Response:
        session = diagnosis_or_404(request, public_id)
        diagnosis_cancel(session=session)
        session = diagnosis_or_404(request, public_id)
        return Response(self.OutputSerializer(diagnosis_detail(session=session)).data)


class DiagnosisCallbackAttemptListApi(ApiView):
    OutputSerializer = CallbackAttemptListSerializer

    @extend_schema(
        operation_id="diagnosis_callback_attempts",
        tags=[TAG_DIAGNOSES],
        summary="Every attempt to deliver the diagnosis's callback",
        parameters=[ID_PARAMETER],
        responses={200: CallbackAttemptListSerializer, **error_responses(401, 404, 429)},
    )
    def get(self, request: Request, public_id: UUID) -> Response:
        session = diagnosis_or_404(request, public_id)
        attempts = callback_attempts_for_session(session=session)
        return Response(self.OutputSerializer(attempts).data)
