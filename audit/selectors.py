"""Reads for reviewers: who may review, a session as it ran, and the quality dashboard."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.db.models import (
    Count,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from audit.models import ClaimReview, Review
from chat.selectors import FactSegment, claim_fact_segments
from diagnosis.contracts import Classification
from diagnosis.flow.gatekeeper import excerpt_locate
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.selectors import ClaimView, session_claims_view

CONTEXT_LINES = 2
CONTEXT_MAX_CHARS = 4000


# --- Access ----------------------------------------------------------------------


def user_can_review(*, user) -> bool:
    """Staff with the right to record reviews (the reviewers group), or a superuser."""
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    return user.is_superuser or user.has_perm("audit.add_review")


# --- The session list ----------------------------------------------------------------


def _json_int(path: str):
    return Coalesce(Cast(KT(path), IntegerField()), Value(0))


def sessions_for_audit() -> QuerySet[DiagnosisSession]:
    """Sessions with the numbers the audit list shows, computed in the database."""
    return DiagnosisSession.objects.select_related("owner", "environment").annotate(
        claims_accepted=_json_int("self_evaluation__gatekeeper__counts__accepted"),
        claims_demoted=_json_int("self_evaluation__gatekeeper__counts__demoted"),
        tokens_total=_json_int("llm_usage__total__tokens_in")
        + _json_int("llm_usage__total__tokens_out"),
        duration=ExpressionWrapper(
            F("finished_at") - F("started_at"), output_field=DurationField()
        ),
        is_reviewed=Exists(Review.objects.filter(session=OuterRef("pk"))),
    )


# --- Excerpts in context -------------------------------------------------------------


def excerpt_in_context(excerpt: str, text: str, *, lines: int = CONTEXT_LINES) -> SafeString:
    """A few lines around the match, the match in <mark>, everything else escaped."""
    spans = sorted(excerpt_locate(excerpt, text))
    if not spans:
        return format_html('<span class="rp-nomatch">{}</span>', "∅")
    first, last = spans[0][0], spans[-1][1]
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    line_of_first = max(i for i, s in enumerate(starts) if s <= first)
    line_of_last = max(i for i, s in enumerate(starts) if s <= max(first, last - 1))
    begin = starts[max(0, line_of_first - lines)]
    end_line = line_of_last + lines + 1
    end = starts[end_line] - 1 if end_line < len(starts) else len(text)
    if end - begin > CONTEXT_MAX_CHARS:
        begin = max(begin, first - CONTEXT_MAX_CHARS // 2)
        end = min(end, max(last, begin) + CONTEXT_MAX_CHARS // 2)
    pieces: list[tuple[str, str]] = []
    cursor = begin
    for start, stop in spans:
        start, stop = max(start, cursor), min(stop, end)
        if stop <= start:
            continue
        pieces.append(("{}", text[cursor:start]))
        pieces.append(("<mark>{}</mark>", text[start:stop]))
        cursor = stop
    pieces.append(("{}", text[cursor:end]))
    body = format_html_join("", "{}", ((format_html(tpl, part),) for tpl, part in pieces))
    return format_html('<pre class="rp-context">{}</pre>', body)


# --- A session as it ran --------------------------------------------------------------


@dataclass
class BindingRow:
    index: int
    source_type: str
    source_id: str
    tool_name: str
    excerpt: str
    valid: bool
    invocation_id: int | None
    context: SafeString | None


@dataclass
class ClaimRow:
    view: ClaimView
    bindings: list[BindingRow]
    # the claim's text cut at its facts, each linked to its binding (gatekeeper_v2)
    segments: list[FactSegment] = field(default_factory=list)


@dataclass
class AttemptRow:
    attempt: int
    data: dict[str, Any]
    invocations: list[ToolInvocation]
    llm_calls: list[LLMCall]


@dataclass
class SessionAudit:
    session: DiagnosisSession
    plan: dict[str, Any]
    attempts: list[AttemptRow]
    claims: list[ClaimRow]
    hypotheses: list[dict[str, Any]]
    missing_info: list[str]
    actions: list[dict[str, Any]]
    gatekeeper: dict[str, Any]
    verifier: dict[str, Any]
    composer_input: dict[str, Any] | None
    composer_output: dict[str, Any] | None
    invocations: list[ToolInvocation]
    llm_calls: list[LLMCall]
    reviews: list[Review]
    restarts: list[dict[str, Any]] = field(default_factory=list)


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def pretty_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)


def session_audit_view(*, session: DiagnosisSession) -> SessionAudit:
    """Everything a reviewer reads on one page, in a fixed number of queries."""
    invocations = list(session.invocations.order_by("sequence"))
    llm_calls = list(session.llm_calls.order_by("sequence"))
    by_id = {inv.id: inv for inv in invocations}
    evaluation = session.self_evaluation if isinstance(session.self_evaluation, dict) else {}
    structured = session.executor_structured_output
    structured = structured if isinstance(structured, dict) else {}
    claims = []
    for view in session_claims_view(session=session):
        rows = []
        for binding in view.bindings:
            invocation = by_id.get(binding.invocation_id) if binding.invocation_id else None
            rows.append(
                BindingRow(
                    index=binding.index,
                    source_type=binding.source_type,
                    source_id=binding.source_id,
                    tool_name=binding.tool_name,
                    excerpt=binding.excerpt,
                    valid=binding.valid,
                    invocation_id=binding.invocation_id,
                    context=excerpt_in_context(binding.excerpt, invocation.output)
                    if invocation is not None
                    else None,
                )
            )
        claims.append(
            ClaimRow(
                view=view,
                bindings=rows,
                segments=claim_fact_segments(text=view.text, facts=view.facts),
            )
        )
    attempts = []
    for index, data in enumerate(_dicts(evaluation.get("attempts")), start=1):
        number = int(data.get("attempt") or index)
        attempts.append(
            AttemptRow(
                attempt=number,
                data=data,
                invocations=[i for i in invocations if i.attempt == number],
                llm_calls=[c for c in llm_calls if c.attempt == number],
            )
        )
    verifier = evaluation.get("verifier_evaluation")
    verifier = verifier if isinstance(verifier, dict) else {}
    composer_output = verifier.get("composer_output")
    composer_input = evaluation.get("composer_input")
    gatekeeper = evaluation.get("gatekeeper")
    reviews = list(
        session.reviews.select_related("reviewer").prefetch_related("claim_reviews").all()
    )
    return SessionAudit(
        session=session,
        plan=session.plan if isinstance(session.plan, dict) else {},
        attempts=attempts,
        claims=claims,
        hypotheses=_dicts(structured.get("hypotheses")),
        missing_info=_strings(structured.get("missing_info")),
        actions=_dicts(structured.get("recommended_actions")),
        gatekeeper=gatekeeper if isinstance(gatekeeper, dict) else {},
        verifier=verifier,
        composer_input=composer_input if isinstance(composer_input, dict) else None,
        composer_output=composer_output if isinstance(composer_output, dict) else None,
        invocations=invocations,
        llm_calls=llm_calls,
        reviews=reviews,
        restarts=_dicts(evaluation.get("restarts")),
    )


# --- The dashboard -------------------------------------------------------------------

DECISIONS = [d.value for d in DiagnosisSession.Decision]
CLASSIFICATIONS = [c.value for c in Classification]
# Enough to be representative, bounded so the page stays fast on a busy install.
DASHBOARD_MAX_SESSIONS = 5000


@dataclass
class Dashboard:
    days: list[date]
    sessions_by_decision: dict[str, list[int]]
    sessions_total: int
    claims_total: int
    claims_demoted: int
    classifications: dict[str, int]
    classified_total: int
    completed: int
    fallbacks: int
    fallback_by_day: list[float]
    unreviewed_count: int
    unreviewed: list[DiagnosisSession]
    claim_reviews: int
    claim_agreements: int
    agreement_by_classification: dict[str, tuple[int, int]]
    review_verdicts: dict[str, int]
    tokens_by_day: list[int]

    @staticmethod
    def _share(part: int, whole: int) -> float | None:
        # Unrounded: the template decides how a share reads (3 of 816 is 0.4%, never 0%).
        return part / whole if whole else None

    @property
    def demoted_share(self) -> float | None:
        return self._share(self.claims_demoted, self.claims_total)

    @property
    def fallback_rate(self) -> float | None:
        return self._share(self.fallbacks, self.completed)

    @property
    def agreement_rate(self) -> float | None:
        return self._share(self.claim_agreements, self.claim_reviews)


def dashboard_build(*, days: int = 14, today: date | None = None) -> Dashboard:
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    day_list = [first + timedelta(days=n) for n in range(days)]
    index = {d: n for n, d in enumerate(day_list)}
    in_range = DiagnosisSession.objects.filter(created_at__date__gte=first)

    by_decision = {key: [0] * days for key in [*DECISIONS, ""]}
    fallback_counts = [0] * days
    completed_counts = [0] * days
    rows = (
        in_range.annotate(day=TruncDate("created_at"))
        .values("day", "decision", "answer_source", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        n = index.get(row["day"])
        if n is None:
            continue
        by_decision.setdefault(row["decision"] or "", [0] * days)[n] += row["n"]
        if row["status"] == DiagnosisSession.Status.COMPLETED:
            completed_counts[n] += row["n"]
            if row["answer_source"] == DiagnosisSession.AnswerSource.FALLBACK:
                fallback_counts[n] += row["n"]

    totals = in_range.aggregate(
        claims=Sum(_json_int("self_evaluation__gatekeeper__counts__claims")),
        demoted=Sum(_json_int("self_evaluation__gatekeeper__counts__demoted")),
    )
    classifications = dict.fromkeys(CLASSIFICATIONS, 0)
    checks = in_range.order_by("-created_at").values_list(
        "self_evaluation__verifier_evaluation__claim_checks", flat=True
    )[:DASHBOARD_MAX_SESSIONS]
    for session_checks in checks:
        for check in _dicts(session_checks):
            key = str(check.get("classification", ""))
            if key in classifications:
                classifications[key] += 1

    unreviewed_qs = in_range.filter(status=DiagnosisSession.Status.COMPLETED).exclude(
        Exists(Review.objects.filter(session=OuterRef("pk")))
    )
    claim_reviews = ClaimReview.objects.filter(review__session__created_at__date__gte=first)
    review_totals = claim_reviews.aggregate(
        total=Count("id"), agree=Count("id", filter=Q(agrees_with_verifier=True))
    )
    agreement = _agreement_by_classification(claim_reviews)
    verdicts = dict.fromkeys([v.value for v in Review.Verdict], 0)
    for verdict, n in (
        Review.objects.filter(session__created_at__date__gte=first)
        .values_list("verdict")
        .annotate(n=Count("id"))
        .order_by()
    ):
        verdicts[verdict] = n

    tokens = [0] * days
    for day, used in (
        LLMCall.objects.filter(created_at__date__gte=first)
        .annotate(day=TruncDate("created_at"))
        .values_list("day")
        .annotate(t=Sum(F("tokens_in") + F("tokens_out")))
        .order_by()
    ):
        n = index.get(day)
        if n is not None:
            tokens[n] += used or 0

    completed = sum(completed_counts)
    return Dashboard(
        days=day_list,
        sessions_by_decision={k: v for k, v in by_decision.items() if k or any(v)},
        sessions_total=sum(sum(v) for v in by_decision.values()),
        claims_total=totals["claims"] or 0,
        claims_demoted=totals["demoted"] or 0,
        classifications=classifications,
        classified_total=sum(classifications.values()),
        completed=completed,
        fallbacks=sum(fallback_counts),
        fallback_by_day=[
            round(f / c, 4) if c else 0.0
            for f, c in zip(fallback_counts, completed_counts, strict=True)
        ],
        unreviewed_count=unreviewed_qs.count(),
        unreviewed=list(
            unreviewed_qs.select_related("owner", "environment").order_by("-created_at")[:20]
        ),
        claim_reviews=review_totals["total"] or 0,
        claim_agreements=review_totals["agree"] or 0,
        agreement_by_classification=agreement,
        review_verdicts=verdicts,
        tokens_by_day=tokens,
    )


def _agreement_by_classification(
    claim_reviews: QuerySet[ClaimReview],
) -> dict[str, tuple[int, int]]:
    """(agreements, reviews) per Verifier classification of the reviewed claim."""
    rows = list(
        claim_reviews.values_list(
            "claim_id",
            "agrees_with_verifier",
            "review__session__self_evaluation__verifier_evaluation__claim_checks",
        )[:DASHBOARD_MAX_SESSIONS]
    )
    result: dict[str, tuple[int, int]] = {}
    for claim_id, agrees, checks in rows:
        classification = (
            next(
                (
                    str(c.get("classification", ""))
                    for c in _dicts(checks)
                    if str(c.get("claim_id")) == claim_id
                ),
                "",
            )
            or "unclassified"
        )
        agree, total = result.get(classification, (0, 0))
        result[classification] = (agree + int(bool(agrees)), total + 1)
    return result
