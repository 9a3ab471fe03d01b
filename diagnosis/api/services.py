"""Writes for the REST API: keys, submissions, Alertmanager notifications, callbacks."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import re
import socket
import time
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import exceptions

from diagnosis.api.auth import (
    api_key_generate,
    api_key_signing_secret,
    receiver_token_generate,
    secret_hash,
)
from diagnosis.api.errors import Conflict
from diagnosis.api.selectors import diagnosis_detail_data
from diagnosis.models import (
    AlertGroupStart,
    AlertmanagerReceiver,
    ApiKey,
    ApiSubmission,
    CallbackAttempt,
    DiagnosisSession,
    Environment,
)
from diagnosis.services import diagnosis_submit, rfc3339

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Rootproof-Signature"


# --- API keys and receiver tokens ---------------------------------------------------


@dataclass(frozen=True)
class CreatedApiKey:
    api_key: ApiKey
    key: str  # shown once
    signing_secret: str  # shown once


def _audit(*, actor, action: str, target, details: dict[str, Any]) -> None:
    from audit.services import audit_event_record

    audit_event_record(actor=actor, action=action, target=target, details=details)


@transaction.atomic
def api_key_create(*, owner, name: str) -> CreatedApiKey:
    prefix, key = api_key_generate()
    api_key = ApiKey.objects.create(
        owner=owner, name=name.strip(), prefix=prefix, secret_hash=secret_hash(key)
    )
    _audit(actor=owner, action="api_key_created", target=api_key, details={"name": api_key.name})
    return CreatedApiKey(
        api_key=api_key, key=key, signing_secret=api_key_signing_secret(api_key=api_key)
    )


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor=None) -> ApiKey:
    """Revoke once; revoking again keeps the first revocation time."""
    revoked = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if revoked:
        _audit(
            actor=actor or api_key.owner,
            action="api_key_revoked",
            target=api_key,
            details={"name": api_key.name},
        )
    api_key.refresh_from_db()
    return api_key


@transaction.atomic
def alert_receiver_token_rotate(*, receiver: AlertmanagerReceiver, actor=None) -> str:
    """Give the receiver a new bearer token; returns it (shown once, only its hash is kept)."""
    token = receiver_token_generate()
    AlertmanagerReceiver.objects.filter(pk=receiver.pk).update(token_hash=secret_hash(token))
    receiver.token_hash = secret_hash(token)
    _audit(
        actor=actor,
        action="alert_receiver_token_rotated",
        target=receiver,
        details={"slug": receiver.slug},
    )
    return token


@transaction.atomic
def alert_receiver_create(
    *,
    slug: str,
    name: str,
    owner,
    environment: Environment,
    language: str = "zh-CN",
    window_before_minutes: int = 30,
    actor=None,
) -> tuple[AlertmanagerReceiver, str]:
    receiver = AlertmanagerReceiver.objects.create(
        slug=slug,
        name=name,
        owner=owner,
        environment=environment,
        language=language,
        window_before_minutes=window_before_minutes,
    )
    return receiver, alert_receiver_token_rotate(receiver=receiver, actor=actor)


# --- diagnoses ------------------------------------------------------------------------


def _request_hash(fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _replay_or_conflict(*, owner, idempotency_key: str, request_hash: str) -> DiagnosisSession:
    existing = (
        DiagnosisSession.objects.filter(owner=owner, idempotency_key=idempotency_key)
        .select_related("api_submission")
        .first()
    )
    if existing is None:  # only reachable if the row vanished between insert and read
        raise Conflict(_("这个 Idempotency-Key 正在使用中，请重试。"), code="idempotency_conflict")
    submission = getattr(existing, "api_submission", None)
    if submission is None or submission.request_hash != request_hash:
        raise Conflict(
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
    owner,
    api_key: ApiKey | None,
    question: str,
    environment: Environment,
    language: str = "zh-CN",
    services: list[str] | None = None,
    window: dict[str, str] | None = None,
    conversation=None,
    callback_url: str = "",
    idempotency_key: str = "",
) -> Submitted:
    """Queue a diagnosis from the API; a repeated Idempotency-Key returns the first session.

    The same key with a different body is a 409 ``idempotency_conflict``.
    """
    if callback_url and api_key is None:
        raise exceptions.ValidationError(
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


# --- Alertmanager ------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_SPACES = re.compile(r"\s+")
_LABEL_ORDER = ("service", "job", "namespace", "instance", "severity")
_SERVICE_LABELS = ("service", "service_name", "app", "job")
_MAX_LABELS = 12


def alert_text(value: object, *, limit: int | None = None) -> str:
    """Label and annotation text is data: one line, bounded."""
    limit = limit or settings.ALERTMANAGER_TEXT_MAX_CHARS
    text = _SPACES.sub(" ", _CONTROL.sub(" ", str(value))).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _labels_line(labels: dict[str, str]) -> str:
    keys = sorted(k for k in labels if k != "alertname")
    keys.sort(key=lambda k: _LABEL_ORDER.index(k) if k in _LABEL_ORDER else len(_LABEL_ORDER))
    parts = [f"{alert_text(k, limit=60)}={alert_text(labels[k])}" for k in keys[:_MAX_LABELS]]
    return ", ".join(parts)


def alert_question_build(
    *, labels: dict[str, str], annotations: dict[str, str], alert_count: int, language: str
) -> str:
    name = alert_text(labels.get("alertname") or "unknown", limit=100)
    summary = alert_text(annotations.get("summary", "")) if annotations.get("summary") else ""
    description = (
        alert_text(annotations.get("description", "")) if annotations.get("description") else ""
    )
    line = _labels_line(labels)
    if language.lower().startswith("en"):
        parts = [f"Alert {name} firing: {line or '(no labels)'}."]
        if summary:
            parts.append(f"Summary: {summary}")
        if description:
            parts.append(f"Description: {description}")
        if alert_count > 1:
            parts.append(f"({alert_count} alerts in this group.)")
        parts.append("What is the cause?")
    else:
        parts = [f"告警 {name} 触发：{line or '（无标签）'}。"]
        if summary:
            parts.append(f"摘要：{summary}")
        if description:
            parts.append(f"描述：{description}")
        if alert_count > 1:
            parts.append(f"（本组共 {alert_count} 条告警）")
        parts.append("请诊断原因。")
    return alert_text(" ".join(parts), limit=settings.API_QUESTION_MAX_CHARS)


@dataclass(frozen=True)
class AlertIngestResult:
    started: bool
    reason: str  # started / duplicate / resolved / no_firing_alerts
    session: DiagnosisSession | None


def _merged(common: dict[str, str], alerts: list[dict[str, Any]], key: str) -> dict[str, str]:
    """Common labels/annotations, else the first firing alert's."""
    merged = dict(alerts[0].get(key) or {}) if alerts else {}
    merged.update(common or {})
    return {str(k): str(v) for k, v in merged.items()}


