"""A running session's progress events, and the fields its runner writes as it goes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from diagnosis.models import DiagnosisSession, SessionEvent
from diagnosis.storable import nul_free


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
