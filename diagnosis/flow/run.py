"""The flow for one claimed session, stage by stage, everything persisted.

Planner → Executor (with the evidence tools) → Gatekeeper → Verifier → router
(the retry loop back to the Executor) → Composer filter → Composer (guard, and
the renderer as fallback). Each stage is a function of ``diagnosis.flow``; this
module calls them in that order, records what each did in the session's
``SelfEvaluation`` and ends the session through ``sessions.lifecycle.session_finish``.
A malformed or failed stage becomes a recorded status and a safe fallback; the
only way out of ``flow_run`` is a terminal session (or an exception that
``diagnosis_run`` turns into one).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from diagnosis.contracts import (
    AttemptRecord,
    CancelledOutcome,
    CompletedOutcome,
    ComposerInput,
    Decision,
    Disagreement,
    GatekeeperReport,
    RestartRecord,
    ScopeRecord,
    SelfEvaluation,
    VerifierEvaluation,
)
from diagnosis.evidence import invoke, timeutil
from diagnosis.evidence.invoke import ToolResult
from diagnosis.evidence.sources import environment_has_traces
from diagnosis.evidence.timeutil import rfc3339
from diagnosis.evidence.topology import environment_call_edges
from diagnosis.flow import selection
from diagnosis.flow.composer import ComposerResult, composer_stage
from diagnosis.flow.composer_filter import FilterResult, composer_input_build
from diagnosis.flow.executor import ExecutorResult, executor_stage
from diagnosis.flow.gatekeeper import gatekeeper_stage
from diagnosis.flow.parsing import ParsedExecutorOutput
from diagnosis.flow.planner import PlannerResult, planner_stage, time_parse
from diagnosis.flow.router import RouteResult, route, scope_note
from diagnosis.flow.scope import (
    root_cause_status,
    services_unknown,
    unknown_services_notice,
    window_notice,
)
from diagnosis.flow.verifier import VerifierResult, verifier_payload_build, verifier_stage
from diagnosis.llm.base import (
    Agent,
    CallRecorder,
    ExecutorRequest,
    PlannerRequest,
    Role,
    ToolRunner,
)
from diagnosis.llm.parsing import detail_coded
from diagnosis.llm.recorder import llm_call_recorder
from diagnosis.models import DiagnosisSession, SessionEvent
from diagnosis.sessions.events import SessionEventLog, SessionLost, run_commits_unflushed
from diagnosis.sessions.lifecycle import session_claim, session_fail, session_finish
from diagnosis.sessions.record import (
    llm_usage_totals,
    session_self_evaluation,
    session_self_evaluation_save,
)
from diagnosis.storable import nul_free

logger = logging.getLogger(__name__)


class SessionCancelled(Exception):
    pass


class SessionBusy(Exception):
    """Another live worker is running this session; look again later."""


class _Run:
    """What the stages of one run share: the session, its agents, progress, the record."""

    def __init__(
        self,
        *,
        session: DiagnosisSession,
        agents: dict[Role, Agent],
        evaluation: SelfEvaluation,
    ) -> None:
        self.session = session
        self.agents = agents
        self.evaluation = evaluation
        self.events = SessionEventLog(session, owned=True)
        self.attempt = 0
        self.restarts = 0
        # A first run's session has no model calls yet (a takeover counts restarts).
        self.recorder: CallRecorder = llm_call_recorder(
            session=session,
            attempt_getter=lambda: self.attempt,
            last=0 if not session.restarts else None,
        )

    def event(self, kind: str, stage: str, message: str = "", **data: Any) -> None:
        self.events.add(kind=kind, stage=stage, message=message, data=data)

    def stage(self, stage: str) -> None:
        """Enter ``stage``: one UPDATE (the stage, the heartbeat, the fields saved since the
        last stage; it also checks for a requested cancel) and one INSERT of its event."""
        if not self.events.beat(force=True, unless_cancelled=True, stage=stage):
            raise SessionCancelled
        self.session.stage = stage
        self.event(SessionEvent.Kind.STAGE, stage, stage)

    def check_cancelled(self) -> None:
        if self.events.cancel_requested():
            raise SessionCancelled

    def hinted_services(self) -> list[str]:
        """The services the requester named in the context."""
        return [s for s in self.session.context.get("services") or [] if isinstance(s, str)]

    def known_services(self) -> list[str]:
        """The environment's services, plus any the requester named."""
        return list(
            dict.fromkeys([*(self.session.environment.services or []), *self.hinted_services()])
        )

    def save(self, *fields: str) -> None:
        """Write these session fields with the next stage's UPDATE: a stage ends in code
        (parsing, the Gatekeeper, the router) and the next one starts at once."""
        for name in fields:  # model text may hold NUL, which PostgreSQL cannot store
            setattr(self.session, name, nul_free(getattr(self.session, name)))
        self.events.fields_defer(**{name: getattr(self.session, name) for name in fields})

    def record(self) -> None:
        session_self_evaluation_save(session=self.session, evaluation=self.evaluation, save=False)
        self.events.fields_defer(self_evaluation=self.session.self_evaluation)


