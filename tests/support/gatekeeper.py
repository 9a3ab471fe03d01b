"""The Gatekeeper on a persisted session outside a run: a test's re-check of an output."""

from __future__ import annotations

from diagnosis.contracts import GatekeeperReport, SelfEvaluation
from diagnosis.flow.gatekeeper import gatekeeper_stage
from diagnosis.flow.parsing import ParsedExecutorOutput
from diagnosis.models import DiagnosisSession
from diagnosis.sessions.record import session_self_evaluation, session_self_evaluation_save


def gatekeeper_record(
    *, session: DiagnosisSession, evaluation: SelfEvaluation, report: GatekeeperReport
) -> None:
    """Record the Gatekeeper's report as the session's current one."""
    evaluation.gatekeeper = report
    session_self_evaluation_save(session=session, evaluation=evaluation)


def gatekeeper_run(*, session: DiagnosisSession, parsed: ParsedExecutorOutput) -> GatekeeperReport:
    """The Gatekeeper on a session's invocations, its report recorded (a re-check)."""
    report = gatekeeper_stage(session=session, parsed=parsed)
    gatekeeper_record(session=session, evaluation=session_self_evaluation(session), report=report)
    return report
