"""One ``LLMCall`` row per model call, bounded, never holding a credential."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.db.models import Max

from diagnosis.db import insert_guarded
from diagnosis.llm.base import CallRecorder, Role
from diagnosis.models import DiagnosisSession, LLMCall

MESSAGE_MAX_CHARS = 4_000
RAW_RESPONSE_MAX_CHARS = 200_000
ERROR_MAX_CHARS = 4_000
_SECRET_KEYS = {"api_key", "apikey", "authorization", "x-api-key", "password", "secret"}
_MAX_UINT = 2_147_483_647


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[truncated: {len(text)} chars in all]"


def _configured_secrets() -> list[str]:
    keys = {getattr(settings, "LLM_API_KEY", "") or ""}
    for role_settings in getattr(settings, "LLM_ROLE_SETTINGS", {}).values():
        keys.add(role_settings.get("api_key") or "")
    # Very short values would redact ordinary words; real keys are long.
    return sorted((k for k in keys if len(k) >= 8), key=len, reverse=True)


def _redact(text: str, secrets: list[str]) -> str:
    text = text.replace("\x00", "\\x00")  # PostgreSQL rejects NUL in text and jsonb
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    return text


def _bounded(value: Any, secrets: list[str], *, key: str = "") -> Any:
    if key.lower() in _SECRET_KEYS:
        return "[redacted]"
    if isinstance(value, str):
        return _redact(_truncate(value, MESSAGE_MAX_CHARS), secrets)
    if isinstance(value, dict):
        return {str(k): _bounded(v, secrets, key=str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(v, secrets) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _redact(_truncate(str(value), MESSAGE_MAX_CHARS), secrets)


def _clamp(value: int) -> int:
    return max(0, min(int(value), _MAX_UINT))


def llm_call_record(
    *,
    session: DiagnosisSession,
    attempt: int,
    role: Role | str,
    provider: str,
    model: str,
    request: dict[str, Any],
    raw_response: str,
    tokens_in: int,
    tokens_out: int,
    latency_ms: int,
    status: str,
    error: str = "",
    sequence: int | None = None,
) -> LLMCall:
    """Write one LLMCall row. ``sequence``, when the caller counts them, saves the read of
    the session's last one; a clash (another writer) falls back to reading it."""
    secrets = _configured_secrets()
    request_chars = len(json.dumps(request, ensure_ascii=False, default=str))
    if status not in LLMCall.Status.values:
        error = f"[status {status}] {error}"
        status = LLMCall.Status.ERROR
    fields = {
        "attempt": max(0, min(int(attempt or 0), 32_767)),
        "role": str(role),
        "provider": provider[:20],
        "model": _redact(model or "", secrets)[:200],
        "request_chars": _clamp(request_chars),
        "request": _bounded(request, secrets),
        "raw_response": _redact(_truncate(raw_response or "", RAW_RESPONSE_MAX_CHARS), secrets),
        "tokens_in": _clamp(tokens_in),
        "tokens_out": _clamp(tokens_out),
        "latency_ms": _clamp(latency_ms),
        "status": status,
        "error": _redact(_truncate(error or "", ERROR_MAX_CHARS), secrets),
    }
    for _ in range(5):
        try:
            with insert_guarded():
                if sequence is None:
                    last = LLMCall.objects.filter(session=session).aggregate(m=Max("sequence"))
                    sequence = (last["m"] or 0) + 1
                return LLMCall.objects.create(session=session, sequence=sequence, **fields)
        except IntegrityError:
            sequence = None  # another writer took the sequence number; read the last one
    raise RuntimeError(f"could not allocate an LLMCall sequence for session {session.pk}")


def llm_call_recorder(
    *, session: DiagnosisSession, attempt_getter: Callable[[], int], last: int | None = None
) -> CallRecorder:
    """A ``CallRecorder`` that writes one LLMCall row of ``session`` per model call.

    It counts the sequence after the first row (one runner writes a session's calls), so
    each later call is one INSERT; ``last``, when the caller knows the session's last
    sequence (0: no calls yet), makes the first one an INSERT too. A wrong guess costs a
    clash, and the clash a read.
    """

    def record(
        *,
        role: Role,
        provider: str,
        model: str,
        request: dict[str, Any],
        raw_response: str,
        tokens_in: int,
        tokens_out: int,
        latency_ms: int,
        status: str,
        error: str = "",
    ) -> None:
        nonlocal last
        row = llm_call_record(
            sequence=None if last is None else last + 1,
            session=session,
            attempt=attempt_getter(),
            role=role,
            provider=provider,
            model=model,
            request=request,
            raw_response=raw_response,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_ms=latency_ms,
            status=status,
            error=error,
        )
        last = row.sequence

    return record
