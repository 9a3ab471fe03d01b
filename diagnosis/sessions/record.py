"""The session's audit record (``self_evaluation``): its one writer and its one reader;
and what the session's model calls cost."""

from __future__ import annotations

import copy
from typing import Any

from django.db.models import Count, Sum
from pydantic import ValidationError

from diagnosis.contracts import SelfEvaluation
from diagnosis.models import DiagnosisSession, LLMCall
from diagnosis.storable import nul_free


def session_self_evaluation_save(
    *, session: DiagnosisSession, evaluation: SelfEvaluation, save: bool = True
) -> None:
    """The one writer of ``DiagnosisSession.self_evaluation`` (reader:
    ``session_self_evaluation`` below)."""
    # The parts the run recorded, each whole (defaults included); parts never recorded stay
    # absent, so an old row's readers see what was there and nothing invented.
    recorded = evaluation.model_fields_set | set(evaluation.model_extra or {})
    dumped = evaluation.model_dump(mode="json")
    session.self_evaluation = nul_free({k: v for k, v in dumped.items() if k in recorded})
    if save:
        session.save(update_fields=["self_evaluation"])


_REPAIRS_MAX = 200  # each repair drops one stored part; a row is never that broken


def _drop(stored: dict[str, Any], loc: tuple[int | str, ...]) -> bool:
    """Remove the part at ``loc`` (as far as it exists); False when nothing is left to drop."""
    parent: Any = None
    node: Any = stored
    key: int | str | None = None
    for step in loc:
        if isinstance(node, dict) and step in node:
            parent, node, key = node, node[step], step
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            parent, node, key = node, node[step], step
        else:
            break  # a step naming a union member or a validator, not stored data
    if parent is None or key is None:
        return False
    del parent[key]
    return True


def _error_part(error: Any) -> tuple[int | str, ...]:
    """What to drop for one validation error: the bad value, or the object missing a field."""
    loc = tuple(error["loc"])
    return loc[:-1] if error["type"] == "missing" else loc


def session_self_evaluation(session: DiagnosisSession) -> SelfEvaluation:
    """The session's audit record, typed; a malformed stored part reads as absent.

    A part that does not read (an old or hand-edited row) hides only itself: a bad value
    is dropped, and then the smallest record or list item that needs it, so one broken
    fact leaves the rest of the Gatekeeper report readable. The one reader of
    ``DiagnosisSession.self_evaluation`` (its writer is
    ``session_self_evaluation_save`` above).
    """
    stored = session.self_evaluation if isinstance(session.self_evaluation, dict) else {}
    stored = copy.deepcopy(stored)
    for _ in range(_REPAIRS_MAX):
        try:
            return SelfEvaluation.model_validate(stored)
        except ValidationError as exc:
            part = _error_part(exc.errors()[0])
        if not _drop(stored, part):
            break
    return SelfEvaluation()


def llm_usage_totals(*, session: DiagnosisSession) -> dict[str, Any]:
    rows = (
        LLMCall.objects.filter(session=session)
        .values("role")
        .annotate(
            calls=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            latency_ms=Sum("latency_ms"),
        )
        .order_by("role")
    )
    per_role = {
        row["role"]: {
            "calls": row["calls"],
            "tokens_in": row["tokens_in"] or 0,
            "tokens_out": row["tokens_out"] or 0,
            "latency_ms": row["latency_ms"] or 0,
        }
        for row in rows
    }
    totals = {
        key: sum(role[key] for role in per_role.values())
        for key in ("calls", "tokens_in", "tokens_out", "latency_ms")
    }
    return {"roles": per_role, "total": totals}