def alertmanager_notification_ingest(
    *, receiver: AlertmanagerReceiver, notification: dict[str, Any]
) -> AlertIngestResult:
    """Start one session per firing alert group (receiver + groupKey + earliest startsAt).

    A repeat of the same group and start time starts nothing; resolved notifications
    start nothing.
    """
    if notification["status"] != "firing":
        return AlertIngestResult(started=False, reason="resolved", session=None)
    firing = [a for a in notification["alerts"] if a["status"] == "firing"]
    if not firing:
        return AlertIngestResult(started=False, reason="no_firing_alerts", session=None)
    starts_at = min(a["startsAt"] for a in firing).astimezone(UTC).replace(microsecond=0)
    group_key = notification["groupKey"]
    labels = _merged(notification.get("commonLabels") or {}, firing, "labels")
    annotations = _merged(notification.get("commonAnnotations") or {}, firing, "annotations")
    services: list[str] = []
    for alert in firing:
        for label in _SERVICE_LABELS:
            value = (alert.get("labels") or {}).get(label)
            if value and alert_text(value, limit=100) not in services:
                services.append(alert_text(value, limit=100))
                break
    now = timezone.now()
    window_start = starts_at - timedelta(minutes=receiver.window_before_minutes)
    context = {
        "services": services[:10],
        "window_hint": {"start": rfc3339(window_start), "end": rfc3339(max(now, starts_at))},
        "alert": {
            "receiver": receiver.slug,
            "group_key": alert_text(group_key, limit=500),
            "status": "firing",
            "starts_at": rfc3339(starts_at),
            "alert_count": len(firing),
            "labels": {alert_text(k, limit=60): alert_text(v) for k, v in labels.items()},
            "annotations": {alert_text(k, limit=60): alert_text(v) for k, v in annotations.items()},
            "external_url": alert_text(notification.get("externalURL") or "", limit=500),
        },
    }
    with transaction.atomic():
        group, created = AlertGroupStart.objects.get_or_create(
            receiver=receiver,
            group_key_hash=hashlib.sha256(group_key.encode("utf-8")).hexdigest(),
            starts_at=starts_at,
            defaults={"group_key": group_key},
        )
        if not created:
            AlertGroupStart.objects.filter(pk=group.pk).update(notifications=F("notifications") + 1)
            return AlertIngestResult(started=False, reason="duplicate", session=group.session)
        session = diagnosis_submit(
            question=alert_question_build(
                labels=labels,
                annotations=annotations,
                alert_count=len(firing),
                language=receiver.language,
            ),
            environment=receiver.environment,
            owner=receiver.owner,
            requested_by=f"alertmanager:{receiver.slug}",
            source=DiagnosisSession.Source.ALERT,
            language=receiver.language,
            context=context,
        )
        group.session = session
        group.save(update_fields=["session"])
    return AlertIngestResult(started=True, reason="started", session=session)


