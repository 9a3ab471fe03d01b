"""Reads for the REST API: owner-checked lookups and JSON-ready views of sessions.

Every lookup takes the user and filters by owner, so another owner's row is simply
not found (a 404, never a 403).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from diagnosis.contracts import ComposerInput, SelfEvaluation
from diagnosis.models import (
    ApiKey,
    ApiSubmission,
    CallbackAttempt,
    DiagnosisSession,
    SessionEvent,
    ToolInvocation,
)
from diagnosis.selectors import (
    SessionClaim,
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


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start and end:
        return round((end - start).total_seconds(), 3)
    return None


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


def tool_invocations_for_session(*, session: DiagnosisSession) -> QuerySet[ToolInvocation]:
    return ToolInvocation.objects.filter(session=session).order_by("sequence")


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


# --- JSON-ready views ---------------------------------------------------------------


def diagnosis_summary_data(session: DiagnosisSession) -> dict[str, Any]:
    return {
        "id": str(session.public_id),
        "status": session.status,
        "stage": session.stage,
        "source": session.source,
        "environment": session.environment.slug,
        "question": session.original_query,
        "language": session.language,
        "decision": session.decision or None,
        "root_cause_status": session.root_cause_status or None,
        "answer_source": session.answer_source or None,
        "attempt_count": session.attempt_count,
        "created_at": _iso(session.created_at),
        "started_at": _iso(session.started_at),
        "finished_at": _iso(session.finished_at),
    }


def _executor_lists(session: DiagnosisSession) -> dict[str, list]:
    structured = session.executor_structured_output
    structured = structured if isinstance(structured, dict) else {}

    def as_list(key: str) -> list:
        value = structured.get(key)
        return value if isinstance(value, list) else []

    return {
        "hypotheses": [
            {
                "text": str(h.get("hypothesis_text", "")),
                "entity": str(h.get("entity") or ""),
                "basis": str(h.get("basis") or ""),
            }
            for h in as_list("hypotheses")
            if isinstance(h, dict)
        ],
        "recommended_actions": [
            {"text": str(a.get("action_text", "")), "reason": str(a.get("reason") or "")}
            for a in as_list("recommended_actions")
            if isinstance(a, dict)
        ],
        "missing_info": [str(m) for m in as_list("missing_info") if isinstance(m, str | int)],
    }


def _event_data(event: SessionEvent) -> dict[str, Any]:
    return {
        "sequence": event.sequence,
        "kind": event.kind,
        "stage": event.stage,
        "message": event.message,
        "data": event.data or {},
        "at": _iso(event.created_at),
    }


def _claim_data(claim: SessionClaim) -> dict[str, Any]:
    return {
        "claim_id": claim.claim_id,
        "text": claim.text,
        "type": claim.claim_type,
        "entity": claim.entity,
        "support_level": claim.support_level,
        "placement": claim.placement,
        "gatekeeper": {
            "verdict": claim.verdict,
            "findings": [f.model_dump(mode="json", exclude_unset=True) for f in claim.findings],
        },
        "verifier": {"classification": claim.classification, "reason": claim.reason},
        "bindings": [
            {
                "source_type": b.source_type,
                "source_id": b.source_id,
                "tool_name": b.tool_name,
                "invocation_id": b.invocation_id,
                "excerpt": b.excerpt,
                "valid": b.valid,
            }
            for b in claim.bindings
        ],
        "facts": [f.model_dump(mode="json") for f in claim.facts],
    }


def _filtered_data(filtered: ComposerInput | None) -> dict[str, Any]:
    """What the Composer input filter allowed (empty lists before it ran)."""
    if filtered is None:
        return {"hypotheses": [], "missing_info": [], "recommended_actions": []}
    return {
        "hypotheses": [h.model_dump(mode="json") for h in filtered.allowed_hypotheses],
        "missing_info": list(filtered.missing_info),
        "recommended_actions": [a.model_dump(mode="json") for a in filtered.recommended_actions],
    }


def _composer_data(evaluation: SelfEvaluation) -> dict[str, Any] | None:
    verifier = evaluation.verifier_evaluation
    output = verifier.composer_output if verifier is not None else None
    if output is None:
        return None
    return {
        "status": str(output.status),
        "source": str(output.source),
        "guard_findings": list(output.guard_findings),
    }


def _routing_data(evaluation: SelfEvaluation) -> dict[str, Any] | None:
    """What the Verifier decided and how the router changed it, with each note's code."""
    verifier = evaluation.verifier_evaluation
    if verifier is None:
        return None
    return {
        "verifier_decision": verifier.decision.value if verifier.decision else None,
        "decision": verifier.routed_decision.value if verifier.routed_decision else None,
        "notes": [
            {
                "text": text,
                "code": (code.code or None) if code else None,
                "params": dict(code.params) if code else {},
            }
            for text, code in verifier.route_notes_coded()
        ],
    }


