"""Writes of the diagnosis domain: submit, run, events, cancel, reap."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.translation import gettext, gettext_noop

from config.celery import task_enqueue
from diagnosis.callbacks.services import session_ended_notify
from diagnosis.contracts import (
    CancelledOutcome,
    CompletedOutcome,
    ConflictError,
    FailedOutcome,
    SelfEvaluation,
    SessionOutcome,
)
from diagnosis.evidence.packs import pack_header_load
from diagnosis.evidence.timeutil import rfc3339
from diagnosis.i18n import language_key, language_override
from diagnosis.models import DiagnosisSession, Environment, SessionEvent
from diagnosis.storable import nul_free

logger = logging.getLogger(__name__)


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


class SessionLost(Exception):
    """The run's session is no longer its own: another worker took it over, the reaper
    failed it, or it ended. The run stops and writes nothing more to it."""


class SessionEventLog:
    """Appends one session's progress events, and writes its runner's session fields.

    One INSERT an event: the sequence is counted here after one read (a session has
    one runner at a time; a takeover starts a new log), and the heartbeat is beaten
    at most every ``HEARTBEAT_EVERY_SECONDS`` (far inside the stale cutoff). Session
    fields deferred with ``fields_defer`` ride on the log's next UPDATE (a stage's, a
    heartbeat's, ``flush``); the runner defers only what its next stage follows at once
    (code, not a model or a tool), so what a user follows live is as live as before.

    A cancel is seen by each stage's UPDATE (``beat(unless_cancelled=True)``) and by
    ``cancel_requested``, which reads the flag only when the last look is older than
    ``CANCEL_SEEN_WITHIN_SECONDS``: a run stops at most that long after a cancel, at its
    next step, without a SELECT before every tool call.
    """

    HEARTBEAT_EVERY_SECONDS = 5.0
    CANCEL_SEEN_WITHIN_SECONDS = 1.0

    def __init__(self, session: DiagnosisSession, *, owned: bool = False) -> None:
        self.session = session
        # A runner's log (``owned``) writes only while the row is still its running session.
        self.owned = owned
        self.last = session.events.aggregate(m=Max("sequence"))["m"] or 0
        self.beaten_at: float | None = None
        self.cancel_checked_at: float | None = None
        self._fields: dict[str, Any] = {}  # session fields not yet written

    def add(
        self,
        *,
        kind: str,
        stage: str = "",
        message: str = "",
        data: dict[str, Any] | None = None,
    ) -> SessionEvent:
        self.last += 1
        try:
            event = SessionEvent.objects.create(
                session=self.session,
                sequence=self.last,
                kind=kind,
                stage=stage,
                message=nul_free(message[:500]),
                data=nul_free(data or {}),
            )
        except IntegrityError:
            # Someone else numbered the session's events meanwhile (a takeover, the reaper's
            # ending): a runner's log stops with SessionLost when the session is not its own.
            if not transaction.get_connection().in_atomic_block:
                self._owned_check()
            raise
        self.beat()
        return event

    def fields_defer(self, **fields: Any) -> None:
        """Write these session fields with the log's next UPDATE."""
        self._fields.update(fields)

    def fields_pending(self) -> Mapping[str, Any]:
        """The deferred session fields, left deferred."""
        return self._fields

    def fields_take(self) -> dict[str, Any]:
        """The deferred session fields, for a caller that writes them itself."""
        deferred, self._fields = self._fields, {}
        return deferred

    def flush(self) -> None:
        """Write the deferred session fields now."""
        if self._fields:
            self.beat(**self.fields_take())

    def beat(self, *, force: bool = False, unless_cancelled: bool = False, **fields: Any) -> bool:
        """Beat a running session's heartbeat when due (or forced), writing ``fields`` too,
        and the deferred fields with them.

        With ``unless_cancelled`` nothing is written to a session whose cancel was requested,
        and False says so: the cancel check and the write are one UPDATE. The deferred
        fields are written even then: a cancel stops the run, not the record of its work.
        """
        now = time.monotonic()
        running = self.session.status == DiagnosisSession.Status.RUNNING
        stale = self.beaten_at is None or now - self.beaten_at >= self.HEARTBEAT_EVERY_SECONDS
        due = running and (force or stale)
        if not (fields or due):
            return True  # the deferred fields wait for a write
        deferred = self.fields_take()
        fields = {**deferred, **fields}
        if due:
            fields["heartbeat_at"] = timezone.now()
            self.beaten_at = now
        try:
            return self._write(fields, deferred, unless_cancelled=unless_cancelled, now=now)
        except Exception:
            # Not written: the deferred fields wait for the next write (the run's flush on
            # failure), newer values first.
            self._fields = {**deferred, **self._fields}
            raise

    def _write(
        self,
        fields: dict[str, Any],
        deferred: dict[str, Any],
        *,
        unless_cancelled: bool,
        now: float,
    ) -> bool:
        rows = self._rows()
        if not unless_cancelled:
            written = rows.update(**fields) == 1
            if not written:
                self._owned_check()
            return written
        if rows.filter(cancel_requested=False).update(**fields) == 1:
            self.cancel_checked_at = now
            return True
        self._owned_check()
        if deferred:
            rows.update(**deferred)
        return False

    def _rows(self) -> QuerySet[DiagnosisSession]:
        rows = DiagnosisSession.objects.filter(pk=self.session.pk)
        if self.owned:
            rows = rows.filter(runner=self.session.runner, status=DiagnosisSession.Status.RUNNING)
        return rows

    def _owned_check(self) -> None:
        """After a write that changed nothing: raise SessionLost when the row is no longer
        this runner's running session (only a requested cancel may be why otherwise)."""
        if self.owned and not self._rows().exists():
            raise SessionLost(self.session.pk)

    def cancel_requested(self) -> bool:
        """Was a cancel requested? Read only when the last look is older than the bound."""
        now = time.monotonic()
        checked = self.cancel_checked_at
        if checked is not None and now - checked < self.CANCEL_SEEN_WITHIN_SECONDS:
            return False
        rows = DiagnosisSession.objects.filter(pk=self.session.pk)
        if rows.values_list("cancel_requested", flat=True).first():
            return True
        self.cancel_checked_at = now
        return False


