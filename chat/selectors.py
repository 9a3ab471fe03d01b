"""Reads of the chat: conversations, turns, progress and the evidence view of an answer."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from chat.models import Conversation, Feedback
from diagnosis.charts import MetricChart, charts_for_lines
from diagnosis.evidence.tools import tool_definition
from diagnosis.models import DiagnosisSession, Environment, SessionEvent
from diagnosis.selectors import (
    ClaimBinding,
    ExcerptLine,
    FactSegment,
    SessionClaim,
    session_claims,
)

ARGUMENTS_SHORT_CHARS = 80


def conversation_list_for_user(*, user: User) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=user).select_related("environment")


def conversation_sessions_for_user(*, user: User) -> QuerySet[DiagnosisSession]:
    """Chat sessions the user may see: their own, asked in their own conversations."""
    return DiagnosisSession.objects.filter(
        owner=user, conversation__owner=user, conversation__isnull=False
    )


def environment_choices() -> QuerySet[Environment]:
    return Environment.objects.filter(is_active=True).order_by("slug")


def environment_preselected() -> int | None:
    """The environment a new conversation starts in: DIAGNOSIS_DEFAULT_ENVIRONMENT when active."""
    default = environment_choices().filter(slug=settings.DIAGNOSIS_DEFAULT_ENVIRONMENT).first()
    first = default or environment_choices().first()
    return first.pk if first else None


# --- progress -------------------------------------------------------------------


@dataclass
class ToolStep:
    tool: str
    arguments: str
    trace_ref: str = ""
    status: str = "running"


@dataclass
class Progress:
    stage: str
    stage_label: str
    steps: list[ToolStep]
    elapsed_seconds: int
    notes: list[str]


def _short_arguments(arguments: Any) -> str:
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={v}" for k, v in arguments.items() if v not in (None, "", [], {}))
    else:
        text = str(arguments or "")
    if len(text) > ARGUMENTS_SHORT_CHARS:
        text = text[: ARGUMENTS_SHORT_CHARS - 1] + "…"
    return text


def session_progress(
    *, session: DiagnosisSession, events: list[SessionEvent] | None = None
) -> Progress:
    """Stage, each tool call with its short arguments and status, and elapsed time."""
    if events is None:
        events = list(session.events.order_by("sequence"))
    steps: list[ToolStep] = []
    notes: list[str] = []
    for event in events:
        data = event.data or {}
        if event.kind == SessionEvent.Kind.TOOL_CALL:
            steps.append(
                ToolStep(tool=event.message, arguments=_short_arguments(data.get("arguments")))
            )
        elif event.kind == SessionEvent.Kind.TOOL_RESULT:
            pending = next((s for s in reversed(steps) if s.status == "running"), None)
            if pending is not None:
                pending.status = str(data.get("status") or "ok")
                pending.trace_ref = str(data.get("trace_ref") or "")
        elif event.kind == SessionEvent.Kind.INFO and event.message == "retry":
            notes.append("retry")
    started = session.started_at or session.created_at
    end = session.finished_at or timezone.now()
    return Progress(
        stage=session.stage,
        stage_label=str(session.get_stage_display()),
        steps=steps,
        elapsed_seconds=max(0, int((end - started).total_seconds())),
        notes=notes,
    )


# --- turns of a conversation ---------------------------------------------------------


# What the page never shows of older turns: read only for the answer whose evidence is open.
_HEAVY_FIELDS = (
    "executor_final_answer",
    "executor_structured_output",
    "self_evaluation",
    "plan",
    "llm_usage",
    "context",
)


@dataclass
class Turn:
    session: DiagnosisSession
    feedback: Feedback | None = None
    progress: Progress | None = None
    evidence: Evidence | None = None


def conversation_turns(*, conversation: Conversation, user: User) -> list[Turn]:
    """Every question and answer in order, in a fixed number of queries.

    Events are read only for sessions still running; evidence (which reads tool outputs)
    only for the latest answer; older answers load theirs on demand.
    """
    sessions = list(
        conversation.sessions.filter(owner=user)
        .order_by("created_at", "id")
        .defer(*_HEAVY_FIELDS)
        .prefetch_related(
            Prefetch("feedback", queryset=Feedback.objects.filter(user=user), to_attr="mine")
        )
    )
    running = [s.pk for s in sessions if not s.is_terminal]
    events_by_session: dict[int, list[SessionEvent]] = {pk: [] for pk in running}
    if running:
        for event in SessionEvent.objects.filter(session_id__in=running).order_by(
            "session_id", "sequence"
        ):
            events_by_session[event.session_id].append(event)
    turns = []
    for session in sessions:
        turn = Turn(session=session, feedback=session.mine[0] if session.mine else None)
        if not session.is_terminal:
            turn.progress = session_progress(session=session, events=events_by_session[session.pk])
        turns.append(turn)
    if turns and turns[-1].session.is_terminal:
        latest = DiagnosisSession.objects.get(pk=turns[-1].session.pk)
        turns[-1].evidence = session_evidence(session=latest)
    return turns


def session_turn(*, session: DiagnosisSession, user: User) -> Turn:
    turn = Turn(session=session)
    if session.is_terminal:
        turn.feedback = Feedback.objects.filter(session=session, user=user).first()
        turn.evidence = session_evidence(session=session)
    else:
        turn.progress = session_progress(session=session)
    return turn


# --- the evidence view -----------------------------------------------------------------


@dataclass(frozen=True)
class BindingEvidence(ClaimBinding):
    """A binding opened on its invocation: the tool's own name, arguments, status, the
    excerpt in its lines and the metric series it marks."""

    arguments: str = ""
    invocation_status: str = ""
    lines: tuple[ExcerptLine, ...] = ()
    charts: tuple[MetricChart, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.lines)


@dataclass
class ClaimEvidence:
    claim: SessionClaim
    bindings: list[BindingEvidence]

    @property
    def segments(self) -> tuple[FactSegment, ...]:
        return self.claim.segments


@dataclass
class Evidence:
    allowed: list[ClaimEvidence]
    not_accepted: list[ClaimEvidence]  # without bindings: their excerpts did not hold


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return "\n".join(f"{k}: {v}" for k, v in arguments.items())
    return str(arguments or "")


def _binding_evidence(binding: ClaimBinding, *, charted: set[str]) -> BindingEvidence:
    """A binding opened on its invocation's output; ``charted``: series this claim drew."""
    stored = {f.name: getattr(binding, f.name) for f in fields(ClaimBinding)}
    invocation = binding.invocation
    if invocation is None:
        return BindingEvidence(**stored)
    lines = binding.output_lines()
    charts: list[MetricChart] = []
    definition = tool_definition(invocation.tool_name)
    if definition is not None and definition.chart and isinstance(invocation.summary, dict):
        marked = [line.text for line in lines if line.marked]
        drawn = charts_for_lines(summary=invocation.summary, lines=marked)
        # Two bindings into the same series draw it once per claim.
        charts = [c for c in drawn if c.description not in charted]
        charted.update(c.description for c in drawn)
    return BindingEvidence(
        **{**stored, "tool_name": invocation.tool_name},
        arguments=_arguments_text(invocation.arguments),
        invocation_status=invocation.status,
        lines=lines,
        charts=tuple(charts),
    )


def _claim_evidence(claim: SessionClaim) -> ClaimEvidence:
    charted: set[str] = set()
    return ClaimEvidence(
        claim=claim, bindings=[_binding_evidence(b, charted=charted) for b in claim.bindings]
    )


def session_evidence(*, session: DiagnosisSession) -> Evidence:
    """Allowed claims with their bindings opened on the stored outputs, and the rest."""
    claims = session_claims(session=session)
    return Evidence(
        allowed=[_claim_evidence(c) for c in claims.allowed],
        not_accepted=[ClaimEvidence(claim=c, bindings=[]) for c in claims.not_allowed],
    )
