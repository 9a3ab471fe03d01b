"""The flow for one claimed session, stage by stage, everything persisted.

Each stage is called with typed inputs and its raw output is parsed tolerantly.
A malformed or failed stage becomes a recorded status and a safe fallback; the
only way out of ``flow_run`` is a terminal session (or an exception that the
service turns into one).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from diagnosis.callbacks.services import session_ended_notify
from diagnosis.contracts import AnswerSource as Source
from diagnosis.contracts import (
    ComposerInput,
    ComposerOutput,
    ComposerOutputSnapshot,
    ComposerStatus,
    Decision,
    ExecutorEvidenceV2,
    GatekeeperReport,
    PlannerOutput,
    TraceSummaryEntry,
    VerifierOutput,
    VerifierPayload,
)
from diagnosis.flow.composer_filter import composer_input_build
from diagnosis.flow.guard import composer_guard
from diagnosis.flow.renderer import answer_render
from diagnosis.flow.router import RouteResult, route
from diagnosis.flow.scope import (
    root_cause_status,
    services_unknown,
    unknown_services_notice,
    window_notice,
)
from diagnosis.llm.base import AgentProvider, ExecutorRequest, LLMError, PlannerRequest, Role
from diagnosis.models import DiagnosisSession, LLMCall, SessionEvent
from diagnosis.services import SessionEventLog, rfc3339
from diagnosis.storable import nul_free


class SessionCancelled(Exception):
    pass


def text_bound(text: str, limit: int) -> str:
    """Keep the head and the tail of an over-long text, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters cut …]\n{text[-half:]}"


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def effective_window(
    *, plan: PlannerOutput | None, hint: dict[str, Any] | None, now: datetime
) -> dict[str, str]:
    """The Planner's window when it is sane, else the hint, else the 30 minutes before now."""
    for candidate in (plan.window.model_dump() if plan and plan.window else None, hint):
        if not isinstance(candidate, dict):
            continue
        start, end = _parse_time(candidate.get("start")), _parse_time(candidate.get("end"))
        if start and end and start < end and end - start <= timedelta(days=7):
            return {"start": rfc3339(start), "end": rfc3339(end)}
    return {"start": rfc3339(now - timedelta(minutes=30)), "end": rfc3339(now)}