def _run_start(session: DiagnosisSession) -> _Run:
    evaluation = session_self_evaluation(session)
    evaluation.attempts = list(evaluation.attempts)  # always recorded, even when empty
    agents = selection.agents_for_session(session=session, provider=session.context.get("provider"))
    run = _Run(session=session, agents=agents, evaluation=evaluation)
    if session.restarts:
        restart = RestartRecord(at=rfc3339(timezone.now()), previous_attempts=session.attempt_count)
        evaluation.restarts = [*evaluation.restarts, restart]
        run.attempt = session.attempt_count  # a restart starts a new attempt number
    run.restarts = len(evaluation.restarts)
    return run


# --- the stages, as this run calls them ------------------------------------------------


def _plan(run: _Run) -> PlannerResult:
    run.stage(DiagnosisSession.Stage.PLANNER)
    session = run.session
    context = session.context
    now = time_parse(context.get("now")) or timezone.now()
    request = PlannerRequest(
        question=session.original_query,
        language=session.language,
        now=rfc3339(now),
        window=context.get("window_hint") or context.get("window"),
        services=run.known_services(),
        history=list(context.get("history") or []),
        alert=context.get("alert"),
    )
    planned = planner_stage(
        request=request,
        agent=run.agents[Role.PLANNER],
        recorder=run.recorder,
        now=now,
        hinted_services=run.hinted_services(),
    )
    session.plan = {
        "status": planned.status,
        "detail": planned.detail[:500],
        **detail_coded(planned),
        "plan": planned.plan.model_dump(mode="json") if planned.plan else None,
        "window": planned.window,
    }
    session.context = {
        **context,
        "now": rfc3339(now),
        "window_hint": context.get("window_hint", request.window),
        "window": planned.window,
    }
    run.save("plan", "context")
    return planned


def _tool_runner(run: _Run) -> ToolRunner:
    # Each call is one INSERT. The first attempt starts at 0: a session's invocations come
    # after its attempt_count is saved, so a takeover runs attempt 2 or later.
    counter = invoke.InvocationCounter(last=0 if run.attempt == 1 else None)

    def run_tool(name: str, arguments: object) -> ToolResult:
        run.check_cancelled()
        shown = arguments if isinstance(arguments, dict) else {"raw": str(arguments)[:200]}
        run.event(SessionEvent.Kind.TOOL_CALL, "executor", str(name)[:50], arguments=shown)
        result = invoke.tool_invoke(
            session=run.session,
            attempt=run.attempt,
            tool_name=name,
            arguments=arguments,
            counter=counter,
        )
        run.event(
            SessionEvent.Kind.TOOL_RESULT,
            "executor",
            f"{result.trace_ref} {result.tool_name}: {result.status}",
            trace_ref=result.trace_ref,
            status=result.status,
            invocation_id=result.invocation_id,
        )
        return result

    return run_tool


def _execute(
    run: _Run, planned: PlannerResult, retry_context: dict[str, Any] | None
) -> ExecutorResult:
    run.attempt += 1
    session = run.session
    session.attempt_count = run.attempt
    run.save("attempt_count")
    run.stage(DiagnosisSession.Stage.EXECUTOR)
    request = ExecutorRequest(
        question=session.original_query,
        language=session.language,
        now=session.context["now"],
        window=planned.window,
        plan=planned.plan.model_dump(mode="json") if planned.plan else {},
        services=run.known_services(),
        attempt=run.attempt,
        retry_context=retry_context,
        call_edges=environment_call_edges(
            environment=session.environment,
            # the window effective_window made: two RFC 3339 times
            start=timeutil.time_parse(planned.window["start"]),
            end=timeutil.time_parse(planned.window["end"]),
        ),
        has_traces=environment_has_traces(session.environment),
    )
    executed = executor_stage(
        request=request,
        agent=run.agents[Role.EXECUTOR],
        recorder=run.recorder,
        tools=_tool_runner(run),
        tool_specs=invoke.tool_specs(),
    )
    session.executor_final_answer = executed.raw
    session.executor_structured_output = executed.parsed.raw_object
    session.executor_output_parse_status = executed.parsed.status.value
    run.save("executor_final_answer", "executor_structured_output", "executor_output_parse_status")
    return executed


