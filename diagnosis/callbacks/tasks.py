"""The callback's Celery task: one delivery attempt per task, each retry its own task."""

from __future__ import annotations

from celery import shared_task

from diagnosis.callbacks.delivery import callback_deliver
from diagnosis.callbacks.services import CALLBACK_TASK, callback_backoff_seconds, callback_enqueue


@shared_task(name=CALLBACK_TASK, acks_late=True, soft_time_limit=60, time_limit=90)
def diagnosis_callback_task(session_id: int, attempt: int = 1) -> None:
    """POST a finished session's result to its callback URL; each retry is its own task."""
    if callback_deliver(session_id=session_id, attempt=attempt) == "retry":
        callback_enqueue(
            session_id=session_id,
            attempt=attempt + 1,
            countdown=callback_backoff_seconds(attempt=attempt),
        )
