"""Reviewer pages: record a review of a session, and the quality dashboard."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy
from django.views.decorators.http import require_GET, require_http_methods

from audit.models import Review
from audit.selectors import (
    ClaimRow,
    SessionAudit,
    dashboard_build,
    session_audit_view,
    user_can_review,
)
from audit.services import ClaimJudgement, review_record
from audit.templatetags.audit_tags import DECISION_LABELS, review_verdict_label
from chat.templatetags.chat_tags import classification_label
from diagnosis.charts import bar_chart, line_chart
from diagnosis.models import DiagnosisSession
from diagnosis.selectors import SessionClaim

AGREE, DISAGREE = "agree", "disagree"
# Where a recorded review returns to: the reading page, or (the default) the admin page.
RETURN_TO_READING = "read"


def _get_session_for_reviewer(*, user: User | AnonymousUser, public_id: UUID) -> DiagnosisSession:
    if not user_can_review(user=user):
        raise PermissionDenied
    return get_object_or_404(
        DiagnosisSession.objects.select_related("environment", "owner"), public_id=public_id
    )


class ReviewForm(forms.Form):
    verdict = forms.ChoiceField(
        label=pgettext_lazy("review verdict", "结论"),
        choices=Review.Verdict.choices,
        widget=forms.RadioSelect,
    )
    notes = forms.CharField(
        label=gettext_lazy("备注"), required=False, widget=forms.Textarea(attrs={"rows": 4})
    )

    def __init__(self, *args: Any, claims: list[SessionClaim], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims = claims
        for index, _claim in enumerate(claims):
            self.fields[f"claim_{index}_agrees"] = forms.ChoiceField(
                label=gettext_lazy("是否同意核验分类"),
                choices=[
                    ("", gettext_lazy("不评")),
                    (AGREE, gettext_lazy("同意")),
                    (DISAGREE, gettext_lazy("不同意")),
                ],
                required=False,
                widget=forms.RadioSelect,
            )
            self.fields[f"claim_{index}_note"] = forms.CharField(
                label=pgettext_lazy("claim review note", "说明"), required=False, max_length=2000
            )

    def claim_rows(self) -> list[tuple[SessionClaim, forms.BoundField, forms.BoundField]]:
        return [
            (claim, self[f"claim_{i}_agrees"], self[f"claim_{i}_note"])
            for i, claim in enumerate(self.claims)
        ]

    def judgements(self) -> list[ClaimJudgement]:
        result = []
        for index, claim in enumerate(self.claims):
            choice = self.cleaned_data.get(f"claim_{index}_agrees")
            if choice in (AGREE, DISAGREE):
                result.append(
                    ClaimJudgement(
                        claim_id=claim.claim_id,
                        agrees_with_verifier=choice == AGREE,
                        note=self.cleaned_data.get(f"claim_{index}_note", ""),
                    )
                )
        return result


@dataclass
class ClaimCard:
    """A claim as the reviewer reads it, with the two form fields that judge it (none on
    the admin change page, whose cards are compact and link to the reading page)."""

    row: ClaimRow
    agrees: forms.BoundField | None = None
    note: forms.BoundField | None = None


def claim_cards(
    audit: SessionAudit, *, form: ReviewForm | None = None
) -> dict[str, list[ClaimCard]]:
    """The claims as cards, confirmed ones apart from those demoted or not used."""
    if form is None:
        cards = [ClaimCard(row=row) for row in audit.claims]
    else:
        cards = [
            ClaimCard(row=row, agrees=agrees, note=note)
            for row, (_claim, agrees, note) in zip(audit.claims, form.claim_rows(), strict=True)
        ]
    return {
        "confirmed": [c for c in cards if c.row.view.allowed],
        "set_apart": [c for c in cards if not c.row.view.allowed],
    }


def classification_counts(audit: SessionAudit) -> list[tuple[str, int]]:
    """How many claims the Verifier classified each way, most frequent first."""
    counts = Counter(row.view.classification for row in audit.claims if row.view.classification)
    return counts.most_common()


def _review_context(request: HttpRequest, *, audit: SessionAudit, form: ReviewForm) -> dict:
    session = audit.session
    return {
        **admin.site.each_context(request),
        "session": session,
        "audit": audit,
        "form": form,
        **claim_cards(audit, form=form),
        "classified": classification_counts(audit),
        "session_url": reverse("admin:diagnosis_diagnosissession_change", args=[session.pk]),
        "read_url": reverse("audit:session_read", args=[session.public_id]),
        "review_url": reverse("audit:session_review", args=[session.public_id]),
    }


@require_GET
@login_required
def session_read(request: HttpRequest, public_id: UUID) -> HttpResponse:
    """The session as a reviewer reads it: the flow as a timeline, claims with their evidence."""
    session = _get_session_for_reviewer(user=request.user, public_id=public_id)
    audit = session_audit_view(session=session)
    form = ReviewForm(claims=[row.view for row in audit.claims])
    context = {
        **_review_context(request, audit=audit, form=form),
        "title": _("阅读会话"),
        "return_to": RETURN_TO_READING,
    }
    return render(request, "audit/session_read.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def session_review(request: HttpRequest, public_id: UUID) -> HttpResponse:
    session = _get_session_for_reviewer(user=request.user, public_id=public_id)
    audit = session_audit_view(session=session)
    form = ReviewForm(request.POST or None, claims=[row.view for row in audit.claims])
    if request.method == "POST" and form.is_valid():
        review_record(
            session=session,
            # the reviewer check admitted only a signed-in staff user
            reviewer=cast(User, request.user),
            verdict=form.cleaned_data["verdict"],
            notes=form.cleaned_data["notes"],
            claims=form.judgements(),
        )
        messages.success(request, _("审核已记录。"))
        if request.POST.get("return_to") == RETURN_TO_READING:
            return redirect(reverse("audit:session_read", args=[session.public_id]))
        return redirect(reverse("admin:diagnosis_diagnosissession_change", args=[session.pk]))
    context = {
        **_review_context(request, audit=audit, form=form),
        "title": _("记录审核"),
        "return_to": request.POST.get("return_to", ""),
    }
    return render(request, "audit/session_review.html", context)


@require_GET
@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    if not user_can_review(user=request.user):
        raise PermissionDenied
    try:
        days = min(max(int(request.GET.get("days", 14)), 1), 90)
    except ValueError:
        days = 14
    data = dashboard_build(days=days)
    labels = [d.strftime("%m-%d") for d in data.days]
    decision_names = {**DECISION_LABELS, "": _("未完成")}
    charts = {
        "sessions": bar_chart(
            title=_("每日会话数（按结论）"),
            labels=labels,
            series={str(decision_names.get(k, k)): v for k, v in data.sessions_by_decision.items()},
        ),
        "classifications": bar_chart(
            title=_("核验分类分布"),
            labels=[classification_label(k) for k in data.classifications],
            series={_("论断数"): list(data.classifications.values())},
        ),
        "fallback": line_chart(
            title=_("每日确定性渲染比例"),
            labels=labels,
            series={_("回退比例"): data.fallback_by_day},
            ymax=1,
        ),
        "tokens": bar_chart(
            title=_("每日模型 tokens"),
            labels=labels,
            series={_("词元数"): data.tokens_by_day},
        ),
        "verdicts": bar_chart(
            title=_("审核结论"),
            labels=[review_verdict_label(v) for v in data.review_verdicts],
            series={_("审核数"): list(data.review_verdicts.values())},
        ),
    }
    day_rows = [
        (
            labels[i],
            {k: v[i] for k, v in data.sessions_by_decision.items()},
            data.fallback_by_day[i],
            data.tokens_by_day[i],
        )
        for i in range(len(labels))
    ]
    context = {
        **admin.site.each_context(request),
        "title": _("质量看板"),
        "data": data,
        "charts": charts,
        "days": days,
        "day_rows": day_rows,
        "decision_columns": [(k, decision_names.get(k, k)) for k in data.sessions_by_decision],
    }
    return render(request, "audit/dashboard.html", context)
