"""REST API v1 for integrators: one APIView per operation, a service call in between.

Authentication: ``Authorization: Bearer <API key>`` or the browser session (with CSRF).
Every lookup is owner-checked: another owner's object is a 404, never a 403.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from django.conf import settings
from django.core.validators import URLValidator
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from chat.models import Conversation
from diagnosis.api_auth import (
    ApiKeyAuthentication,
    ApiKeyRateThrottle,
    IsReceiver,
    ReceiverTokenAuthentication,
)
from diagnosis.api_errors import Conflict, JSONParser, error_responses, request_size_check
from diagnosis.api_selectors import (
    api_key_get_for_user,
    api_keys_for_user,
    callback_attempts_for_session,
    diagnosis_detail_data,
    diagnosis_get_for_user,
    diagnosis_list_for_user,
    diagnosis_summary_data,
    tool_invocation_data,
    tool_invocation_get_for_user,
    tool_invocations_for_session,
)
from diagnosis.api_services import (
    alertmanager_notification_ingest,
    api_key_create,
    api_key_revoke,
    diagnosis_api_submit,
)
from diagnosis.models import ApiKey, DiagnosisSession, Environment
from diagnosis.services import (
    FAILURE_CODES,
    answer_language_pick,
    diagnosis_cancel,
    environment_default,
)

LANGUAGES = ("zh-CN", "en")
MAX_WINDOW = timedelta(days=7)
IDEMPOTENCY_KEY_MAX = 200
# "Has a visible character and no NUL", written so the schema's (ECMA) pattern and
# Python's strip() and DRF's NUL check agree.
NOT_BLANK = r"^[^\x00]*[^\s\x00\x1c-\x1f\x85][^\x00]*$"
NOT_BLANK_ERROR = {"invalid": _("这个字段需要可见的文字，且不能包含 NUL 字符。")}

TAG_DIAGNOSES = "diagnoses"
TAG_KEYS = "api-keys"
TAG_ALERTS = "integrations"


# Base for every v1 endpoint: key or session auth, per-key rate limit, body-size check.
class ApiView(APIView):
    authentication_classes = [ApiKeyAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes = [ApiKeyRateThrottle]
    parser_classes = [JSONParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        request_size_check(request)
        super().initial(request, *args, **kwargs)


class StrictInputSerializer(serializers.Serializer):
    """Request bodies say what they mean: an unknown field or a non-string text is a 400.

    DRF ignores unknown keys and turns ``123`` into ``"123"``; an integrator who
    misspells ``callback_url`` or sends the wrong type would never learn of it.
    """

    components: ClassVar[set[str]] = set()  # their schema names, for the schema hook below

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        meta = getattr(cls, "Meta", None)
        name = getattr(meta, "ref_name", None) or cls.__name__.removesuffix("Serializer")
        StrictInputSerializer.components.add(name)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if self.parent is None and not isinstance(data, dict):
            # DRF says "No data provided" (untranslated) for null, another text for a list.
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: [_("请求体必须是一个 JSON 对象。")]}
            )
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            errors: dict[str, list[Any]] = {}
            for key in data:
                if key not in self.fields:
                    errors[str(key)] = [_("未知字段。")]
            for name, field in self.fields.items():
                value = data.get(name)
                if not isinstance(field, serializers.CharField) or value is None:
                    continue
                if not isinstance(value, str):
                    errors[name] = [_("必须是字符串。")]
                elif "\x00" in value:  # one message, not DRF's two
                    errors[name] = [_("不能包含 NUL 字符。")]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class HttpUrlField(serializers.URLField):
    """An http(s) URL, with one message when it is not one (URLField alone adds a second)."""

    def __init__(self, **kwargs: Any) -> None:
        serializers.CharField.__init__(self, **kwargs)
        self.validators.append(
            URLValidator(schemes=["http", "https"], message=self.error_messages["invalid"])
        )


def strict_request_bodies(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular hook: the schema says what StrictInputSerializer enforces."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in StrictInputSerializer.components:
        for component in (name, f"{name}Request"):
            if isinstance(schemas.get(component), dict):
                schemas[component]["additionalProperties"] = False
    return result


class WindowSerializer(StrictInputSerializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


def _diagnosis_or_404(request: Request, public_id) -> DiagnosisSession:
    session = diagnosis_get_for_user(user=request.user, public_id=public_id)
    if session is None:
        raise exceptions.NotFound(_("没有这个诊断。"))
    return session


def _diagnosis_url(session: DiagnosisSession) -> str:
    return reverse("api:diagnosis_detail", kwargs={"public_id": session.public_id})


# --- output serializers (components of the schema) ---------------------------------------


class DiagnosisSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The diagnosis's public id.")
    status = serializers.ChoiceField(choices=DiagnosisSession.Status.choices)
    stage = serializers.ChoiceField(choices=DiagnosisSession.Stage.choices)
    source = serializers.ChoiceField(choices=DiagnosisSession.Source.choices)
    environment = serializers.CharField(help_text="Environment slug.")
    question = serializers.CharField()
    language = serializers.CharField()
    decision = serializers.ChoiceField(
        choices=DiagnosisSession.Decision.choices, allow_null=True, help_text="Null until done."
    )
    root_cause_status = serializers.ChoiceField(
        choices=DiagnosisSession.RootCause.choices,
        allow_null=True,
        help_text="Whether the answer confirms a root cause, only hypothesises one, or neither. "
        "Null until done.",
    )
    answer_source = serializers.ChoiceField(
        choices=DiagnosisSession.AnswerSource.choices, allow_null=True
    )
    attempt_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class DiagnosisContextSerializer(serializers.Serializer):
    services = serializers.ListField(child=serializers.CharField())
    window = serializers.DictField(
        allow_null=True, help_text="{start, end} in RFC 3339: the window the run used or was given."
    )


class ProgressEventSerializer(serializers.Serializer):
    sequence = serializers.IntegerField()
    kind = serializers.CharField(help_text="stage, tool_call, tool_result, info or error.")
    stage = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    data = serializers.DictField()
    at = serializers.DateTimeField()


class BindingSerializer(serializers.Serializer):
    source_type = serializers.CharField(allow_blank=True)
    source_id = serializers.CharField(allow_blank=True)
    tool_name = serializers.CharField(allow_blank=True)
    invocation_id = serializers.IntegerField(
        allow_null=True,
        help_text="The tool invocation this binding cites (GET /tool-invocations/{id}).",
    )
    excerpt = serializers.CharField(allow_blank=True)
    valid = serializers.BooleanField(help_text="The Gatekeeper accepted this binding.")


class GatekeeperVerdictSerializer(serializers.Serializer):
    verdict = serializers.CharField(allow_blank=True, help_text="accepted or demoted.")
    findings = serializers.ListField(child=serializers.DictField())


class VerifierCheckSerializer(serializers.Serializer):
    classification = serializers.CharField(
        allow_blank=True,
        help_text="direct_observation, reasonable_inference, overstated, unsupported, "
        "external_unknown or contradicted; empty when the Verifier gave none.",
    )
    reason = serializers.CharField(allow_blank=True)


class ClaimFactSerializer(serializers.Serializer):
    text = serializers.CharField()
    kind = serializers.CharField(help_text="number, time, date, identifier or service.")
    start = serializers.IntegerField(help_text="Span in the claim's text.")
    end = serializers.IntegerField()
    binding = serializers.IntegerField(
        allow_null=True, help_text="Index in `bindings` of the binding that binds it."
    )
    via = serializers.CharField(
        allow_null=True, help_text="excerpt or argument (the cited invocation's arguments)."
    )


class ClaimSerializer(serializers.Serializer):
    claim_id = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)
    type = serializers.CharField(allow_blank=True)
    entity = serializers.CharField(allow_blank=True)
    support_level = serializers.CharField(allow_blank=True)
    placement = serializers.CharField(
        allow_blank=True,
        help_text="Where the Composer filter put it: allowed_claim, hypothesis, missing_info, "
        "dropped.",
    )
    gatekeeper = GatekeeperVerdictSerializer()
    verifier = VerifierCheckSerializer()
    bindings = BindingSerializer(many=True)
    facts = ClaimFactSerializer(
        many=True,
        help_text="gatekeeper_v2: each number, time, date and identifier of the claim's text "
        "and the binding that binds it (binding null: unbound). Empty for older sessions.",
    )


class HypothesisSerializer(serializers.Serializer):
    text = serializers.CharField()
    basis = serializers.CharField(allow_blank=True)
    entity = serializers.CharField(allow_null=True, allow_blank=True)


class ActionSerializer(serializers.Serializer):
    text = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)


class ExecutorProposalsSerializer(serializers.Serializer):
    hypotheses = HypothesisSerializer(many=True)
    recommended_actions = ActionSerializer(many=True)
    missing_info = serializers.ListField(child=serializers.CharField())


class ComposerSerializer(serializers.Serializer):
    status = serializers.CharField(allow_null=True)
    source = serializers.CharField(allow_null=True)
    guard_findings = serializers.ListField(child=serializers.CharField())


class TimingsSerializer(serializers.Serializer):
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    queued_seconds = serializers.FloatField(allow_null=True)
    run_seconds = serializers.FloatField(allow_null=True)
    elapsed_seconds = serializers.FloatField(allow_null=True)


class CallbackStateSerializer(serializers.Serializer):
    url = serializers.URLField()
    state = serializers.CharField(help_text="pending, delivered or failed.")
    delivered_at = serializers.DateTimeField(allow_null=True)


class DiagnosisDetailSerializer(DiagnosisSummarySerializer):
    final_answer = serializers.CharField(allow_blank=True, help_text="Markdown; empty until done.")
    error = serializers.CharField(
        allow_blank=True,
        help_text="For a failed session, a message in the request's language; the exception "
        "itself is kept for reviewers only. Empty otherwise.",
    )
    error_code = serializers.ChoiceField(
        choices=[(c, c) for c in FAILURE_CODES],
        allow_null=True,
        help_text="For a failed session, a stable code: internal_error, worker_lost or timeout.",
    )
    cancel_requested = serializers.BooleanField()
    conversation_id = serializers.IntegerField(allow_null=True)
    context = DiagnosisContextSerializer()
    progress = ProgressEventSerializer(many=True)
    executor_output_parse_status = serializers.CharField(allow_null=True)
    gatekeeper_counts = serializers.DictField(allow_null=True)
    claims = ClaimSerializer(many=True)
    hypotheses = HypothesisSerializer(
        many=True, help_text="Allowed hypotheses, after the Composer input filter."
    )
    missing_info = serializers.ListField(child=serializers.CharField())
    recommended_actions = ActionSerializer(many=True)
    executor_proposals = ExecutorProposalsSerializer(
        help_text="What the Executor proposed, before filtering (unverified)."
    )
    composer = ComposerSerializer(allow_null=True)
    model_usage = serializers.DictField(help_text="{roles: {role: {calls, tokens_in, …}}, total}")
    timings = TimingsSerializer()
    callback = CallbackStateSerializer(allow_null=True)


class DiagnosisPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = DiagnosisSummarySerializer(many=True)


class ToolInvocationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    diagnosis_id = serializers.UUIDField()
    attempt = serializers.IntegerField()
    sequence = serializers.IntegerField()
    trace_ref = serializers.CharField()
    tool_name = serializers.CharField()
    arguments = serializers.DictField()
    status = serializers.CharField(help_text="ok, no_data, error or timeout.")
    output = serializers.CharField(allow_blank=True, help_text="Exactly what the model read.")
    output_size = serializers.IntegerField()
    truncated = serializers.BooleanField()
    summary = serializers.DictField()
    error = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()


class ToolInvocationListSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ToolInvocationSerializer(many=True)


class CallbackAttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    url = serializers.URLField()
    status_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    duration_ms = serializers.IntegerField()
    at = serializers.DateTimeField()


class CallbackAttemptListSerializer(serializers.Serializer):
    results = CallbackAttemptSerializer(many=True)


class ApiKeySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key starts with rp_<prefix>_.")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiKeyListSerializer(serializers.Serializer):
    results = ApiKeySerializer(many=True)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="The bearer key. Shown once; only its hash is stored.")
    signing_secret = serializers.CharField(
        help_text="HMAC-SHA256 secret that signs this key's callbacks "
        "(X-Rootproof-Signature: sha256=<hex of HMAC(secret, raw body)>). Shown once."
    )


class AlertIngestSerializer(serializers.Serializer):
    started = serializers.BooleanField()
    reason = serializers.ChoiceField(
        choices=["started", "duplicate", "resolved", "no_firing_alerts"]
    )
    diagnosis = DiagnosisSummarySerializer(allow_null=True)


def _api_key_data(api_key: ApiKey) -> dict[str, Any]:
    return {
        "id": api_key.pk,
        "name": api_key.name,
        "prefix": api_key.prefix,
        "created_at": api_key.created_at,
        "last_used_at": api_key.last_used_at,
        "revoked_at": api_key.revoked_at,
    }


ID_PARAMETER = OpenApiParameter(
    "public_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The diagnosis's id."
)


# --- diagnoses ---------------------------------------------------------------------------


class DiagnosisCreateApi(ApiView):
    class InputSerializer(StrictInputSerializer):
        class ContextInputSerializer(StrictInputSerializer):
            services = serializers.ListField(
                child=serializers.CharField(max_length=100), max_length=20, required=False
            )
            window = WindowSerializer(required=False)

            class Meta:
                ref_name = "DiagnosisContextInput"

            def validate_window(self, window: dict) -> dict:
                if window["start"] >= window["end"]:
                    raise serializers.ValidationError(_("start 必须早于 end。"))
                if window["end"] - window["start"] > MAX_WINDOW:
                    raise serializers.ValidationError(
                        _("时间窗口最长 %(days)s 天。") % {"days": MAX_WINDOW.days}
                    )
                return window

        question = serializers.RegexField(
            NOT_BLANK, max_length=settings.API_QUESTION_MAX_CHARS, error_messages=NOT_BLANK_ERROR
        )
        environment = serializers.SlugField(
            required=False,
            help_text="Environment slug; default: the conversation's, else the configured default.",
        )
        context = ContextInputSerializer(required=False)
        language = serializers.ChoiceField(
            choices=LANGUAGES,
            required=False,
            help_text="The answer's language. Default: the question's language (Chinese when "
            "it has CJK script, English when it is plain English words), else Accept-Language, "
            "else zh-CN.",
        )
        conversation = serializers.IntegerField(
            required=False, allow_null=True, help_text="A conversation id of yours."
        )
        callback_url = HttpUrlField(
            required=False,
            allow_blank=True,
            max_length=500,
            help_text="http(s) URL that receives the signed result when the diagnosis ends "
            "(API key authentication only).",
        )

        class Meta:
            ref_name = "DiagnosisCreate"

        def validate_environment(self, slug: str) -> Environment:
            environment = Environment.objects.filter(slug=slug, is_active=True).first()
            if environment is None:
                raise serializers.ValidationError(_("没有使用这个标识的已启用环境。"))
            return environment

        def validate_conversation(self, conversation_id: int | None) -> Conversation | None:
            if conversation_id is None:
                return None
            user = self.context["request"].user
            conversation = Conversation.objects.filter(pk=conversation_id, owner=user).first()
            if conversation is None:
                raise serializers.ValidationError(_("没有这个对话。"))
            return conversation

        def validate(self, attrs: dict) -> dict:
            conversation = attrs.get("conversation")
            environment = attrs.get("environment")
            if conversation and environment and conversation.environment_id != environment.pk:
                raise serializers.ValidationError({"environment": [_("这个对话属于另一个环境。")]})
            if environment is None:
                try:
                    attrs["environment"] = (
                        conversation.environment if conversation else environment_default()
                    )
                except Environment.DoesNotExist:
                    raise serializers.ValidationError(
                        {"environment": [_("尚未配置默认环境，请指定一个。")]}
                    ) from None
            return attrs

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
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                required=False,
                description=f"Up to {IDEMPOTENCY_KEY_MAX} characters, unique per owner.",
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
            **error_responses(400, 401, 403, 409, 413, 429),
        },
    )
    def post(self, request: Request) -> Response:
        idempotency_key = request.headers.get("Idempotency-Key", "").strip()
        if len(idempotency_key) > IDEMPOTENCY_KEY_MAX:
            raise exceptions.ValidationError(
                {"Idempotency-Key": [_("最多 %(max)s 个字符。") % {"max": IDEMPOTENCY_KEY_MAX}]}
            )
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
        session = _diagnosis_or_404(request, submitted.session.public_id)
        headers = {"Location": _diagnosis_url(session)}
        if submitted.replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(
            self.OutputSerializer(diagnosis_detail_data(session)).data,
            status=status.HTTP_202_ACCEPTED,
            headers=headers,
        )


class DiagnosisCursorPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"

    def __init__(self) -> None:
        # Read per request, not at import, so a changed setting takes effect.
        self.page_size = settings.API_PAGE_SIZE
        self.max_page_size = settings.API_PAGE_SIZE_MAX

    def decode_cursor(self, request: Request):
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


class DiagnosisListApi(ApiView):
    class FilterSerializer(PageFilterSerializer):
        status = serializers.ChoiceField(choices=DiagnosisSession.Status.choices, required=False)
        decision = serializers.ChoiceField(
            choices=DiagnosisSession.Decision.choices, required=False
        )
        source = serializers.ChoiceField(choices=DiagnosisSession.Source.choices, required=False)
        environment = serializers.SlugField(required=False, help_text="Environment slug.")
        created_after = serializers.DateTimeField(required=False, help_text="Inclusive.")
        created_before = serializers.DateTimeField(required=False, help_text="Exclusive.")

        class Meta:
            ref_name = "DiagnosisListFilter"

    OutputSerializer = DiagnosisSummarySerializer

    @extend_schema(
        operation_id="diagnosis_list",
        tags=[TAG_DIAGNOSES],
        summary="List your diagnoses",
        description="Newest first, cursor-paginated. Filters combine with AND.",
        parameters=[FilterSerializer],
        responses={200: DiagnosisPageSerializer, **error_responses(400, 401, 429)},
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        sessions: QuerySet[DiagnosisSession] = diagnosis_list_for_user(
            user=request.user, filters=filters.validated_data
        )
        paginator = DiagnosisCursorPagination()
        page = paginator.paginate_queryset(sessions, request, view=self) or []
        results = self.OutputSerializer([diagnosis_summary_data(s) for s in page], many=True).data
        return paginator.get_paginated_response(results)


class DiagnosisDetailApi(ApiView):
    OutputSerializer = DiagnosisDetailSerializer

    @extend_schema(
        operation_id="diagnosis_retrieve",
        tags=[TAG_DIAGNOSES],
        summary="Get a diagnosis with its claims and evidence",
        parameters=[ID_PARAMETER],
        responses={200: DiagnosisDetailSerializer, **error_responses(401, 404, 429)},
    )
    def get(self, request: Request, public_id) -> Response:
        session = _diagnosis_or_404(request, public_id)
        return Response(self.OutputSerializer(diagnosis_detail_data(session)).data)


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
    def post(self, request: Request, public_id) -> Response:
        session = _diagnosis_or_404(request, public_id)
        if session.status in (DiagnosisSession.Status.COMPLETED, DiagnosisSession.Status.FAILED):
            raise Conflict(
                _("诊断已经结束（%(status)s）。") % {"status": session.status},
                code="not_cancellable",
            )
        diagnosis_cancel(session=session)
        session = _diagnosis_or_404(request, public_id)
        return Response(self.OutputSerializer(diagnosis_detail_data(session)).data)


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
    def get(self, request: Request, public_id) -> Response:
        PageFilterSerializer(data=request.query_params).is_valid(raise_exception=True)
        session = _diagnosis_or_404(request, public_id)
        public = str(session.public_id)
        paginator = ToolInvocationCursorPagination()
        page = paginator.paginate_queryset(
            tool_invocations_for_session(session=session), request, view=self
        )
        results = [tool_invocation_data(i, session_public_id=public) for i in page or []]
        return paginator.get_paginated_response(ToolInvocationSerializer(results, many=True).data)


class DiagnosisCallbackAttemptListApi(ApiView):
    OutputSerializer = CallbackAttemptListSerializer

    @extend_schema(
        operation_id="diagnosis_callback_attempts",
        tags=[TAG_DIAGNOSES],
        summary="Every attempt to deliver the diagnosis's callback",
        parameters=[ID_PARAMETER],
        responses={200: CallbackAttemptListSerializer, **error_responses(401, 404, 429)},
    )
    def get(self, request: Request, public_id) -> Response:
        session = _diagnosis_or_404(request, public_id)
        attempts = callback_attempts_for_session(session=session).values(
            "attempt", "url", "status_code", "error", "duration_ms", "at"
        )
        return Response(self.OutputSerializer({"results": list(attempts)}).data)


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
        data = tool_invocation_data(invocation, session_public_id=str(invocation.session.public_id))
        return Response(self.OutputSerializer(data).data)


# --- API keys --------------------------------------------------------------------------------


class ApiKeyCreateApi(ApiView):
    class InputSerializer(StrictInputSerializer):
        name = serializers.RegexField(NOT_BLANK, max_length=100, error_messages=NOT_BLANK_ERROR)

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
        data = _api_key_data(created.api_key)
        data.update(key=created.key, signing_secret=created.signing_secret)
        return Response(self.OutputSerializer(data).data, status=status.HTTP_201_CREATED)


class ApiKeyListApi(ApiView):
    OutputSerializer = ApiKeyListSerializer

    @extend_schema(
        operation_id="api_key_list",
        tags=[TAG_KEYS],
        summary="List your API keys (never their secrets)",
        responses={200: ApiKeyListSerializer, **error_responses(401, 429)},
    )
    def get(self, request: Request) -> Response:
        keys = [_api_key_data(k) for k in api_keys_for_user(user=request.user)]
        return Response(self.OutputSerializer({"results": keys}).data)


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
        return Response(self.OutputSerializer(_api_key_data(api_key)).data)


# --- Alertmanager -------------------------------------------------------------------------------


class AlertmanagerWebhookApi(ApiView):
    authentication_classes = [ReceiverTokenAuthentication]
    permission_classes = [IsReceiver]

    class InputSerializer(serializers.Serializer):
        class AlertSerializer(serializers.Serializer):
            status = serializers.ChoiceField(choices=["firing", "resolved"])
            labels = serializers.DictField(child=serializers.CharField(allow_blank=True))
            annotations = serializers.DictField(
                child=serializers.CharField(allow_blank=True), required=False, default=dict
            )
            startsAt = serializers.DateTimeField()
            endsAt = serializers.DateTimeField(required=False, allow_null=True)
            generatorURL = serializers.CharField(required=False, allow_blank=True)
            fingerprint = serializers.CharField(required=False, allow_blank=True)

            class Meta:
                ref_name = "AlertmanagerAlert"

        version = serializers.CharField(help_text='Must be "4".')
        groupKey = serializers.CharField(max_length=5000)
        truncatedAlerts = serializers.IntegerField(required=False, default=0)
        status = serializers.ChoiceField(choices=["firing", "resolved"])
        receiver = serializers.CharField(required=False, allow_blank=True)
        groupLabels = serializers.DictField(
            child=serializers.CharField(allow_blank=True), required=False, default=dict
        )
        commonLabels = serializers.DictField(
            child=serializers.CharField(allow_blank=True), required=False, default=dict
        )
        commonAnnotations = serializers.DictField(
            child=serializers.CharField(allow_blank=True), required=False, default=dict
        )
        externalURL = serializers.CharField(required=False, allow_blank=True)
        alerts = AlertSerializer(many=True, allow_empty=True)

        class Meta:
            ref_name = "AlertmanagerWebhook"

        def validate_version(self, version: str) -> str:
            if version != "4":
                raise serializers.ValidationError(_("只支持第 4 版 webhook 负载。"))
            return version

    OutputSerializer = AlertIngestSerializer

    @extend_schema(
        operation_id="alertmanager_webhook",
        tags=[TAG_ALERTS],
        summary="Alertmanager webhook (payload version 4)",
        description="Starts one diagnosis per firing alert group, keyed by receiver, groupKey "
        "and the group's earliest startsAt: a repeat notification starts nothing new (200, "
        "`duplicate`), a resolved notification starts nothing (200, `resolved`). The question "
        "is built from the labels and annotations; the window starts before startsAt.",
        parameters=[
            OpenApiParameter(
                "receiver",
                {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
                OpenApiParameter.PATH,
                description="Receiver slug.",
            )
        ],
        request=InputSerializer,
        responses={
            202: OpenApiResponse(AlertIngestSerializer, description="A diagnosis was started."),
            200: OpenApiResponse(AlertIngestSerializer, description="Nothing new was started."),
            **error_responses(400, 401, 404, 413, 429),
        },
    )
    def post(self, request: Request, receiver: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = alertmanager_notification_ingest(
            receiver=request.auth, notification=serializer.validated_data
        )
        data = {
            "started": result.started,
            "reason": result.reason,
            "diagnosis": diagnosis_summary_data(result.session) if result.session else None,
        }
        return Response(
            self.OutputSerializer(data).data,
            status=status.HTTP_202_ACCEPTED if result.started else status.HTTP_200_OK,
        )
