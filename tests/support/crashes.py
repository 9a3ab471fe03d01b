"""Worker crashes: find the worker running a session, and count what the crashes left behind.

Shared by tests/flow/test_worker_crashes.py and bench/chaos.py.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from django.db.models import Count

from diagnosis.models import DiagnosisSession, ToolInvocation
from diagnosis.services import SAFE_FAILURE_ANSWER

MID_SESSION_STAGES = ("executor", "gatekeeper", "verifier", "composer")


def sessions_mid_flow(
    *, session_ids: list[int], workers: list[subprocess.Popen]
) -> list[tuple[DiagnosisSession, subprocess.Popen]]:
    """Sessions of these that are mid-flow, each with the worker (process group) running it."""
    groups = {proc.pid: proc for proc in workers if proc.poll() is None}
    running = DiagnosisSession.objects.filter(
        pk__in=session_ids, status="running", stage__in=MID_SESSION_STAGES
    ).order_by("started_at")
    found = []
    for session in running:
        _host, _, pid = session.runner.rpartition(":")
        try:
            group = os.getpgid(int(pid))
        except (ProcessLookupError, ValueError):
            continue
        if group in groups:
            found.append((session, groups[group]))
    return found


@dataclass
class CrashReport:
    submitted: int = 0
    completed: int = 0
    failed: int = 0
    failed_with_safe_answer: int = 0
    cancelled: int = 0
    queued: int = 0
    still_running: int = 0
    sessions_restarted: int = 0
    restarts: int = 0
    # (session id, attempt, tool, arguments, rows) for each call recorded more than once
    duplicated: list[tuple] = field(default_factory=list)
    # completed or failed sessions whose answer is empty or raw JSON
    unsafe_answers: list[int] = field(default_factory=list)

    @property
    def attempts_with_duplicates(self) -> int:
        return len({(d[0], d[1]) for d in self.duplicated})


def crash_report(*, session_ids: list[int]) -> CrashReport:
    """What the sessions look like now.

    The role-aware test model asks for exactly one ``query_logs`` call per attempt, so
    any (session, attempt, tool, arguments) recorded twice is a duplicate row.
    """
    sessions = DiagnosisSession.objects.filter(pk__in=session_ids)
    report = CrashReport(submitted=len(session_ids))
    safe_answers = set(SAFE_FAILURE_ANSWER.values())
    for session in sessions:
        status = session.status
        if status == "completed":
            report.completed += 1
        elif status == "failed":
            report.failed += 1
            report.failed_with_safe_answer += session.final_answer in safe_answers
        elif status == "cancelled":
            report.cancelled += 1
        elif status == "queued":
            report.queued += 1
        elif status == "running":
            report.still_running += 1
        if session.restarts:
            report.sessions_restarted += 1
            report.restarts += session.restarts
        answer = session.final_answer.strip()
        if status in ("completed", "failed") and (not answer or answer.startswith(("{", "["))):
            report.unsafe_answers.append(session.pk)
    duplicates = (
        ToolInvocation.objects.filter(session_id__in=session_ids)
        .values("session_id", "attempt", "tool_name", "arguments")
        .annotate(rows=Count("id"))
        .filter(rows__gt=1)
    )
    report.duplicated = [
        (d["session_id"], d["attempt"], d["tool_name"], d["arguments"], d["rows"])
        for d in duplicates
    ]
    return report
