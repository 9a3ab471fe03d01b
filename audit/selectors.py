"""Reads for reviewers: who may review, a session as it ran, and the quality dashboard."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import date, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
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
from pydantic import BaseModel

from audit.models import ClaimReview, Review
from diagnosis.contracts import (
    AttemptRecord,
    ClaimCheck,
    Classification,
    ComposerInput,
    ComposerOutputSnapshot,
    GatekeeperReport,
    Hypothesis,
    RecommendedAction,
    RestartRecord,
    VerifierEvaluation,
)
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.selectors import (
    ClaimBinding,
    ExcerptLine,
    FactSegment,
    SessionClaim,
    excerpt_context,
    session_claims,
    session_self_evaluation,
    valid_items,
)

# The parts of self_evaluation (contracts.SelfEvaluation) the database counts itself, as
# JSON paths: the session list and the dashboard aggregate them without loading the rows.
GATEKEEPER_CLAIMS = "self_evaluation__gatekeeper__counts__claims"
GATEKEEPER_ACCEPTED = "self_evaluation__gatekeeper__counts__accepted"
GATEKEEPER_DEMOTED = "self_evaluation__gatekeeper__counts__demoted"
VERIFIER_CLAIM_CHECKS = "self_evaluation__verifier_evaluation__claim_checks"

CONTEXT_MAX_CHARS = 4000  # what a reviewer sees of very long output lines around a match


# --- Access ----------------------------------------------------------------------


def user_can_review(*, user: User | AnonymousUser) -> bool:
    """Staff with the right to record reviews (the reviewers group), or a superuser."""
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    return user.is_superuser or user.has_perm("audit.add_review")


# --- The session list ----------------------------------------------------------------


def _json_int(path: str) -> Coalesce:
    return Coalesce(Cast(KT(path), IntegerField()), Value(0))


def sessions_for_audit() -> QuerySet[DiagnosisSession]:
    """Sessions with the numbers the audit list shows, computed in the database."""
    return DiagnosisSession.objects.select_related("owner", "environment").annotate(
        claims_accepted=_json_int(GATEKEEPER_ACCEPTED),
        claims_demoted=_json_int(GATEKEEPER_DEMOTED),
        tokens_total=_json_int("llm_usage__total__tokens_in")
        + _json_int("llm_usage__total__tokens_out"),
        duration=ExpressionWrapper(
            F("finished_at") - F("started_at"), output_field=DurationField()
        ),
        is_reviewed=Exists(Review.objects.filter(session=OuterRef("pk"))),
    )


# --- Excerpts in context -------------------------------------------------------------


def context_html(lines: Sequence[ExcerptLine]) -> SafeString:
    """Lines around an excerpt (``diagnosis.selectors.excerpt_lines``) as escaped HTML,
    the match in <mark>; "∅" when the excerpt was not found."""
    if not lines:
        return format_html('<span class="rp-nomatch">{}</span>', "∅")
    body = format_html_join(
        "\n",
        "{}",
        (
            (
                format_html_join(
                    "",
                    "{}",
                    (
                        (format_html("<mark>{}</mark>", s.text) if s.marked else s.text,)
                        for s in line.segments
                    ),
                ),
            )
            for line in lines
        ),
    )
    return format_html('<pre class="rp-context">{}</pre>', body)


def excerpt_in_context(excerpt: str, text: str) -> SafeString:
    """A few lines around the excerpt's match in ``text``, the match in <mark>, all escaped."""
    return context_html(excerpt_context(excerpt=excerpt, output=text, max_chars=CONTEXT_MAX_CHARS))


# --- A session as it ran --------------------------------------------------------------


@dataclass(frozen=True)
class BindingRow(ClaimBinding):
    """A binding with its excerpt shown in the invocation's output, as HTML."""

    context: SafeString | None = None  # None: no invocation of the session has its trace_ref


@dataclass
class ClaimRow:
    view: SessionClaim
    bindings: list[BindingRow]

    @property
    def segments(self) -> tuple[FactSegment, ...]:
        """The claim's text cut at its facts, each linked to its binding (gatekeeper_v2)."""
        return self.view.segments


