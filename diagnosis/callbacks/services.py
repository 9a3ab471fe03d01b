"""The hook every way of ending a session calls, and the rules a delivery follows."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from config.celery import task_enqueue
from diagnosis.models import DiagnosisSession

# The callback task's registered name: a wire contract with queued messages, kept as is.
CALLBACK_TASK = "diagnosis.api_callback"
SIGNATURE_HEADER = "X-Rootproof-Signature"


def callback_enqueue(*, session_id: int, attempt: int, countdown: int = 0) -> None:
    """Queue one delivery attempt by the task's registered name.

    The task module imports the delivery, which reads the session through the
    selectors; naming the task keeps ending a session free of that import chain.
    """
    task_enqueue(CALLBACK_TASK, session_id, attempt, countdown=countdown)


def session_ended_notify(*, session: DiagnosisSession) -> None:
    """Hook for every way a session ends: queue its callback after commit, if it has one."""
    if not session.callback_url:
        return
    session_id = session.pk
    transaction.on_commit(lambda: callback_enqueue(session_id=session_id, attempt=1))


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