class _Run:
    """State of one flow run; methods are the stages."""

    def __init__(self, session: DiagnosisSession) -> None:
        from diagnosis.llm.selection import agents_for_session

        self.session = session
        self.agents: dict[Role, AgentProvider] = agents_for_session(
            session=session, provider=session.context.get("provider")
        )
        self.attempt = 0
        self.events = SessionEventLog(session)
        from diagnosis.llm.recorder import llm_call_recorder

        self.recorder = llm_call_recorder(session=session, attempt_getter=lambda: self.attempt)
        self.evaluation: dict[str, Any] = dict(session.self_evaluation or {})
        self.evaluation.setdefault("attempts", [])
        if session.restarts:
            self.evaluation.setdefault("restarts", []).append(
                {"at": rfc3339(timezone.now()), "previous_attempts": session.attempt_count}
            )
            self.attempt = session.attempt_count  # a restart starts a new attempt number

    # --- helpers -------------------------------------------------------------
    def event(self, kind: str, stage: str, message: str = "", **data: Any) -> None:
        self.events.add(kind=kind, stage=stage, message=message, data=data)

    def stage(self, stage: str) -> None:
        if not self.events.beat(force=True, unless_cancelled=True, stage=stage):
            raise SessionCancelled
        self.session.stage = stage
        self.event(SessionEvent.Kind.STAGE, stage, stage)

    def check_cancelled(self) -> None:
        flag = (
            DiagnosisSession.objects.filter(pk=self.session.pk)
            .values_list("cancel_requested", flat=True)
            .first()
        )
        if flag:
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
        for name in fields:  # model text may hold NUL, which PostgreSQL cannot store
            setattr(self.session, name, nul_free(getattr(self.session, name)))
        self.session.save(update_fields=list(fields))

    # --- stages --------------------------------------------------------------
    def plan(self) -> tuple[PlannerOutput | None, dict[str, str]]:
        from diagnosis.flow.parsing import model_output_parse

        self.stage(DiagnosisSession.Stage.PLANNER)
        context = self.session.context
        now = _parse_time(context.get("now")) or timezone.now()
        request = PlannerRequest(
            question=self.session.original_query,
            language=self.session.language,
            now=rfc3339(now),
            window=context.get("window_hint") or context.get("window"),
            services=self.known_services(),
            history=list(context.get("history") or []),
            alert=context.get("alert"),
        )
        status, plan, detail = "error", None, ""
        try:
            raw = self.agents[Role.PLANNER].plan(request, recorder=self.recorder)
            status, parsed, detail = model_output_parse(raw, PlannerOutput)
            plan = parsed if isinstance(parsed, PlannerOutput) else None
        except LLMError as exc:
            status, detail = exc.status, str(exc)
        hinted = self.hinted_services()
        if plan is not None and not plan.services and hinted:
            plan.services = hinted  # the requester named the services; the Planner named none
        window = effective_window(plan=plan, hint=request.window, now=now)
        self.session.plan = {
            "status": status,
            "detail": detail[:500],
            "plan": plan.model_dump(mode="json") if plan else None,
            "window": window,
        }
        context = dict(context)
        context["now"] = rfc3339(now)
        context.setdefault("window_hint", request.window)
        context["window"] = window
        self.session.context = context
        self.save("plan", "context")
        return plan, window

    def execute(
        self, plan: PlannerOutput | None, window: dict[str, str], retry_context: dict | None
    ):
        from diagnosis.evidence.registry import tool_invoke, tool_specs
        from diagnosis.evidence.topology import environment_call_edges
        from diagnosis.flow.parsing import executor_output_parse

        self.attempt += 1
        self.session.attempt_count = self.attempt
        self.save("attempt_count")
        self.stage(DiagnosisSession.Stage.EXECUTOR)

        def run_tool(name: str, arguments: object):
            self.check_cancelled()
            shown = arguments if isinstance(arguments, dict) else {"raw": str(arguments)[:200]}
            self.event(SessionEvent.Kind.TOOL_CALL, "executor", str(name)[:50], arguments=shown)
            result = tool_invoke(
                session=self.session, attempt=self.attempt, tool_name=name, arguments=arguments
            )
            self.event(
                SessionEvent.Kind.TOOL_RESULT,
                "executor",
                f"{result.trace_ref} {result.tool_name}: {result.status}",
                trace_ref=result.trace_ref,
                status=result.status,
                invocation_id=result.invocation_id,
            )
            return result

        request = ExecutorRequest(
            question=self.session.original_query,
            language=self.session.language,
            now=self.session.context["now"],
            window=window,
            plan=plan.model_dump(mode="json") if plan else {},
            services=self.known_services(),
            attempt=self.attempt,
            retry_context=retry_context,
            call_edges=environment_call_edges(environment=self.session.environment),
        )
        error = ""
        try:
            raw = self.agents[Role.EXECUTOR].execute(
                request, tools=run_tool, tool_specs=tool_specs(), recorder=self.recorder
            )
        except LLMError as exc:
            raw, error = "", f"{exc.status}: {exc}"
        parsed = executor_output_parse(raw)
        self.session.executor_final_answer = raw or ""
        self.session.executor_structured_output = parsed.raw_object
        self.session.executor_output_parse_status = parsed.status.value
        self.save(
            "executor_final_answer", "executor_structured_output", "executor_output_parse_status"
        )
        return raw or "", parsed, error

    def gatekeep(self, parsed) -> GatekeeperReport:
        from diagnosis.flow.gatekeeper import gatekeeper_run

        self.stage(DiagnosisSession.Stage.GATEKEEPER)
        report = gatekeeper_run(session=self.session, parsed=parsed)
        self.event(
            SessionEvent.Kind.INFO,
            "gatekeeper",
            f"accepted {report.counts.accepted} / demoted {report.counts.demoted}",
            counts=report.counts.model_dump(),
        )
        return report

    def verify(
        self, raw: str, parsed, report: GatekeeperReport, retry_context: dict | None
    ) -> tuple[str, VerifierOutput | None, str, VerifierPayload]:
        from diagnosis.flow.parsing import model_output_parse
        from diagnosis.flow.trace_summary import trace_summary_build

        self.stage(DiagnosisSession.Stage.VERIFIER)
        payload = VerifierPayload(
            original_query=self.session.original_query,
            executor_final_answer=text_bound(raw, settings.DIAGNOSIS_VERIFIER_ANSWER_MAX_CHARS),
            executor_structured_output=parsed.raw_object,
            executor_output_parse_status=parsed.status,
            gatekeeper=report,
            tool_trace_summary=[
                TraceSummaryEntry.model_validate(entry)
                for entry in trace_summary_build(session=self.session)
            ],
            retry_context=retry_context,
        )
        try:
            raw_v = self.agents[Role.VERIFIER].verify(payload, recorder=self.recorder)
            status, output, detail = model_output_parse(raw_v, VerifierOutput)
        except LLMError as exc:
            status, output, detail = exc.status, None, str(exc)
        verifier = output if isinstance(output, VerifierOutput) else None
        return status, verifier, detail, payload

    def compose(self, composer_input: ComposerInput) -> tuple[str, ComposerOutputSnapshot]:
        from diagnosis.flow.parsing import model_output_parse

        self.stage(DiagnosisSession.Stage.COMPOSER)
        services = self.known_services()
        try:
            raw = self.agents[Role.COMPOSER].compose(composer_input, recorder=self.recorder)
            status, output, detail = model_output_parse(raw, ComposerOutput)
        except LLMError as exc:
            status, output, detail = "error", None, f"{exc.status}: {exc}"
        findings: list[str] = []
        if isinstance(output, ComposerOutput):
            findings = composer_guard(
                answer=output.final_answer, composer_input=composer_input, known_services=services
            )
            if not findings:
                snapshot = ComposerOutputSnapshot(
                    status=ComposerStatus.OK,
                    source=Source.COMPOSER,
                    final_answer=output.final_answer,
                )
                return output.final_answer, snapshot
            composer_status = ComposerStatus.GUARD_FAILED
        elif status == "error":
            composer_status = ComposerStatus.ERROR
            findings = [detail[:300]]
        else:
            composer_status = ComposerStatus.MALFORMED
            findings = [f"{status}: {detail[:300]}"]
        answer = answer_render(composer_input)
        snapshot = ComposerOutputSnapshot(
            status=composer_status,
            source=Source.FALLBACK,
            final_answer=answer,
            guard_findings=findings,
        )
        return answer, snapshot

    # --- the whole flow ----------------------------------------------------------
    def run(self) -> None:
        plan, window = self.plan()
        retry_context: dict[str, Any] | None = None
        max_retries = settings.DIAGNOSIS_MAX_RETRIES
        while True:
            raw, parsed, executor_error = self.execute(plan, window, retry_context)
            report = self.gatekeep(parsed)
            v_status, verifier, v_detail, payload = self.verify(raw, parsed, report, retry_context)
            retries_used = self.attempt - 1 - len(self.evaluation.get("restarts", []))
            routed: RouteResult = route(
                verifier=verifier,
                verifier_status=v_status,
                gatekeeper=report,
                retries_used=max(0, retries_used),
                max_retries=max_retries,
            )
            self.evaluation["gatekeeper"] = report.model_dump(mode="json")
            self.evaluation["verifier_evaluation"] = {
                "status": v_status,
                "detail": v_detail[:1000],
                "payload_keys": sorted(payload.model_dump().keys()),
                "decision": verifier.decision.value if verifier else None,
                "routed_decision": routed.decision.value,
                "route_notes": routed.notes,
                "claim_checks": [c.model_dump(mode="json") for c in verifier.claim_checks]
                if verifier
                else [],
                "extra_facts": verifier.extra_facts if verifier else [],
                "summary": verifier.summary if verifier else "",
                "retry_request": verifier.retry_request.model_dump(mode="json")
                if verifier and verifier.retry_request
                else None,
            }
            self.evaluation["attempts"].append(
                {
                    "attempt": self.attempt,
                    "executor_error": executor_error,
                    "parse_status": parsed.status.value,
                    "gatekeeper_counts": report.counts.model_dump(),
                    "verifier_status": v_status,
                    "verifier_decision": verifier.decision.value if verifier else None,
                    "routed_decision": routed.decision.value,
                    "retry_context": retry_context,
                    "structured_output": parsed.raw_object,
                    "gatekeeper": report.model_dump(mode="json"),
                }
            )
            self.session.self_evaluation = self.evaluation
            self.save("self_evaluation")
            if routed.decision == Decision.RETRY:
                retry_context = routed.retry_context
                self.event(SessionEvent.Kind.INFO, "verifier", "retry", **routed.retry_context)
                continue
            break

        decision = routed.decision
        unknown = services_unknown(
            question=self.session.original_query,
            planned=plan.services if plan else [],
            known=self.known_services(),
        )
        if unknown:
            # No tool can see a service the environment lacks: never a PASS about it.
            self.evaluation["scope"] = {"unknown_services": unknown}
            if decision == Decision.PASS:
                decision = Decision.LOW_CONFID
                self.evaluation["verifier_evaluation"]["route_notes"].append(
                    "question names services the environment lacks: PASS became LOW_CONFID"
                )
                self.evaluation["verifier_evaluation"]["routed_decision"] = decision.value
        executor_output: ExecutorEvidenceV2 | None = parsed.output
        filtered = composer_input_build(
            question=self.session.original_query,
            language=self.session.language,
            decision=decision,
            executor_output=executor_output,
            gatekeeper=report,
            verifier=verifier,
        )
        evaluation = self.evaluation["verifier_evaluation"]
        evaluation["disagreements"] = filtered.disagreements
        evaluation["placements"] = filtered.placements
        self.evaluation["composer_input"] = filtered.composer_input.model_dump(mode="json")
        answer, snapshot = self.compose(filtered.composer_input)
        evaluation["composer_output"] = snapshot.model_dump(mode="json")
        if unknown:
            notice = unknown_services_notice(
                services=unknown,
                environment=self.session.environment.slug,
                language=self.session.language,
            )
            answer = f"{notice}\n\n{answer}"
        looked_at = window_notice(window=window, language=self.session.language)
        if looked_at:
            answer = f"{answer.rstrip()}\n\n{looked_at}\n"
        self.finish(decision, answer, snapshot, root_cause_status(filtered.composer_input))

    def finish(
        self,
        decision: Decision,
        answer: str,
        snapshot: ComposerOutputSnapshot,
        root_cause: str,
    ) -> None:
        with transaction.atomic():
            session = self.session
            session.decision = decision.value
            session.root_cause_status = root_cause
            session.final_answer = nul_free(answer)
            session.answer_source = snapshot.source.value
            session.self_evaluation = nul_free(self.evaluation)
            session.llm_usage = llm_usage_totals(session=session)
            session.status = DiagnosisSession.Status.COMPLETED
            session.stage = DiagnosisSession.Stage.DONE
            session.finished_at = timezone.now()
            session.save(
                update_fields=[
                    "decision",
                    "root_cause_status",
                    "final_answer",
                    "answer_source",
                    "self_evaluation",
                    "llm_usage",
                    "status",
                    "stage",
                    "finished_at",
                ]
            )
            self.event(SessionEvent.Kind.STAGE, "done", decision.value)
            session_ended_notify(session=session)


def llm_usage_totals(*, session: DiagnosisSession) -> dict[str, Any]:
    rows = (
        LLMCall.objects.filter(session=session)
        .values("role")
        .annotate(
            calls=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            latency_ms=Sum("latency_ms"),
        )
        .order_by("role")
    )
    per_role = {
        row["role"]: {
            "calls": row["calls"],
            "tokens_in": row["tokens_in"] or 0,
            "tokens_out": row["tokens_out"] or 0,
            "latency_ms": row["latency_ms"] or 0,
        }
        for row in rows
    }
    totals = {
        key: sum(role[key] for role in per_role.values())
        for key in ("calls", "tokens_in", "tokens_out", "latency_ms")
    }
    return {"roles": per_role, "total": totals}


def flow_run(*, session: DiagnosisSession) -> None:
    from diagnosis.services import session_cancel_finish

    try:
        _Run(session).run()
    except SessionCancelled:
        with transaction.atomic():
            locked = DiagnosisSession.objects.select_for_update().get(pk=session.pk)
            if not locked.is_terminal:
                session_cancel_finish(session=locked)
        session.refresh_from_db()
