"""The admin of the diagnosis core's models.

Diagnosis data (tool invocations, model calls, progress events, API deliveries) is
evidence: nobody edits or deletes it here, not even a superuser. Runbooks,
environments, API keys and Alertmanager receivers are managed here. The session list
and change page are the audit app's (``audit/admin.py``): they read the session as a
reviewer does, with its reviews and the export of regression cases, which the core
does not know of. The read-only bases here serve every app's admin.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from diagnosis.alerts.services import alert_receiver_token_rotate
from diagnosis.api.services import api_key_create, api_key_revoke
from diagnosis.evidence.services import knowledge_document_save
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

# The admin styles on every page of these models (a file: the CSP forbids inline styles).
ADMIN_MEDIA = forms.Media(css={"all": ["audit.css"]})


def pre_html(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    return format_html('<pre class="rp-pre">{}</pre>', text)


def session_link_html(session: DiagnosisSession) -> str:
    url = reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    return format_html('<a href="{}">{}</a>', url, str(session.public_id)[:8])


def pre_reply_html(text: str) -> str:
    """Text a model wrote, indented when it is JSON so it reads line by line."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return pre_html(text or "")
    return pre_html(json.dumps(value, ensure_ascii=False, indent=2))


def _folded(summary: str, value: object) -> str:
    return format_html("<details><summary>{}</summary>{}</details>", summary, pre_html(value))


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
        return super().media + ADMIN_MEDIA


class ReadOnlyInline(_ReadOnly, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True


# --- Evidence: read-only -----------------------------------------------------------------


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
        return session_link_html(obj.session)

    @admin.display(description=_("参数"))
    def arguments_display(self, obj: ToolInvocation) -> str:
        return pre_html(obj.arguments)

    @admin.display(description=_("输出 (模型所见)"))
    def output_display(self, obj: ToolInvocation) -> str:
        return pre_html(obj.output)

    @admin.display(description=_("摘要"))
    def summary_display(self, obj: ToolInvocation) -> str:
        return pre_html(obj.summary)


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
        return session_link_html(obj.session)

    @admin.display(description=_("请求"))
    def request_display(self, obj: LLMCall) -> str:
        return _folded(str(_("展开请求")), obj.request)

    @admin.display(description=_("原始回答"))
    def raw_response_display(self, obj: LLMCall) -> str:
        return pre_reply_html(obj.raw_response)


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
        return pre_html(obj.data)


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
    list_display = [
        "name",
        "slug",
        "kind",
        "is_active",
        "pack_path",
        "prometheus_url",
        "loki_url",
        "traces_url",
    ]
    list_filter = ["kind", "is_active"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}


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