@dataclass
class AttemptRow:
    attempt: int
    data: AttemptRecord
    invocations: list[ToolInvocation]
    llm_calls: list[LLMCall]


@dataclass
class SessionAudit:
    session: DiagnosisSession
    plan: dict[str, Any]
    attempts: list[AttemptRow]
    claims: list[ClaimRow]
    hypotheses: tuple[Hypothesis, ...]
    missing_info: tuple[str, ...]
    actions: tuple[RecommendedAction, ...]
    gatekeeper: GatekeeperReport | None
    verifier: VerifierEvaluation | None
    composer_input: ComposerInput | None
    composer_output: ComposerOutputSnapshot | None
    invocations: list[ToolInvocation]
    llm_calls: list[LLMCall]
    reviews: list[Review]
    restarts: list[RestartRecord] = field(default_factory=list)


def pretty_json(value: object) -> str:
    """Indented JSON; a stored record shows the keys it was stored with."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_unset=True)
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)


def _binding_row(binding: ClaimBinding) -> BindingRow:
    context = None
    if binding.invocation is not None:
        context = context_html(binding.output_lines(max_chars=CONTEXT_MAX_CHARS))
    stored = {f.name: getattr(binding, f.name) for f in fields(ClaimBinding)}
    return BindingRow(**stored, context=context)


def _claim_row(claim: SessionClaim) -> ClaimRow:
    return ClaimRow(view=claim, bindings=[_binding_row(b) for b in claim.bindings])


def _attempt_rows(
    records: list[AttemptRecord], *, invocations: list[ToolInvocation], llm_calls: list[LLMCall]
) -> list[AttemptRow]:
    rows = []
    for index, record in enumerate(records, start=1):
        number = record.attempt or index
        rows.append(
            AttemptRow(
                attempt=number,
                data=record,
                invocations=[i for i in invocations if i.attempt == number],
                llm_calls=[c for c in llm_calls if c.attempt == number],
            )
        )
    return rows


def session_audit_view(*, session: DiagnosisSession) -> SessionAudit:
    """Everything a reviewer reads on one page, in a fixed number of queries."""
    claims = session_claims(session=session)
    invocations = list(claims.invocations)
    llm_calls = list(session.llm_calls.order_by("sequence"))
    evaluation = session_self_evaluation(session)
    verifier = evaluation.verifier_evaluation
    reviews = list(
        session.reviews.select_related("reviewer").prefetch_related("claim_reviews").all()
    )
    return SessionAudit(
        session=session,
        plan=session.plan if isinstance(session.plan, dict) else {},
        attempts=_attempt_rows(evaluation.attempts, invocations=invocations, llm_calls=llm_calls),
        claims=[_claim_row(claim) for claim in claims.claims],
        hypotheses=claims.hypotheses,
        missing_info=claims.missing_info,
        actions=claims.actions,
        gatekeeper=evaluation.gatekeeper,
        verifier=verifier,
        composer_input=evaluation.composer_input,
        composer_output=verifier.composer_output if verifier is not None else None,
        invocations=invocations,
        llm_calls=llm_calls,
        reviews=reviews,
        restarts=evaluation.restarts,
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


@dataclass
class _DailySessions:
    """Sessions per day of the dashboard's range: by decision, completed, fallen back."""

    by_decision: dict[str, list[int]]
    completed: list[int]
    fallbacks: list[int]


def _daily_sessions(
    in_range: QuerySet[DiagnosisSession], *, index: dict[date, int]
) -> _DailySessions:
    days = len(index)
    daily = _DailySessions(
        by_decision={key: [0] * days for key in [*DECISIONS, ""]},
        completed=[0] * days,
        fallbacks=[0] * days,
    )
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
        daily.by_decision.setdefault(row["decision"] or "", [0] * days)[n] += row["n"]
        if row["status"] == DiagnosisSession.Status.COMPLETED:
            daily.completed[n] += row["n"]
            if row["answer_source"] == DiagnosisSession.AnswerSource.FALLBACK:
                daily.fallbacks[n] += row["n"]
    return daily


