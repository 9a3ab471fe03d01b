"""Who runs a session, and how a session ends: claimed, then completed, failed or cancelled."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.translation import gettext, gettext_noop

from diagnosis.callbacks.services import session_ended_notify
from diagnosis.contracts import CancelledOutcome, CompletedOutcome, FailedOutcome, SessionOutcome
from diagnosis.i18n import language_key, language_override
from diagnosis.models import DiagnosisSession, SessionEvent
from diagnosis.sessions.events import SessionEventLog, SessionLost
from diagnosis.sessions.record import session_self_evaluation_save
from diagnosis.storable import nul_free


def _in_language(message: str, language: str) -> str:
    with language_override(language):
        return gettext(message)


_in_language_lazy = lazy(_in_language, str)
_SAFE_FAILURE = gettext_noop(
    "**诊断未能完成**\n\n本次诊断在运行中出错，没有得出任何经过证据校验的结论。"
    "请稍后重试；审计页面记录了失败原因。\n"
)
_CANCELLED = gettext_noop("**诊断已取消**\n\n本次诊断在完成前被取消，没有给出结论。\n")
_ANSWER_LANGUAGE_KEYS = ("zh", "en")
# The safe answers of a failed and of a cancelled session, by language key.
SAFE_FAILURE_ANSWER = {key: _in_language_lazy(_SAFE_FAILURE, key) for key in _ANSWER_LANGUAGE_KEYS}
CANCELLED_ANSWER = {key: _in_language_lazy(_CANCELLED, key) for key in _ANSWER_LANGUAGE_KEYS}


def runner_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def runner_is_alive(runner: str) -> bool:
    """True unless the runner is a process on this host that no longer exists."""
    host, _, pid = runner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine: only the heartbeat can tell
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_claim(*, session_id: int) -> DiagnosisSession | None:
    """Take a queued session (or an orphaned running one) for this process.

    Returns None when the session is missing, finished, or being run by a live
    worker: a duplicate delivery does nothing.
    """
    with transaction.atomic():
        # the run reads its environment at once; only the session's row is locked
        session = (
            DiagnosisSession.objects.select_for_update(of=("self",))
            .select_related("environment")
            .filter(pk=session_id)
            .first()
        )
        if session is None or session.is_terminal:
            return None
        now = timezone.now()
        if session.status == DiagnosisSession.Status.RUNNING:
            stale_after = timedelta(seconds=settings.DIAGNOSIS_STALE_AFTER_SECONDS)
            fresh = session.heartbeat_at and now - session.heartbeat_at < stale_after
            if fresh and runner_is_alive(session.runner):
                return None
            session.restarts += 1  # the row is locked: no lost update
        if session.cancel_requested:
            session_finish(session=session, outcome=CancelledOutcome())
            return None
        session.status = DiagnosisSession.Status.RUNNING
        session.started_at = session.started_at or now
        session.heartbeat_at = now
        session.runner = runner_identity()
        session.save(update_fields=["status", "started_at", "heartbeat_at", "runner", "restarts"])
    return session


def session_fail(
    *,
    session_id: int,
    error: str,
    code: str = "internal_error",
    only_if_status: tuple[str, ...] | None = None,
    runner: str | None = None,
) -> bool:
    """End a session as failed with a safe answer. Returns False if it had already ended,
    or (given ``runner``) if another runner is running it now.

    ``session.error`` keeps ``"<code>: <detail>"``: the stable code (one of
    FAILURE_CODES) is what API clients see, the detail is for reviewers only.
    """
    with transaction.atomic():
        session = DiagnosisSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.is_terminal:
            return False
        if only_if_status and session.status not in only_if_status:
            return False
        if runner is not None and session.is_running_elsewhere(runner):
            return False
        session_finish(session=session, outcome=FailedOutcome(error=error, code=code))
    return True


def _completed_write(session: DiagnosisSession, outcome: CompletedOutcome) -> list[str]:
    session.decision = outcome.decision.value
    session.root_cause_status = outcome.root_cause_status
    session.final_answer = nul_free(outcome.answer)
    session.answer_source = outcome.answer_source.value
    session_self_evaluation_save(session=session, evaluation=outcome.evaluation, save=False)
    session.llm_usage = outcome.llm_usage
    session.status = DiagnosisSession.Status.COMPLETED
    return [
        "decision",
        "root_cause_status",
        "final_answer",
        "answer_source",
        "self_evaluation",
        "llm_usage",
        "status",
    ]


def _failed_write(session: DiagnosisSession, outcome: FailedOutcome) -> list[str]:
    session.status = DiagnosisSession.Status.FAILED
    session.final_answer = str(SAFE_FAILURE_ANSWER[language_key(session.language)])
    session.answer_source = DiagnosisSession.AnswerSource.FALLBACK
    session.error = f"{outcome.code}: {outcome.error}"[:5000]
    return ["status", "final_answer", "answer_source", "error"]


def _cancelled_write(session: DiagnosisSession) -> list[str]:
    session.status = DiagnosisSession.Status.CANCELLED
    session.final_answer = str(CANCELLED_ANSWER[language_key(session.language)])
    return ["status", "final_answer"]


def _ended_event(outcome: SessionOutcome, events: SessionEventLog) -> None:
    if isinstance(outcome, CompletedOutcome):
        events.add(kind=SessionEvent.Kind.STAGE, stage="done", message=outcome.decision.value)
    elif isinstance(outcome, FailedOutcome):
        # The exception stays in session.error, for reviewers; progress events are shown
        # to users and API clients, so they carry only that the run failed.
        events.add(
            kind=SessionEvent.Kind.ERROR,
            stage="done",
            message="failed",
            data={"code": outcome.code},
        )
    else:
        events.add(kind=SessionEvent.Kind.STAGE, stage="done", message="cancelled")


def session_finish(
    *,
    session: DiagnosisSession,
    outcome: SessionOutcome,
    events: SessionEventLog | None = None,
    runner: str | None = None,
) -> None:
    """The one writer of a terminal session: its row, its last event, its on-commit hooks.

    Completed, failed (with the safe answer) or cancelled; the caller decides that the
    session may end (it holds the row lock, or is the session's runner: then ``runner``,
    and the row is written only while it is still that runner's running session, else
    SessionLost). What the runner's ``events`` log still holds deferred is written in the
    same UPDATE and INSERT.
    """
    with transaction.atomic():
        deferred = dict(events.fields_pending()) if events is not None else {}
        for name, value in deferred.items():  # the ending's own writes below win
            setattr(session, name, value)
        if isinstance(outcome, CompletedOutcome):
            fields = _completed_write(session, outcome)
        elif isinstance(outcome, FailedOutcome):
            fields = _failed_write(session, outcome)
        else:
            fields = _cancelled_write(session)
        session.stage = DiagnosisSession.Stage.DONE
        session.finished_at = timezone.now()
        update_fields = list(dict.fromkeys([*deferred, *fields, "stage", "finished_at"]))
        if runner is None:
            session.save(update_fields=update_fields)
        else:
            owned = DiagnosisSession.objects.filter(
                pk=session.pk, runner=runner, status=DiagnosisSession.Status.RUNNING
            )
            if owned.update(**{name: getattr(session, name) for name in update_fields}) != 1:
                raise SessionLost(session.pk)
        _ended_event(outcome, events or SessionEventLog(session))
        session_ended_notify(session=session)  # the callback, after commit
    if events is not None:
        events.fields_take()  # written with the ending (kept, had the ending failed)


def sessions_reap_stale(*, now: datetime | None = None) -> int:
    """Fail running sessions whose worker stopped beating: no session runs forever."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.DIAGNOSIS_STALE_AFTER_SECONDS)
    stale = DiagnosisSession.objects.filter(
        status=DiagnosisSession.Status.RUNNING, heartbeat_at__lt=cutoff
    ).values_list("id", flat=True)
    reaped = 0
    for session_id in list(stale):
        if session_fail(
            session_id=session_id,
            error="no heartbeat since the cutoff; the worker presumably died",
            code="worker_lost",
            only_if_status=(DiagnosisSession.Status.RUNNING,),
        ):
            reaped += 1
    return reaped