# --- callbacks ------------------------------------------------------------------------------


def session_ended_notify(*, session: DiagnosisSession) -> None:
    """Hook for every way a session ends: queue its callback after commit, if it has one."""
    if not session.callback_url:
        return
    session_id = session.pk

    def enqueue() -> None:
        from diagnosis.tasks import diagnosis_callback_task

        diagnosis_callback_task.delay(session_id, 1)

    transaction.on_commit(enqueue)


def callback_signature(*, secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def callback_backoff_seconds(*, attempt: int) -> int:
    """Wait before attempt ``attempt + 1``: base, 2×base, 4×base, … capped at one hour."""
    return int(min(3600, settings.API_CALLBACK_BACKOFF_SECONDS * 2 ** (attempt - 1)))


def callback_address_refusal(url: str) -> str:
    """Why a callback URL may not be called ("" when it may).

    Callbacks go to integrators' public endpoints; a URL that resolves to a private,
    loopback or link-local address would let an API client make Rootproof reach inside
    its own network, so it is refused unless API_CALLBACK_ALLOW_PRIVATE is on.
    """
    if settings.API_CALLBACK_ALLOW_PRIVATE:
        return ""
    parts = urlsplit(url)
    try:
        infos = socket.getaddrinfo(parts.hostname or "", parts.port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"cannot resolve the callback host: {exc}"
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not address.is_global:
            return f"the callback host resolves to a non-public address ({address}); refused"
    return ""


def callback_deliver(*, session_id: int, attempt: int) -> str:
    """POST a finished session's result to its callback URL once; record the attempt.

    Returns ``delivered``, ``retry``, ``failed`` or ``skipped`` (no callback, not
    finished, already delivered, or this attempt already made).
    """
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
        or submission.callback_state
        in (ApiSubmission.CallbackState.DELIVERED, ApiSubmission.CallbackState.FAILED)
        or CallbackAttempt.objects.filter(session=session, attempt=attempt).exists()
    ):
        return "skipped"
    max_attempts = settings.API_CALLBACK_MAX_ATTEMPTS
    api_key = submission.api_key
    status_code: int | None = None
    error = ""
    give_up = False
    started = time.monotonic()
    if api_key is None or not api_key.is_active:
        error = "the API key that submitted this diagnosis was revoked; nothing was sent"
        give_up = True  # there is no secret left to sign with
    elif refusal := callback_address_refusal(session.callback_url):
        error, give_up = refusal, True
    else:
        body = json.dumps(
            {
                "event": "diagnosis.finished",
                "attempt": attempt,
                "sent_at": rfc3339(timezone.now()),
                "diagnosis": diagnosis_detail_data(session),
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Rootproof-Callback/1",
            "X-Rootproof-Event": "diagnosis.finished",
            "X-Rootproof-Delivery": f"{session.public_id}:{attempt}",
            SIGNATURE_HEADER: callback_signature(
                secret=api_key_signing_secret(api_key=api_key), body=body
            ),
        }
        try:
            response = httpx.post(
                session.callback_url,
                content=body,
                headers=headers,
                timeout=settings.API_CALLBACK_TIMEOUT_SECONDS,
                follow_redirects=False,
            )
            status_code = response.status_code
            if not 200 <= status_code < 300:
                error = f"HTTP {status_code}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
    delivered = status_code is not None and 200 <= status_code < 300
    with transaction.atomic():
        CallbackAttempt.objects.create(
            session=session,
            attempt=attempt,
            url=session.callback_url,
            status_code=status_code,
            error=error[:500],
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        if delivered:
            outcome = "delivered"
            state = ApiSubmission.CallbackState.DELIVERED
        elif give_up or attempt >= max_attempts:
            outcome, state = "failed", ApiSubmission.CallbackState.FAILED
        else:
            outcome, state = "retry", ApiSubmission.CallbackState.PENDING
        ApiSubmission.objects.filter(pk=submission.pk).update(
            callback_state=state, callback_delivered_at=timezone.now() if delivered else None
        )
    if not delivered:
        logger.info("callback for %s attempt %s: %s", session.public_id, attempt, error)
    return outcome
