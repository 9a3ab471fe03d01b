"""Every admin registration of the project.

Diagnosis data (sessions, tool invocations, model calls, progress events) is
evidence: nobody edits or deletes it here, not even a superuser. Reviewers read
it and record reviews on their own page. Runbooks and environments are managed
here; conversations, reviews and audit events are read-only.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db import transaction
from django.db.models import Count, Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from audit.models import AuditEvent, ClaimReview, Review
from audit.selectors import session_audit_view, sessions_for_audit, user_can_review
from audit.services import knowledge_document_save, sessions_export_archive
from audit.templatetags.audit_tags import (
    code_label,
    intcomma_plain,
    pretty_text,
)
from audit.views import claim_cards
from chat.models import Conversation
from diagnosis.alerts.services import alert_receiver_token_rotate
from diagnosis.api.services import api_key_create, api_key_revoke
from diagnosis.models import (
    AlertGroupStart,
    AlertmanagerReceiver,
    ApiKey,
    ApiSubmission,
    CallbackAttempt,
    DiagnosisSession,
    Environment,
    KnowledgeChunk,
    KnowledgeDocument,
    LLMCall,
    SessionEvent,
    ToolInvocation,
)
from diagnosis.wording import PARSE_STATUS_WORDS

admin.site.site_header = _("Rootproof 审计后台")
admin.site.site_title = _("Rootproof 审计")
admin.site.index_title = _("诊断审计")
# The index links to the reviewer pages (quality dashboard) above the model list.
admin.site.index_template = "audit/admin/index.html"
# Audit tables need the width; the breadcrumbs and the index lead to every model.
admin.site.enable_nav_sidebar = False

# The audit styles on every page of these models (a file: the CSP forbids inline styles).
AUDIT_MEDIA = forms.Media(css={"all": ["audit.css"]})


def _pre(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    return format_html('<pre class="rp-pre">{}</pre>', text)


def _session_link(session: DiagnosisSession) -> str:
    url = reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    return format_html('<a href="{}">{}</a>', url, str(session.public_id)[:8])


def _folded(summary: str, value: object) -> str:
    return format_html("<details><summary>{}</summary>{}</details>", summary, _pre(value))


class _ReadOnly:
    """Viewable by whoever has the view permission; never added, changed or deleted."""

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        # Every listed field, display methods included, is shown and never a form input.
        return [str(name) for name in getattr(self, "fields", None) or ()]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ReadOnlyAdmin(_ReadOnly, admin.ModelAdmin):
    @property
    def media(self) -> forms.Media:
        return super().media + AUDIT_MEDIA


class ReadOnlyInline(_ReadOnly, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True


# --- Diagnosis sessions ------------------------------------------------------------------


class _YesNoFilter(admin.SimpleListFilter):
    """A yes/no filter: ``yes`` and ``no`` are the lookups each answer applies."""

    yes: ClassVar[dict[str, object]] = {}
    no: ClassVar[dict[str, object]] = {}

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> Any:
        return (("yes", _("是")), ("no", _("否")))

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(**self.yes)
        if self.value() == "no":
            return queryset.filter(**self.no)
        return queryset


class ReviewedFilter(_YesNoFilter):
    title = _("已审核")
    parameter_name = "reviewed"
    yes, no = {"is_reviewed": True}, {"is_reviewed": False}


class DemotedFilter(_YesNoFilter):
    title = _("有被降级的论断")
    parameter_name = "demoted"
    yes, no = {"claims_demoted__gt": 0}, {"claims_demoted": 0}


class AcceptedFilter(_YesNoFilter):
    title = _("有通过校验的论断")
    parameter_name = "accepted"
    yes, no = {"claims_accepted__gt": 0}, {"claims_accepted": 0}


class RetriedFilter(_YesNoFilter):
    title = _("有重试")
    parameter_name = "retried"
    yes, no = {"attempt_count__gt": 1}, {"attempt_count__lte": 1}


class _BucketFilter(admin.SimpleListFilter):
    field: str
    buckets: tuple[tuple[str, object, object, object], ...]  # key, label, low, high

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> Any:
        return [(key, label) for key, label, _low, _high in self.buckets]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        for key, _label, low, high in self.buckets:
            if self.value() == key:
                if low is not None:
                    queryset = queryset.filter(**{f"{self.field}__gte": low})
                if high is not None:
                    queryset = queryset.filter(**{f"{self.field}__lt": high})
        return queryset


class DurationFilter(_BucketFilter):
    title = _("耗时")
    parameter_name = "duration"
    field = "duration"
    buckets = (
        ("lt10", _("< 10 秒"), None, timedelta(seconds=10)),
        ("10to60", _("10–60 秒"), timedelta(seconds=10), timedelta(seconds=60)),
        ("gt60", _("> 60 秒"), timedelta(seconds=60), None),
    )


class ParseStatusFilter(admin.SimpleListFilter):
    """The Executor output's parse status, by its label (the parameter is the field's)."""

    title = _("解析状态")
    parameter_name = "executor_output_parse_status__exact"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> Any:
        return list(PARSE_STATUS_WORDS.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(executor_output_parse_status=self.value())
        return queryset


class TokensFilter(_BucketFilter):
    title = _("模型词元数")
    parameter_name = "tokens"
    field = "tokens_total"
    buckets = (
        ("lt5k", _("< 5k"), None, 5_000),
        ("5kto50k", _("5k–50k"), 5_000, 50_000),
        ("gt50k", _("> 50k"), 50_000, None),
    )


class AuditChangeList(ChangeList):
    def get_queryset(
        self, request: HttpRequest, exclude_parameters: list[str | None] | None = None
    ) -> QuerySet:
        # The list never shows the big JSON and text columns: do not load them.
        return (
            super()
            .get_queryset(request, exclude_parameters)
            .defer(
                "plan",
                "context",
                "executor_final_answer",
                "executor_structured_output",
                "self_evaluation",
                "final_answer",
                "llm_usage",
                "error",
            )
        )


@admin.register(DiagnosisSession)
class DiagnosisSessionAdmin(ReadOnlyAdmin):
    change_form_template = "audit/admin/session_change_form.html"
    change_list_template = "audit/admin/session_change_list.html"
    # Eleven narrow columns fit a 1440 px screen; related values share a column.
    list_display = [
        "created_col",
        "question",
        "asked_by",
        "environment",
        "outcome",
        "parse_status_col",
        "claims_col",
        "retries",
        "duration_col",
        "tokens_col",
        "reviewed_col",
    ]
    # The date opens this change page; the question opens the reading page.
    list_display_links = ["created_col"]
    list_filter = [
        ("created_at", admin.DateFieldListFilter),
        ("owner", admin.RelatedOnlyFieldListFilter),
        "source",
        "environment",
        "status",
        "decision",
        "answer_source",
        ParseStatusFilter,
        AcceptedFilter,
        DemotedFilter,
        RetriedFilter,
        DurationFilter,
        TokensFilter,
        ReviewedFilter,
    ]
    search_fields = ["original_query", "final_answer", "public_id"]
    date_hierarchy = "created_at"
    list_per_page = 50
    actions = ["export_cases"]
    fields = ["public_id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[DiagnosisSession]:
        return sessions_for_audit()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return AuditChangeList

    def has_export_permission(self, request: HttpRequest) -> bool:
        return user_can_review(user=request.user)

    # -- columns
    @admin.display(description=_("时间"), ordering="created_at")
    def created_col(self, obj: DiagnosisSession) -> str:
        local = timezone.localtime(obj.created_at)
        return format_html(
            '<span title="{}">{}</span>',
            local.isoformat(timespec="seconds"),
            local.strftime("%m-%d %H:%M"),
        )

    @admin.display(description=_("提问人"), ordering="owner__username")
    def asked_by(self, obj: DiagnosisSession) -> str:
        who = obj.owner.get_username() if obj.owner else obj.requested_by or "—"
        return format_html("{}<br><small>{}</small>", who, obj.get_source_display())

    @admin.display(description=_("问题"))
    def question(self, obj: DiagnosisSession) -> str:
        return format_html(
            '<a href="{}" title="{}">{}</a>',
            reverse("audit:session_read", args=[obj.public_id]),
            _("阅读页"),
            Truncator(obj.original_query).chars(60),
        )

    @admin.display(description=_("结论"), ordering="decision")
    def outcome(self, obj: DiagnosisSession) -> str:
        if obj.status == DiagnosisSession.Status.COMPLETED and obj.decision:
            label = obj.get_decision_display()
        else:
            label = obj.get_status_display()
        return format_html("{}<br><small>{}</small>", label, obj.get_answer_source_display() or "—")

    @admin.display(description=_("解析状态"), ordering="executor_output_parse_status")
    def parse_status_col(self, obj: DiagnosisSession) -> str:
        return code_label(obj.executor_output_parse_status, "parse_status")

    @admin.display(description=_("论断"), ordering="claims_demoted")
    def claims_col(self, obj: Any) -> str:  # a row of sessions_for_audit (annotated)
        return format_html(
            '<span title="{}">{} ✓</span> · <span class="{}" title="{}">{} ✗</span>',
            _("通过"),
            obj.claims_accepted,
            "rp-bad" if obj.claims_demoted else "",
            _("降级"),
            obj.claims_demoted,
        )

    @admin.display(description=pgettext_lazy("retry count", "重试"), ordering="attempt_count")
    def retries(self, obj: DiagnosisSession) -> int:
        return max(0, obj.attempt_count - 1)

    @admin.display(description=_("耗时"), ordering="duration")
    def duration_col(self, obj: Any) -> str:
        return f"{obj.duration.total_seconds():.1f} s" if obj.duration is not None else "—"

    @admin.display(description=_("词元数"), ordering="tokens_total")
    def tokens_col(self, obj: Any) -> str:
        return intcomma_plain(obj.tokens_total)

    @admin.display(description=_("已审核"), boolean=True, ordering="is_reviewed")
    def reviewed_col(self, obj: Any) -> bool:
        return obj.is_reviewed

    # -- the change page reads like the session ran
    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: DiagnosisSession | None = None,
    ) -> HttpResponse:
        if obj is not None:
            audit = session_audit_view(session=obj)
            # Compact claim cards (no excerpts in context, no review inputs): the reading
            # page has each claim with its evidence and the review form beside it.
            context.update(claim_cards(audit), audit=audit, session=obj)
            context["can_review"] = user_can_review(user=request.user)
            context["review_url"] = reverse("audit:session_review", args=[obj.public_id])
            context["read_url"] = reverse("audit:session_read", args=[obj.public_id])
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.action(description=_("导出为回归用例 (zip)"), permissions=["export"])
    def export_cases(
        self, request: HttpRequest, queryset: QuerySet[DiagnosisSession]
    ) -> HttpResponse | None:
        sessions = list(
            DiagnosisSession.objects.filter(
                pk__in=queryset.values("pk"), status__in=DiagnosisSession.TERMINAL_STATUSES
            ).select_related("environment")
        )
        if not sessions:
            messages.warning(request, _("只能导出已结束的会话。"))
            return None
        archive = sessions_export_archive(sessions=sessions, actor=request.user)
        response = HttpResponse(archive, content_type="application/zip")
        response["Content-Disposition"] = 'attachment; filename="rootproof-cases.zip"'
        return response


@admin.register(ToolInvocation)
class ToolInvocationAdmin(ReadOnlyAdmin):
    list_display = [
        "trace_ref",
        "session_link",
        "attempt",
        "tool_name",
        "status",
        "truncated",
        "duration_ms",
        "started_at",
    ]
    list_filter = ["tool_name", "status", "truncated"]
    list_select_related = ["session"]
    search_fields = ["=trace_ref", "tool_name", "session__public_id"]
    fields = [
        "session_link",
        "attempt",
        "sequence",
        "trace_ref",
        "tool_name",
        "arguments_display",
        "status",
        "error",
        "output_display",
        "output_size",
        "truncated",
        "summary_display",
        "started_at",
        "duration_ms",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolInvocation]:
        return super().get_queryset(request).select_related("session")

    @admin.display(description=_("诊断会话"))
    def session_link(self, obj: ToolInvocation) -> str:
        return _session_link(obj.session)

    @admin.display(description=_("参数"))
    def arguments_display(self, obj: ToolInvocation) -> str:
        return _pre(obj.arguments)

    @admin.display(description=_("输出 (模型所见)"))
    def output_display(self, obj: ToolInvocation) -> str:
        return _pre(obj.output)

    @admin.display(description=_("摘要"))
    def summary_display(self, obj: ToolInvocation) -> str:
        return _pre(obj.summary)


@admin.register(LLMCall)
class LLMCallAdmin(ReadOnlyAdmin):
    list_display = [
        "sequence",
        "session_link",
        "attempt",
        "role",
        "provider",
        "model",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "status",
        "created_at",
    ]
    list_filter = ["role", "provider", "status", "model"]
    list_select_related = ["session"]
    search_fields = ["session__public_id", "model"]
    fields = [
        "session_link",
        "attempt",
        "sequence",
        "role",
        "provider",
        "model",
        "status",
        "error",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "request_chars",
        "request_display",
        "raw_response_display",
        "created_at",
    ]

    @admin.display(description=_("诊断会话"))
    def session_link(self, obj: LLMCall) -> str:
        return _session_link(obj.session)

    @admin.display(description=_("请求"))
    def request_display(self, obj: LLMCall) -> str:
        return _folded(str(_("展开请求")), obj.request)

    @admin.display(description=_("原始回答"))
    def raw_response_display(self, obj: LLMCall) -> str:
        return _pre(pretty_text(obj.raw_response))


@admin.register(SessionEvent)
class SessionEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "session", "sequence", "kind", "stage", "message"]
    list_filter = ["kind", "stage"]
    list_select_related = ["session"]
    fields = [
        "session",
        "sequence",
        "kind",
        "stage",
        "message",
        "data_display",
        "created_at",
    ]

    @admin.display(description=_("数据"))
    def data_display(self, obj: SessionEvent) -> str:
        return _pre(obj.data)


# --- Runbooks and environments: managed here --------------------------------------------


class KnowledgeChunkInline(ReadOnlyInline):
    model = KnowledgeChunk
    fields = ["ordinal", "chunk_id", "heading", "text_preview"]
    show_change_link = False

    @admin.display(description=_("内容"))
    def text_preview(self, obj: KnowledgeChunk) -> str:
        return Truncator(obj.text).chars(200)


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "slug", "environment", "chunk_count", "updated_at"]
    list_filter = ["environment"]
    search_fields = ["title", "slug", "body"]
    list_select_related = ["environment"]
    fields = ["title", "slug", "environment", "body", "source_path", "updated_at"]
    readonly_fields = ["source_path", "updated_at"]
    inlines = [KnowledgeChunkInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[KnowledgeDocument]:
        return super().get_queryset(request).annotate(n_chunks=Count("chunks"))

    @admin.display(description=_("块数"), ordering="n_chunks")
    def chunk_count(self, obj: Any) -> int:  # annotated with n_chunks
        return obj.n_chunks

    def save_model(
        self, request: HttpRequest, obj: KnowledgeDocument, form: ModelForm, change: bool
    ) -> None:
        # Saving re-chunks the body; a section id taken by another document stops the save.
        try:
            with transaction.atomic():
                knowledge_document_save(document=obj)
        except ValueError as exc:
            transaction.set_rollback(True)
            messages.error(request, str(exc))


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "kind", "is_active", "pack_path", "prometheus_url", "loki_url"]
    list_filter = ["kind", "is_active"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}


# --- Chat: read-only --------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["title", "owner", "environment", "created_at", "updated_at"]
    list_filter = ["environment"]
    list_select_related = ["owner", "environment"]
    search_fields = ["title", "owner__username"]


# --- Audit: read-only (reviews are recorded on the review page) ------------------------


class ClaimReviewInline(ReadOnlyInline):
    model = ClaimReview
    fields = ["claim_id", "agrees_with_verifier", "note"]
    show_change_link = False


@admin.register(Review)
class ReviewAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "session_link", "reviewer", "verdict"]
    list_filter = ["verdict", ("reviewer", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["session", "reviewer"]
    fields = ["session_link", "reviewer", "verdict", "notes", "created_at"]
    inlines = [ClaimReviewInline]

    @admin.display(description=_("诊断会话"))
    def session_link(self, obj: Review) -> str:
        return _session_link(obj.session)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor_label", "action", "target_type", "target_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_label", "=target_id"]
    date_hierarchy = "created_at"
    fields = [
        "created_at",
        "actor_label",
        "action",
        "target_type",
        "target_id",
        "details_display",
    ]

    @admin.display(description=_("详情"))
    def details_display(self, obj: AuditEvent) -> str:
        return _pre(obj.details)


# --- REST API: keys and Alertmanager receivers managed here; deliveries read-only --------


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are created by the API service: the secret is shown once, only its hash is kept."""

    list_display = ["name", "owner", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["owner"]
    search_fields = ["name", "prefix", "owner__username"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[Any]:
        if obj is None:
            return ["owner", "name"]
        return ["owner", "name", "key_prefix", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return ["owner", "key_prefix", "created_at", "last_used_at", "revoked_at"]

    @admin.display(description=_("前缀"), ordering="prefix")
    def key_prefix(self, obj: ApiKey) -> str:
        return f"rp_{obj.prefix}_…"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: ModelForm, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        created = api_key_create(owner=form.cleaned_data["owner"], name=form.cleaned_data["name"])
        obj.pk = created.api_key.pk
        obj.prefix = created.api_key.prefix
        obj.created_at = created.api_key.created_at
        messages.warning(
            request,
            format_html(
                "{} <code>{}</code> · {} <code>{}</code>",
                _("API 密钥（只显示这一次）："),
                created.key,
                _("回调签名密钥："),
                created.signing_secret,
            ),
        )

    @admin.action(description=_("吊销所选密钥"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            api_key_revoke(api_key=api_key)
        messages.success(request, _("已吊销。"))


@admin.register(AlertmanagerReceiver)
class AlertmanagerReceiverAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "environment", "owner", "is_active", "last_used_at"]
    list_filter = ["is_active", "environment"]
    list_select_related = ["environment", "owner"]
    search_fields = ["name", "slug"]
    fields = [
        "name",
        "slug",
        "environment",
        "owner",
        "language",
        "window_before_minutes",
        "is_active",
        "created_at",
        "last_used_at",
    ]
    readonly_fields = ["created_at", "last_used_at"]
    actions = ["rotate_token"]

    def save_model(
        self, request: HttpRequest, obj: AlertmanagerReceiver, form: ModelForm, change: bool
    ) -> None:
        obj.save()
        if not change:
            self._show_token(request, obj)

    @staticmethod
    def _show_token(request: HttpRequest, receiver: AlertmanagerReceiver) -> None:
        token = alert_receiver_token_rotate(receiver=receiver)
        messages.warning(
            request,
            format_html(
                str(_("{name} 的令牌（只显示这一次）：<code>{token}</code>")),
                name=receiver.name,
                token=token,
            ),
        )

    @admin.action(description=_("轮换令牌"), permissions=["change"])
    def rotate_token(self, request: HttpRequest, queryset: QuerySet[AlertmanagerReceiver]) -> None:
        for receiver in queryset:
            self._show_token(request, receiver)


@admin.register(ApiSubmission)
class ApiSubmissionAdmin(ReadOnlyAdmin):
    list_display = ["session", "api_key", "callback_state", "callback_delivered_at", "created_at"]
    list_filter = ["callback_state"]
    list_select_related = ["session", "api_key"]


@admin.register(CallbackAttempt)
class CallbackAttemptAdmin(ReadOnlyAdmin):
    list_display = ["session", "attempt", "url", "status_code", "error", "duration_ms", "at"]
    list_filter = ["status_code"]
    list_select_related = ["session"]


@admin.register(AlertGroupStart)
class AlertGroupStartAdmin(ReadOnlyAdmin):
    list_display = ["receiver", "starts_at", "session", "notifications", "last_seen_at"]
    list_filter = ["receiver"]
    list_select_related = ["receiver", "session"]