def _classification_counts(in_range: QuerySet[DiagnosisSession]) -> dict[str, int]:
    """How often the Verifier gave each classification, over the latest sessions."""
    classifications = dict.fromkeys(CLASSIFICATIONS, 0)
    checks = in_range.order_by("-created_at").values_list(VERIFIER_CLAIM_CHECKS, flat=True)
    for session_checks in checks[:DASHBOARD_MAX_SESSIONS]:
        for check in valid_items(ClaimCheck, session_checks):
            classifications[check.classification] += 1
    return classifications


def _review_verdicts(*, first: date) -> dict[str, int]:
    verdicts = dict.fromkeys([v.value for v in Review.Verdict], 0)
    for verdict, n in (
        Review.objects.filter(session__created_at__date__gte=first)
        .values_list("verdict")
        .annotate(n=Count("id"))
        .order_by()
    ):
        verdicts[verdict] = n
    return verdicts


def _tokens_by_day(*, first: date, index: dict[date, int]) -> list[int]:
    tokens = [0] * len(index)
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
    return tokens


def dashboard_build(*, days: int = 14, today: date | None = None) -> Dashboard:
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    day_list = [first + timedelta(days=n) for n in range(days)]
    index = {d: n for n, d in enumerate(day_list)}
    in_range = DiagnosisSession.objects.filter(created_at__date__gte=first)
    daily = _daily_sessions(in_range, index=index)
    totals = in_range.aggregate(
        claims=Sum(_json_int(GATEKEEPER_CLAIMS)), demoted=Sum(_json_int(GATEKEEPER_DEMOTED))
    )
    classifications = _classification_counts(in_range)
    unreviewed_qs = in_range.filter(status=DiagnosisSession.Status.COMPLETED).exclude(
        Exists(Review.objects.filter(session=OuterRef("pk")))
    )
    claim_reviews = ClaimReview.objects.filter(review__session__created_at__date__gte=first)
    review_totals = claim_reviews.aggregate(
        total=Count("id"), agree=Count("id", filter=Q(agrees_with_verifier=True))
    )
    return Dashboard(
        days=day_list,
        sessions_by_decision={k: v for k, v in daily.by_decision.items() if k or any(v)},
        sessions_total=sum(sum(v) for v in daily.by_decision.values()),
        claims_total=totals["claims"] or 0,
        claims_demoted=totals["demoted"] or 0,
        classifications=classifications,
        classified_total=sum(classifications.values()),
        completed=sum(daily.completed),
        fallbacks=sum(daily.fallbacks),
        fallback_by_day=[
            round(f / c, 4) if c else 0.0
            for f, c in zip(daily.fallbacks, daily.completed, strict=True)
        ],
        unreviewed_count=unreviewed_qs.count(),
        unreviewed=list(
            unreviewed_qs.select_related("owner", "environment").order_by("-created_at")[:20]
        ),
        claim_reviews=review_totals["total"] or 0,
        claim_agreements=review_totals["agree"] or 0,
        agreement_by_classification=_agreement_by_classification(claim_reviews),
        review_verdicts=_review_verdicts(first=first),
        tokens_by_day=_tokens_by_day(first=first, index=index),
    )


def _agreement_by_classification(
    claim_reviews: QuerySet[ClaimReview],
) -> dict[str, tuple[int, int]]:
    """(agreements, reviews) per Verifier classification of the reviewed claim."""
    rows = list(
        claim_reviews.values_list(
            "claim_id",
            "agrees_with_verifier",
            f"review__session__{VERIFIER_CLAIM_CHECKS}",
        )[:DASHBOARD_MAX_SESSIONS]
    )
    result: dict[str, tuple[int, int]] = {}
    for claim_id, agrees, stored_checks in rows:
        checks = valid_items(ClaimCheck, stored_checks)
        classification = next(
            (str(c.classification) for c in checks if c.claim_id == claim_id), "unclassified"
        )
        agree, total = result.get(classification, (0, 0))
        result[classification] = (agree + int(bool(agrees)), total + 1)
    return result
