"""Writes of the audit app: reviews and exports, each with its audit event in one transaction."""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils.translation import gettext as _

from audit.export import CasePack, case_pack_build
from audit.models import AuditEvent, ClaimReview, Review
from diagnosis.models import DiagnosisSession
from diagnosis.selectors import session_claims

SYSTEM_ACTOR = "system"


def audit_event_record(
    *,
    actor: User | AnonymousUser | None,
    action: AuditEvent.Action | str,
    target: models.Model,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """The one way an audit event is written; only inside the transaction of the change."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_event_record must run inside the transaction it audits")
    user = actor if isinstance(actor, User) and actor.is_authenticated else None
    return AuditEvent.objects.create(
        actor=user,
        actor_label=user.get_username() if user else SYSTEM_ACTOR,
        action=action,
        target_type=target._meta.label_lower,
        target_id=str(target.pk),
        details=details or {},
    )


# --- Reviews -------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimJudgement:
    claim_id: str
    agrees_with_verifier: bool
    note: str = ""


@transaction.atomic
def review_record(
    *,
    session: DiagnosisSession,
    reviewer: User,
    verdict: str,
    notes: str = "",
    claims: Iterable[ClaimJudgement] = (),
) -> Review:
    """Record a reviewer's verdict on a session and per-claim agreement with the Verifier."""
    if verdict not in Review.Verdict.values:
        raise ValidationError({"verdict": _("未知的审核结论：%(verdict)s") % {"verdict": verdict}})
    known = {c.claim_id for c in session_claims(session=session).claims}
    judgements = list(claims)
    unknown = sorted({j.claim_id for j in judgements} - known)
    if unknown:
        raise ValidationError(
            {"claims": _("不是这个会话的论断：%(claims)s") % {"claims": ", ".join(unknown)}}
        )
    if len({j.claim_id for j in judgements}) != len(judgements):
        raise ValidationError({"claims": _("同一条论断被评判了两次")})
    review = Review.objects.create(
        session=session, reviewer=reviewer, verdict=verdict, notes=notes.strip()
    )
    ClaimReview.objects.bulk_create(
        ClaimReview(
            review=review,
            claim_id=j.claim_id,
            agrees_with_verifier=j.agrees_with_verifier,
            note=j.note.strip(),
        )
        for j in judgements
    )
    audit_event_record(
        actor=reviewer,
        action=AuditEvent.Action.REVIEW_RECORDED,
        target=session,
        details={
            "session": str(session.public_id),
            "review_id": review.pk,
            "verdict": verdict,
            "claims_reviewed": len(judgements),
            "disagreements": [j.claim_id for j in judgements if not j.agrees_with_verifier],
        },
    )
    return review


# --- Exports -------------------------------------------------------------------------


def _export_event(
    *,
    session: DiagnosisSession,
    actor: User | AnonymousUser | None,
    pack: CasePack,
    destination: str,
) -> None:
    audit_event_record(
        actor=actor,
        action=AuditEvent.Action.SESSION_EXPORTED,
        target=session,
        details={
            "session": str(session.public_id),
            "case_id": pack.case_id,
            "destination": destination,
            "files": sorted(pack.files),
        },
    )


def _write_pack(pack: CasePack, folder: Path) -> None:
    """Write into a temporary sibling, then move into place: never a half-written pack."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{pack.case_id}-", dir=folder.parent))
    try:
        for relative, text in pack.files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@transaction.atomic
def session_export(
    *, session: DiagnosisSession, actor: User | AnonymousUser | None, out_dir: Path
) -> Path:
    """Write the session as the scenario pack ``out_dir/<case id>/`` and audit it.

    The event is written first and the files last, so a failed write rolls the event back.
    """
    pack = case_pack_build(session=session)
    folder = Path(out_dir) / pack.case_id
    _export_event(session=session, actor=actor, pack=pack, destination=str(folder))
    _write_pack(pack, folder)
    return folder


@transaction.atomic
def sessions_export_archive(
    *, sessions: Iterable[DiagnosisSession], actor: User | AnonymousUser | None
) -> bytes:
    """A zip holding one scenario pack folder per session (the admin action's download)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for session in sessions:
            pack = case_pack_build(session=session)
            _export_event(session=session, actor=actor, pack=pack, destination="download")
            for relative, text in sorted(pack.files.items()):
                archive.writestr(f"{pack.case_id}/{relative}", text)
    return buffer.getvalue()
