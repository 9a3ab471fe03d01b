"""Writes for the REST API: API keys and submissions.

Services raise Django's errors (``ValidationError``) or the domain's ``ConflictError``;
the API's exception handler turns them into the one error shape.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from diagnosis.audit_trail import audit_trail_record
from diagnosis.contracts import ConflictError
from diagnosis.credentials import api_key_generate, api_key_signing_secret, secret_hash
from diagnosis.models import ApiKey, ApiSubmission, DiagnosisSession, Environment
from diagnosis.services import diagnosis_submit

# --- API keys ------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatedApiKey:
    api_key: ApiKey
    key: str  # shown once
    signing_secret: str  # shown once


@transaction.atomic
def api_key_create(*, owner: User, name: str) -> CreatedApiKey:
    prefix, key = api_key_generate()
    api_key = ApiKey.objects.create(
        owner=owner, name=name.strip(), prefix=prefix, secret_hash=secret_hash(key)
    )
    audit_trail_record(
        actor=owner, action="api_key_created", target=api_key, details={"name": api_key.name}
    )
    return CreatedApiKey(
        api_key=api_key, key=key, signing_secret=api_key_signing_secret(api_key=api_key)
    )


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor: User | None = None) -> ApiKey:
    """Revoke once; revoking again keeps the first revocation time."""
    revoked = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if revoked:
        audit_trail_record(
            actor=actor or api_key.owner,
            action="api_key_revoked",
            target=api_key,
            details={"name": api_key.name},
        )
    api_key.refresh_from_db()
    return api_key


# --- diagnoses ------------------------------------------------------------------------


def _request_hash(fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _replay_or_conflict(
    *, owner: User, idempotency_key: str, request_hash: str
) -> DiagnosisSession:
    existing = (
        DiagnosisSession.objects.filter(owner=owner, idempotency_key=idempotency_key)
        .select_related("api_submission")
        .first()
    )
    if existing is None:  # only reachable if the row vanished between insert and read
        raise ConflictError(
            _("这个 Idempotency-Key 正在使用中，请重试。"), code="idempotency_conflict"
        )
    submission = getattr(existing, "api_submission", None)
    if submission is None or submission.request_hash != request_hash:
        raise ConflictError(
            _("这个 Idempotency-Key 已用于另一个请求体；新的请求请使用新的键。"),
            code="idempotency_conflict",
        )
    return existing


@dataclass(frozen=True)
class Submitted:
    session: DiagnosisSession
    replayed: bool


def diagnosis_api_submit(
    *,
    owner: User,
    api_key: ApiKey | None,
    question: str,
    environment: Environment,
    language: str = "zh-CN",
    services: list[str] | None = None,
    window: dict[str, str] | None = None,
    conversation: models.Model | None = None,
    callback_url: str = "",
    idempotency_key: str = "",
) -> Submitted:
    """Queue a diagnosis from the API; a repeated Idempotency-Key returns the first session.

    The same key with a different body is a 409 ``idempotency_conflict``.
    """
    if callback_url and api_key is None:
        raise ValidationError(
            {"callback_url": [_("回调需要 API 密钥认证（回调用这个密钥签名）。")]}
        )
    request_hash = _request_hash(
        {
            "question": question,
            "environment": environment.slug,
            "language": language,
            "services": services or [],
            "window": window,
            "conversation": conversation.pk if conversation else None,
            "callback_url": callback_url,
        }
    )
    if (
        idempotency_key
        and DiagnosisSession.objects.filter(owner=owner, idempotency_key=idempotency_key).exists()
    ):
        session = _replay_or_conflict(
            owner=owner, idempotency_key=idempotency_key, request_hash=request_hash
        )
        return Submitted(session=session, replayed=True)

    context: dict[str, Any] = {}
    if services:
        context["services"] = services
    if window:
        context["window_hint"] = window
    try:
        with transaction.atomic():
            session = diagnosis_submit(
                question=question,
                environment=environment,
                owner=owner,
                requested_by=f"api-key:{api_key.prefix}" if api_key else f"user:{owner.pk}",
                source=DiagnosisSession.Source.API,
                language=language,
                context=context,
                conversation=conversation,
                idempotency_key=idempotency_key,
                callback_url=callback_url,
            )
            ApiSubmission.objects.create(
                session=session,
                api_key=api_key,
                request_hash=request_hash,
                callback_state=ApiSubmission.CallbackState.PENDING
                if callback_url
                else ApiSubmission.CallbackState.NONE,
            )
    except IntegrityError:
        if not idempotency_key:
            raise
        # A concurrent request with the same key won the insert.
        session = _replay_or_conflict(
            owner=owner, idempotency_key=idempotency_key, request_hash=request_hash
        )
        return Submitted(session=session, replayed=True)
    return Submitted(session=session, replayed=False)
