"""Writes for Alertmanager: receivers and their tokens, and notifications that start diagnoses."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext

from diagnosis.audit_trail import audit_trail_record
from diagnosis.credentials import receiver_token_generate, secret_hash
from diagnosis.evidence.timeutil import rfc3339
from diagnosis.i18n import language_override
from diagnosis.models import AlertGroupStart, AlertmanagerReceiver, DiagnosisSession, Environment
from diagnosis.services import diagnosis_submit

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_SPACES = re.compile(r"\s+")
_LABEL_ORDER = ("service", "job", "namespace", "instance", "severity")
_SERVICE_LABELS = ("service", "service_name", "app", "job")
_MAX_LABELS = 12
_MAX_SERVICES = 10


# --- receivers and their tokens ----------------------------------------------------------


@transaction.atomic
def alert_receiver_token_rotate(
    *, receiver: AlertmanagerReceiver, actor: User | None = None
) -> str:
    """Give the receiver a new bearer token; returns it (shown once, only its hash is kept)."""
    token = receiver_token_generate()
    AlertmanagerReceiver.objects.filter(pk=receiver.pk).update(token_hash=secret_hash(token))
    receiver.token_hash = secret_hash(token)
    audit_trail_record(
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
    owner: User,
    environment: Environment,
    language: str = "zh-CN",
    window_before_minutes: int = 30,
    actor: User | None = None,
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


# --- the question an alert asks ----------------------------------------------------------


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
    """The question a firing group asks, in the receiver's language."""
    name = alert_text(labels.get("alertname") or "unknown", limit=100)
    summary = alert_text(annotations["summary"]) if annotations.get("summary") else ""
    description = alert_text(annotations["description"]) if annotations.get("description") else ""
    with language_override(language):
        line = _labels_line(labels) or gettext("（无标签）")
        parts = [gettext("告警 %(name)s 触发：%(labels)s。") % {"name": name, "labels": line}]
        if summary:
            parts.append(gettext("摘要：%(summary)s") % {"summary": summary})
        if description:
            parts.append(gettext("描述：%(description)s") % {"description": description})
        if alert_count > 1:
            parts.append(gettext("（本组共 %(count)s 条告警）") % {"count": alert_count})
        parts.append(gettext("请诊断原因。"))
    return alert_text(" ".join(parts), limit=settings.API_QUESTION_MAX_CHARS)


# --- notifications -----------------------------------------------------------------------


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


def _services_of(firing: list[dict[str, Any]]) -> list[str]:
    """The first service-like label of each firing alert, once each, in order."""
    services: list[str] = []
    for alert in firing:
        for label in _SERVICE_LABELS:
            value = (alert.get("labels") or {}).get(label)
            if value and alert_text(value, limit=100) not in services:
                services.append(alert_text(value, limit=100))
                break
    return services[:_MAX_SERVICES]


def _alert_context(
    *,
    receiver: AlertmanagerReceiver,
    notification: dict[str, Any],
    firing: list[dict[str, Any]],
    starts_at: datetime,
    labels: dict[str, str],
    annotations: dict[str, str],
) -> dict[str, Any]:
    """The session context: services, the window before startsAt, the alert as data."""
    before = timedelta(minutes=receiver.window_before_minutes)
    # An alert dated at the calendar's start has no minutes before it.
    window_start = (
        starts_at - before
        if starts_at - datetime.min.replace(tzinfo=UTC) > before
        else datetime.min.replace(tzinfo=UTC)
    )
    window_end = max(timezone.now(), starts_at)
    return {
        "services": _services_of(firing),
        "window_hint": {"start": rfc3339(window_start), "end": rfc3339(window_end)},
        "alert": {
            "receiver": receiver.slug,
            "group_key": alert_text(notification["groupKey"], limit=500),
            "status": "firing",
            "starts_at": rfc3339(starts_at),
            "alert_count": len(firing),
            "labels": {alert_text(k, limit=60): alert_text(v) for k, v in labels.items()},
            "annotations": {alert_text(k, limit=60): alert_text(v) for k, v in annotations.items()},
            "external_url": alert_text(notification.get("externalURL") or "", limit=500),
        },
    }


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
    labels = _merged(notification.get("commonLabels") or {}, firing, "labels")
    annotations = _merged(notification.get("commonAnnotations") or {}, firing, "annotations")
    context = _alert_context(
        receiver=receiver,
        notification=notification,
        firing=firing,
        starts_at=starts_at,
        labels=labels,
        annotations=annotations,
    )
    question = alert_question_build(
        labels=labels, annotations=annotations, alert_count=len(firing), language=receiver.language
    )
    return _group_start(
        receiver=receiver,
        group_key=notification["groupKey"],
        starts_at=starts_at,
        question=question,
        context=context,
    )


@transaction.atomic
def _group_start(
    *,
    receiver: AlertmanagerReceiver,
    group_key: str,
    starts_at: datetime,
    question: str,
    context: dict[str, Any],
) -> AlertIngestResult:
    """The group's first notification at this start time submits; a repeat is counted."""
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
        question=question,
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
