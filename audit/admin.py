"""The audit admin: the site's look, the diagnosis sessions as reviewers read them, reviews.

The admin is the audit back office: its title and index (which links to the reviewer
pages) are set here. A diagnosis session is evidence: its list and change page read it
as the audit pages do (its claims, reviews, the export of regression cases) and never
edit or delete it; they are registered here because they are built on the audit app's
reads and writes, which the core does not import. Reviews and audit events are
read-only (reviews are recorded on the review page). Every other model's admin is in
its own app's ``admin.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from audit.models import AuditEvent, ClaimReview, Review
from audit.selectors import session_audit_view, sessions_for_audit, user_can_review
from audit.services import sessions_export_archive
from audit.templatetags.audit_tags import code_label, intcomma_plain
from audit.views import claim_cards
from diagnosis.admin import ReadOnlyAdmin, ReadOnlyInline, pre_html, session_link_html
from diagnosis.models import DiagnosisSession
from diagnosis.wording import PARSE_STATUS_WORDS

admin.site.site_header = _("Rootproof 审计后台")
admin.site.site_title = _("Rootproof 审计")
admin.site.index_title = _("诊断审计")
# The index links to the reviewer pages (quality dashboard) above the model list.
admin.site.index_template = "audit/admin/index.html"
# Audit tables need the width; the breadcrumbs and the index lead to every model.
admin.site.enable_nav_sidebar = False


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
        return session_link_html(obj.session)


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
        return pre_html(obj.details)
