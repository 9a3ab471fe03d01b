"""Reads for the REST API: owner-checked lookups, and the read model of a session's detail.

Every lookup takes the user and filters by owner, so another owner's row is simply
not found (a 404, never a 403).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models import QuerySet

from diagnosis.contracts import SelfEvaluation
from diagnosis.models import (
    ApiKey,
    CallbackAttempt,
    DiagnosisSession,
    SessionEvent,
    ToolInvocation,
)
from diagnosis.selectors import (
    SessionClaims,
    session_claims,
    session_failure_code,
    session_failure_message,
    session_self_evaluation,
)

# Columns a list row needs; the big JSON columns stay in the database.
LIST_FIELDS = (
    "id",
    "public_id",
    "owner_id",
    "source",
    "environment__slug",
    "original_query",
    "language",
    "status",
    "stage",
    "decision",
    "root_cause_status",
    "answer_source",
    "attempt_count",
    "created_at",
    "started_at",
    "finished_at",
)


# --- lookups ---------------------------------------------------------------------


def diagnosis_list_for_user(*, user: User, filters: dict[str, Any]) -> QuerySet[DiagnosisSession]:
    sessions = DiagnosisSession.objects.filter(owner=user)
    for field in ("status", "decision", "source"):
        if filters.get(field):
            sessions = sessions.filter(**{field: filters[field]})
    if filters.get("environment"):
        sessions = sessions.filter(environment__slug=filters["environment"])
    if filters.get("created_after"):
        sessions = sessions.filter(created_at__gte=filters["created_after"])
    if filters.get("created_before"):
        sessions = sessions.filter(created_at__lt=filters["created_before"])
    return sessions.select_related("environment").only(*LIST_FIELDS)


def diagnosis_get_for_user(*, user: User, public_id: UUID | str) -> DiagnosisSession | None:
    return (
        DiagnosisSession.objects.filter(owner=user, public_id=public_id)
        .select_related("environment", "api_submission")
        .first()
    )


@dataclass(frozen=True)
class OwnConversation:
    """A conversation of the caller's that a diagnosis may join: its row and environment."""

    row: models.Model
    environment_id: int


def _conversation_model() -> type[models.Model]:
    """The model the session's ``conversation`` foreign key names (the chat app's).

    The chat app is built on the core, which imports none of it; the relation the core's
    own session row declares is how the core reaches the rows it links to.
    """
    model = DiagnosisSession._meta.get_field("conversation").related_model
    if not isinstance(model, type) or not issubclass(model, models.Model):
        raise ImproperlyConfigured("DiagnosisSession.conversation names no installed model")
    return model


def conversation_get_for_user(*, user: User, conversation_id: int) -> OwnConversation | None:
    row = _conversation_model()._default_manager.filter(pk=conversation_id, owner=user).first()
    if row is None:
        return None
    return OwnConversation(row=row, environment_id=row.serializable_value("environment"))


def tool_invocations_for_session(*, session: DiagnosisSession) -> QuerySet[ToolInvocation]:
    # Through the related manager, so each row's ``session`` is this one (no query per row).
    return session.invocations.order_by("sequence")


def tool_invocation_get_for_user(*, user: User, invocation_id: int) -> ToolInvocation | None:
    return (
        ToolInvocation.objects.filter(pk=invocation_id, session__owner=user)
        .select_related("session")
        .first()
    )


def api_keys_for_user(*, user: User) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(owner=user)


def api_key_get_for_user(*, user: User, key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(owner=user, pk=key_id).first()


# --- What the detail JSON reads ------------------------------------------------------


@dataclass(frozen=True)
class DiagnosisDetail:
    """One session as its detail JSON (and its callback) reads it: the row and its read models.

    ``serializers.DiagnosisDetailSerializer`` maps it; building it costs two queries (the
    progress events and, through ``session_claims``, the tool invocations).
    """

    session: DiagnosisSession
    events: tuple[SessionEvent, ...]
    claims: SessionClaims
    evaluation: SelfEvaluation
    failure_message: str  # "" unless failed
    failure_code: str  # "" unless failed


def diagnosis_detail(*, session: DiagnosisSession) -> DiagnosisDetail:
    return DiagnosisDetail(
        session=session,
        events=tuple(session.events.order_by("sequence")),
        claims=session_claims(session=session),
        evaluation=session_self_evaluation(session),
        failure_message=session_failure_message(session=session),
        failure_code=session_failure_code(session=session),
    )


def callback_attempts_for_session(*, session: DiagnosisSession) -> QuerySet[CallbackAttempt]:
    return CallbackAttempt.objects.filter(session=session).order_by("attempt")