def _gatekeep(run: _Run, parsed: ParsedExecutorOutput) -> GatekeeperReport:
    run.stage(DiagnosisSession.Stage.GATEKEEPER)
    report = gatekeeper_stage(session=run.session, parsed=parsed)
    run.evaluation.gatekeeper = report
    run.record()
    run.event(
        SessionEvent.Kind.INFO,
        "gatekeeper",
        f"accepted {report.counts.accepted} / demoted {report.counts.demoted}",
        counts=report.counts.model_dump(),
    )
    return report


def _verify(
    run: _Run,
    executed: ExecutorResult,
    report: GatekeeperReport,
    retry_context: dict[str, Any] | None,
) -> VerifierResult:
    run.stage(DiagnosisSession.Stage.VERIFIER)
    payload = verifier_payload_build(
        session=run.session,
        raw=executed.raw,
        parsed=executed.parsed,
        report=report,
        retry_context=retry_context,
    )
    return verifier_stage(payload=payload, agent=run.agents[Role.VERIFIER], recorder=run.recorder)


def _route(run: _Run, verified: VerifierResult, report: GatekeeperReport) -> RouteResult:
    return route(
        verifier=verified.output,
        verifier_status=verified.status,
        gatekeeper=report,
        retries_used=max(0, run.attempt - 1 - run.restarts),
        max_retries=settings.DIAGNOSIS_MAX_RETRIES,
    )


def _attempt_record(
    run: _Run,
    executed: ExecutorResult,
    report: GatekeeperReport,
    verified: VerifierResult,
    routed: RouteResult,
    retry_context: dict[str, Any] | None,
) -> None:
    """What this attempt found, as the Verifier's evaluation and one more attempt record."""
    verifier, parsed = verified.output, executed.parsed
    run.evaluation.verifier_evaluation = VerifierEvaluation.model_validate(
        {
            "status": verified.status,
            "detail": verified.detail[:1000],
            **detail_coded(verified),
            "payload_keys": sorted(verified.payload.model_dump().keys()),
            "decision": verifier.decision.value if verifier else None,
            "routed_decision": routed.decision.value,
            "route_notes": list(routed.notes),
            "route_note_codes": [n.model_dump() for n in routed.note_codes],
            "claim_checks": [c.model_dump(mode="json") for c in verifier.claim_checks]
            if verifier
            else [],
            "extra_facts": verifier.extra_facts if verifier else [],
            "summary": verifier.summary if verifier else "",
            "retry_request": verifier.retry_request.model_dump(mode="json")
            if verifier and verifier.retry_request
            else None,
        }
    )
    attempt = AttemptRecord.model_validate(
        {
            "attempt": run.attempt,
            "executor_error": executed.error,
            "parse_status": parsed.status.value,
            "gatekeeper_counts": report.counts.model_dump(),
            "verifier_status": verified.status,
            "verifier_decision": verifier.decision.value if verifier else None,
            "routed_decision": routed.decision.value,
            "retry_context": retry_context,
            "structured_output": parsed.raw_object,
            "gatekeeper": report.model_dump(mode="json"),
        }
    )
    run.evaluation.attempts = [*run.evaluation.attempts, attempt]
    run.record()


@dataclass(frozen=True)
class _Verdict:
    """The last attempt: its Executor answer, Gatekeeper report, Verifier verdict and route."""

    executed: ExecutorResult
    report: GatekeeperReport
    verified: VerifierResult
    routed: RouteResult


def _attempts(run: _Run, planned: PlannerResult) -> _Verdict:
    """Executor → Gatekeeper → Verifier → router, again while the router says RETRY."""
    retry_context: dict[str, Any] | None = None
    while True:
        executed = _execute(run, planned, retry_context)
        report = _gatekeep(run, executed.parsed)
        verified = _verify(run, executed, report, retry_context)
        routed = _route(run, verified, report)
        _attempt_record(run, executed, report, verified, routed, retry_context)
        if routed.decision != Decision.RETRY:
            return _Verdict(executed=executed, report=report, verified=verified, routed=routed)
        retry_context = routed.retry_context
        run.event(SessionEvent.Kind.INFO, "verifier", "retry", **(retry_context or {}))


def _scoped_decision(run: _Run, decision: Decision, unknown: list[str]) -> Decision:
    """No tool can see a service the environment lacks: never a PASS about it."""
    if not unknown:
        return decision
    run.evaluation.scope = ScopeRecord(unknown_services=unknown)
    evaluation = run.evaluation.verifier_evaluation
    if decision == Decision.PASS and evaluation is not None:
        decision = Decision.LOW_CONFID
        text, code = scope_note(unknown)
        evaluation.route_notes = [*evaluation.route_notes, text]
        evaluation.route_note_codes = [*evaluation.route_note_codes, code]
        evaluation.routed_decision = decision
    return decision