def _gatekeeper_counts(evaluation: SelfEvaluation) -> dict[str, Any] | None:
    if evaluation.gatekeeper is None:
        return None
    return evaluation.gatekeeper.counts.model_dump(mode="json", exclude_unset=True) or None


def _timings_data(session: DiagnosisSession) -> dict[str, Any]:
    return {
        "created_at": _iso(session.created_at),
        "started_at": _iso(session.started_at),
        "finished_at": _iso(session.finished_at),
        "queued_seconds": _seconds(session.created_at, session.started_at),
        "run_seconds": _seconds(session.started_at, session.finished_at),
        "elapsed_seconds": _seconds(session.created_at, session.finished_at or timezone.now()),
    }


def _callback_data(session: DiagnosisSession) -> dict[str, Any] | None:
    submission: ApiSubmission | None = getattr(session, "api_submission", None)
    if submission is None or not session.callback_url:
        return None
    return {
        "url": session.callback_url,
        "state": submission.callback_state,
        "delivered_at": _iso(submission.callback_delivered_at),
    }


def diagnosis_detail_data(session: DiagnosisSession) -> dict[str, Any]:
    """Everything an integrator may read about one session (same JSON as the callback)."""
    evaluation = session_self_evaluation(session)
    context = session.context if isinstance(session.context, dict) else {}
    data = diagnosis_summary_data(session)
    data.update(
        {
            "final_answer": session.final_answer,
            "error": session_failure_message(session=session),
            "error_code": session_failure_code(session=session) or None,
            "cancel_requested": session.cancel_requested,
            "conversation_id": session.conversation_id,
            "context": {
                "services": [str(s) for s in context.get("services") or []],
                "window": context.get("window") or context.get("window_hint"),
            },
            "progress": [_event_data(e) for e in session.events.order_by("sequence")],
            "executor_output_parse_status": session.executor_output_parse_status or None,
            "gatekeeper_counts": _gatekeeper_counts(evaluation),
            "claims": [_claim_data(c) for c in session_claims(session=session).claims],
            **_filtered_data(evaluation.composer_input),
            "executor_proposals": _executor_lists(session),
            "routing": _routing_data(evaluation),
            "composer": _composer_data(evaluation),
            "model_usage": session.llm_usage or {},
            "timings": _timings_data(session),
            "callback": _callback_data(session),
        }
    )
    return data


def tool_invocation_data(invocation: ToolInvocation, *, session_public_id: str) -> dict[str, Any]:
    return {
        "id": invocation.pk,
        "diagnosis_id": session_public_id,
        "attempt": invocation.attempt,
        "sequence": invocation.sequence,
        "trace_ref": invocation.trace_ref,
        "tool_name": invocation.tool_name,
        "arguments": invocation.arguments or {},
        "status": invocation.status,
        "output": invocation.output,
        "output_size": invocation.output_size,
        "truncated": invocation.truncated,
        "summary": invocation.summary or {},
        "error": invocation.error,
        "started_at": _iso(invocation.started_at),
        "duration_ms": invocation.duration_ms,
    }


def callback_attempts_for_session(*, session: DiagnosisSession) -> QuerySet[CallbackAttempt]:
    return CallbackAttempt.objects.filter(session=session).order_by("attempt")


def api_key_data(api_key: ApiKey) -> dict[str, Any]:
    return {
        "id": api_key.pk,
        "name": api_key.name,
        "prefix": api_key.prefix,
        "created_at": api_key.created_at,
        "last_used_at": api_key.last_used_at,
        "revoked_at": api_key.revoked_at,
    }
