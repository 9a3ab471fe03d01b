"""The Celery tasks; their names are a wire contract with the queued messages.

This module imports the services and the flow it runs; they enqueue by name
(``config.celery.task_enqueue``) and never import it. The callback's task is in
``diagnosis.callbacks.tasks``.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from diagnosis.flow.run import SessionBusy, diagnosis_run
from diagnosis.services import runner_identity, session_fail, sessions_reap_stale

BUSY_RECHECK_SECONDS = 60


@shared_task(
    bind=True,
    name="diagnosis.run",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def diagnosis_run_task(self: Any, session_id: int) -> None:
    try:
        diagnosis_run(session_id=session_id)
    except SessionBusy:
        # Held by a live worker: check back until it finishes, or its heartbeat goes
        # stale and this delivery takes the session over (or the reaper fails it).
        budget = settings.DIAGNOSIS_STALE_AFTER_SECONDS // BUSY_RECHECK_SECONDS + 3
        if self.request.retries < budget:
            raise self.retry(countdown=BUSY_RECHECK_SECONDS, max_retries=budget) from None
    except SoftTimeLimitExceeded:
        # This process's run, not a session another worker has taken over meanwhile.
        session_fail(
            session_id=session_id,
            error="the run exceeded its time limit",
            code="timeout",
            runner=runner_identity(),
        )


@shared_task(name="diagnosis.reap_stale", acks_late=True, soft_time_limit=60, time_limit=90)
def sessions_reap_stale_task() -> int:
    return sessions_reap_stale()
