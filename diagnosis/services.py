"""Writes of the diagnosis domain: submit, cancel; the session record's writers
(``diagnosis.sessions``: events, claim, finish, reap) are named here too."""

from __future__ import annotations

import logging
import re
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from config.celery import task_enqueue
from diagnosis.contracts import CancelledOutcome, ConflictError
from diagnosis.evidence.packs import pack_header_load
from diagnosis.evidence.timeutil import rfc3339
from diagnosis.i18n import language_key
from diagnosis.models import DiagnosisSession, Environment, SessionEvent

# The session record's writers (diagnosis.sessions), named here as the app's entry points.
from diagnosis.sessions.events import SessionEventLog as SessionEventLog
from diagnosis.sessions.events import SessionLost as SessionLost
from diagnosis.sessions.events import run_commits_unflushed as run_commits_unflushed
from diagnosis.sessions.events import session_event_add
from diagnosis.sessions.lifecycle import CANCELLED_ANSWER as CANCELLED_ANSWER
from diagnosis.sessions.lifecycle import SAFE_FAILURE_ANSWER as SAFE_FAILURE_ANSWER
from diagnosis.sessions.lifecycle import runner_identity as runner_identity
from diagnosis.sessions.lifecycle import session_claim as session_claim
from diagnosis.sessions.lifecycle import session_fail as session_fail
from diagnosis.sessions.lifecycle import session_finish
from diagnosis.sessions.lifecycle import sessions_reap_stale as sessions_reap_stale
from diagnosis.sessions.record import session_self_evaluation_save as session_self_evaluation_save

logger = logging.getLogger(__name__)


_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_PLAIN_WORD = re.compile(r"(?<![\w-])[A-Za-z]{2,}(?![\w-])")


def answer_language_pick(*, question: str, ui_language: str | None = None) -> str:
    """The answer's language: the question's, else the UI's, else the default (Chinese).

    A question with CJK script is Chinese; one with at least two plain Latin words
    (identifiers such as ``payment-service`` or ``10:20`` are no evidence either way)
    is English; anything else follows the UI language.
    """
    if _HAN.search(question):
        return "zh-CN"
    if len(_PLAIN_WORD.findall(question)) >= 2:
        return "en"
    if ui_language and language_key(ui_language) == "en":
        return "en"
    return "zh-CN"


def environment_default() -> Environment:
    env = Environment.objects.filter(
        slug=settings.DIAGNOSIS_DEFAULT_ENVIRONMENT, is_active=True
    ).first()
    if env is None:
        env = Environment.objects.filter(is_active=True).order_by("id").first()
    if env is None:
        raise Environment.DoesNotExist("no active environment is configured")
    return env


def environment_context(*, environment: Environment) -> dict[str, Any]:
    """When questions are asked in this environment: a pack's `now` and window, or the clock."""
    if environment.kind == Environment.Kind.SCENARIO and environment.pack_path:
        try:
            pack = pack_header_load(environment.pack_path)
        except Exception:  # a broken pack still diagnoses, against the clock
            logger.warning("could not read pack %s", environment.pack_path)
        else:
            context: dict[str, Any] = {"now": rfc3339(pack.now)}
            if pack.window:
                context["window_hint"] = {
                    "start": rfc3339(pack.window.start),
                    "end": rfc3339(pack.window.end),
                }
            return context
    return {"now": rfc3339(timezone.now())}


@transaction.atomic
def diagnosis_submit(
    *,
    question: str,
    environment: Environment,
    owner: Any = None,
    requested_by: str = "",
    source: str = DiagnosisSession.Source.CHAT,
    language: str = "zh-CN",
    context: dict[str, Any] | None = None,
    conversation: Any = None,
    idempotency_key: str = "",
    callback_url: str = "",
    provider: str | None = None,
    enqueue: bool = True,
) -> DiagnosisSession:
    """Create a queued session and enqueue its run after commit.

    ``enqueue=False`` is for commands that run the session in-process (diagnose, evaluate).
    """
    context = dict(context or {})
    for key, value in environment_context(environment=environment).items():
        context.setdefault(key, value)
    if provider:
        context["provider"] = provider
    session = DiagnosisSession.objects.create(
        owner=owner,
        requested_by=requested_by,
        source=source,
        environment=environment,
        conversation=conversation,
        original_query=question,
        language=language,
        context=context,
        idempotency_key=idempotency_key,
        callback_url=callback_url,
    )
    session_event_add(
        session=session, kind=SessionEvent.Kind.STAGE, stage="queued", message="queued"
    )
    if enqueue:
        transaction.on_commit(lambda: task_enqueue(RUN_TASK, session.id))
    return session


# The registered Celery task names (a wire contract with queued messages): services
# enqueue by name, so that the task module may import the services it runs.
RUN_TASK = "diagnosis.run"


def diagnosis_cancel(*, session: DiagnosisSession) -> DiagnosisSession:
    """Cancel a queued session now; ask a running one to stop at its next step.

    Cancelling a cancelled session changes nothing; a completed or failed one cannot be
    cancelled (``ConflictError`` with the code ``not_cancellable``).
    """
    with transaction.atomic():
        locked = DiagnosisSession.objects.select_for_update().get(pk=session.pk)
        if locked.status in (DiagnosisSession.Status.COMPLETED, DiagnosisSession.Status.FAILED):
            raise ConflictError(
                gettext("诊断已经结束（%(status)s）。") % {"status": locked.status},
                code="not_cancellable",
            )
        if locked.is_terminal:
            return locked
        locked.cancel_requested = True
        locked.save(update_fields=["cancel_requested"])
        if locked.status == DiagnosisSession.Status.QUEUED:
            session_finish(session=locked, outcome=CancelledOutcome())
    locked.refresh_from_db()
    return locked