@contextlib.contextmanager
def run_commits_unflushed() -> Iterator[None]:
    """While a runner works, its commits do not wait for their flush to disk (PostgreSQL).

    A running session commits some twenty small writes (progress events, stage and
    heartbeat UPDATEs, model-call and tool rows), and each waiting for the WAL flush
    costs more than its statement. With ``synchronous_commit`` off they are visible to
    every reader at once, as before; only a crash of the database server (not of the
    worker) may lose the last fraction of a second of them, and the session then looks
    like one whose worker died: running with a stale heartbeat, taken over or reaped.
    The claim before and the terminal write after (``session_finish``) are flushed as
    always, and a flushed commit makes every earlier one durable with it: no ended
    session lacks a row it was built from.
    """
    connection = transaction.get_connection()
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield  # in a caller's transaction, a SET would outlive or vanish with it
        return
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO off")
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("RESET synchronous_commit")
        except DatabaseError:  # never reused unflushed: a worker keeps its connection
            connection.close()


def session_event_add(
    *,
    session: DiagnosisSession,
    kind: str,
    stage: str = "",
    message: str = "",
    data: dict[str, Any] | None = None,
) -> SessionEvent:
    """Append one progress event (and beat the heartbeat of a running session)."""
    return SessionEventLog(session).add(kind=kind, stage=stage, message=message, data=data)


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


def session_self_evaluation_save(
    *, session: DiagnosisSession, evaluation: SelfEvaluation, save: bool = True
) -> None:
    """The one writer of ``DiagnosisSession.self_evaluation`` (reader:
    ``diagnosis.selectors.session_self_evaluation``)."""
    # The parts the run recorded, each whole (defaults included); parts never recorded stay
    # absent, so an old row's readers see what was there and nothing invented.
    recorded = evaluation.model_fields_set | set(evaluation.model_extra or {})
    dumped = evaluation.model_dump(mode="json")
    session.self_evaluation = nul_free({k: v for k, v in dumped.items() if k in recorded})
    if save:
        session.save(update_fields=["self_evaluation"])
