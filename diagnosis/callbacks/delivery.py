"""One callback delivery attempt: POST the finished session's result, signed; record it."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from diagnosis.api.selectors import diagnosis_detail
from diagnosis.api.serializers import DiagnosisDetailSerializer
from diagnosis.callbacks.services import (
    SIGNATURE_HEADER,
    callback_address_refusal,
    callback_signature,
)
from diagnosis.credentials import api_key_signing_secret
from diagnosis.evidence.http import http_client
from diagnosis.evidence.timeutil import rfc3339
from diagnosis.models import ApiKey, ApiSubmission, CallbackAttempt, DiagnosisSession

logger = logging.getLogger(__name__)

EVENT = "diagnosis.finished"
DONE_STATES = (ApiSubmission.CallbackState.DELIVERED, ApiSubmission.CallbackState.FAILED)


@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None
    error: str
    give_up: bool  # nothing later attempts could change (no key left, a refused address)

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _deliverable(*, session_id: int, attempt: int) -> DiagnosisSession | None:
    """The session, if it is finished, has a callback still due and this attempt is new."""
    session = (
        DiagnosisSession.objects.select_related("environment", "api_submission__api_key")
        .filter(pk=session_id)
        .first()
    )
    submission: ApiSubmission | None = getattr(session, "api_submission", None) if session else None
    if (
        session is None
        or submission is None
        or not session.callback_url
        or not session.is_terminal
        or submission.callback_state in DONE_STATES
        or CallbackAttempt.objects.filter(session=session, attempt=attempt).exists()
    ):
        return None
    return session


def callback_body(*, session: DiagnosisSession, attempt: int) -> bytes:
    """The JSON an integrator receives: the same diagnosis JSON as GET /diagnoses/{id}."""
    payload = {
        "event": EVENT,
        "attempt": attempt,
        "sent_at": rfc3339(timezone.now()),
        "diagnosis": DiagnosisDetailSerializer(diagnosis_detail(session=session)).data,
    }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _post(*, session: DiagnosisSession, api_key: ApiKey, attempt: int) -> AttemptResult:
    body = callback_body(session=session, attempt=attempt)
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "Rootproof-Callback/1",
        "X-Rootproof-Event": EVENT,
        "X-Rootproof-Delivery": f"{session.public_id}:{attempt}",
        SIGNATURE_HEADER: callback_signature(
            secret=api_key_signing_secret(api_key=api_key), body=body
        ),
    }
    try:
        response = http_client().post(
            session.callback_url,
            content=body,
            headers=headers,
            timeout=settings.API_CALLBACK_TIMEOUT_SECONDS,
            follow_redirects=False,
        )
    except httpx.HTTPError as exc:
        return AttemptResult(None, f"{type(exc).__name__}: {exc}"[:500], give_up=False)
    code = response.status_code
    return AttemptResult(code, "" if 200 <= code < 300 else f"HTTP {code}", give_up=False)


def _attempt(*, session: DiagnosisSession, attempt: int) -> AttemptResult:
    api_key = session.api_submission.api_key
    if api_key is None or not api_key.is_active:
        # There is no secret left to sign with.
        error = "the API key that submitted this diagnosis was revoked; nothing was sent"
        return AttemptResult(None, error, give_up=True)
    if refusal := callback_address_refusal(session.callback_url):
        return AttemptResult(None, refusal, give_up=True)
    return _post(session=session, api_key=api_key, attempt=attempt)


@transaction.atomic
def _attempt_record(
    *, session: DiagnosisSession, attempt: int, result: AttemptResult, duration_ms: int
) -> str:
    CallbackAttempt.objects.create(
        session=session,
        attempt=attempt,
        url=session.callback_url,
        status_code=result.status_code,
        error=result.error[:500],
        duration_ms=duration_ms,
    )
    if result.delivered:
        outcome, state = "delivered", ApiSubmission.CallbackState.DELIVERED
    elif result.give_up or attempt >= settings.API_CALLBACK_MAX_ATTEMPTS:
        outcome, state = "failed", ApiSubmission.CallbackState.FAILED
    else:
        outcome, state = "retry", ApiSubmission.CallbackState.PENDING
    ApiSubmission.objects.filter(pk=session.api_submission.pk).update(
        callback_state=state, callback_delivered_at=timezone.now() if result.delivered else None
    )
    return outcome


def callback_deliver(*, session_id: int, attempt: int) -> str:
    """POST a finished session's result to its callback URL once; record the attempt.

    Returns ``delivered``, ``retry``, ``failed`` or ``skipped`` (no callback, not
    finished, already delivered, or this attempt already made).
    """
    session = _deliverable(session_id=session_id, attempt=attempt)
    if session is None:
        return "skipped"
    started = time.monotonic()
    result = _attempt(session=session, attempt=attempt)
    duration_ms = int((time.monotonic() - started) * 1000)
    outcome = _attempt_record(
        session=session, attempt=attempt, result=result, duration_ms=duration_ms
    )
    if not result.delivered:
        logger.info("callback for %s attempt %s: %s", session.public_id, attempt, result.error)
    return outcome