def _filtered(run: _Run, decision: Decision, verdict: _Verdict) -> FilterResult:
    filtered = composer_input_build(
        question=run.session.original_query,
        language=run.session.language,
        decision=decision,
        executor_output=verdict.executed.parsed.output,
        gatekeeper=verdict.report,
        verifier=verdict.verified.output,
        services=run.known_services(),
    )
    evaluation = run.evaluation.verifier_evaluation
    if evaluation is not None:
        evaluation.disagreements = [Disagreement.model_validate(d) for d in filtered.disagreements]
        evaluation.placements = dict(filtered.placements)
    run.evaluation.composer_input = filtered.composer_input
    return filtered


def _compose(run: _Run, composer_input: ComposerInput) -> ComposerResult:
    run.stage(DiagnosisSession.Stage.COMPOSER)
    composed = composer_stage(
        composer_input=composer_input,
        agent=run.agents[Role.COMPOSER],
        recorder=run.recorder,
        known_services=run.known_services(),
    )
    if run.evaluation.verifier_evaluation is not None:
        run.evaluation.verifier_evaluation.composer_output = composed.snapshot
    return composed


def _answer_framed(run: _Run, answer: str, unknown: list[str], window: dict[str, str]) -> str:
    """The answer with the scope notices: services the environment lacks, the window read."""
    session = run.session
    if unknown:
        notice = unknown_services_notice(
            services=unknown, environment=session.environment.slug, language=session.language
        )
        answer = f"{notice}\n\n{answer}"
    looked_at = window_notice(window=window, language=session.language)
    if looked_at:
        answer = f"{answer.rstrip()}\n\n{looked_at}\n"
    return answer


def _flow(run: _Run) -> CompletedOutcome:
    """Planner → attempts (Executor, Gatekeeper, Verifier, router) → filter → Composer."""
    planned = _plan(run)
    verdict = _attempts(run, planned)
    unknown = services_unknown(
        question=run.session.original_query,
        planned=planned.plan.services if planned.plan else [],
        known=run.known_services(),
    )
    decision = _scoped_decision(run, verdict.routed.decision, unknown)
    filtered = _filtered(run, decision, verdict)
    composed = _compose(run, filtered.composer_input)
    return CompletedOutcome(
        decision=decision,
        answer=_answer_framed(run, composed.answer, unknown, planned.window),
        answer_source=composed.snapshot.source,
        root_cause_status=root_cause_status(filtered.composer_input),
        evaluation=run.evaluation,
        llm_usage=llm_usage_totals(session=run.session),
    )


def flow_run(*, session: DiagnosisSession) -> CompletedOutcome | CancelledOutcome:
    """Run the flow of a claimed session to its terminal row; how it ended."""
    run = _run_start(session)
    try:
        with run_commits_unflushed():  # the ending below is flushed as always
            outcome = _flow(run)
    except SessionCancelled:
        with contextlib.suppress(DatabaseError, SessionLost):  # best effort: the ending matters
            run.events.flush()  # what the run did before the cancel stays recorded
        with transaction.atomic():
            locked = DiagnosisSession.objects.select_for_update().get(pk=session.pk)
            if not locked.is_terminal and locked.runner == session.runner:
                session_finish(session=locked, outcome=CancelledOutcome())
        session.refresh_from_db()
        return CancelledOutcome()
    except SessionLost:
        raise  # another runner's (or the reaper's) now: nothing more is written
    except Exception:
        # What the run did before the failure stays recorded for review (best effort:
        # the failure may be the database's); diagnosis_run ends the session failed.
        with contextlib.suppress(DatabaseError):
            run.events.flush()
        raise
    session_finish(session=session, outcome=outcome, events=run.events, runner=session.runner)
    return outcome


def diagnosis_run(*, session_id: int) -> DiagnosisSession | None:
    """Run the flow for one session id (idempotent: a finished session is skipped).

    Raises ``SessionBusy`` when a live worker holds the session: a duplicate delivery
    must not drop the task, because that worker may still die before finishing.
    """
    session = session_claim(session_id=session_id)
    if session is None:
        if DiagnosisSession.objects.filter(
            pk=session_id, status=DiagnosisSession.Status.RUNNING
        ).exists():
            raise SessionBusy(session_id)
        return None
    try:
        flow_run(session=session)
    except SessionLost:
        logger.warning("diagnosis %s is no longer this worker's: its run stopped", session_id)
    except SoftTimeLimitExceeded:
        raise  # the task ends the session failed with the "timeout" code
    except Exception as exc:  # the flow records its own errors; this is the last line
        logger.exception("diagnosis %s failed", session_id)
        session_fail(session_id=session_id, error=f"{type(exc).__name__}: {exc}")
    return DiagnosisSession.objects.get(pk=session_id)
