"""The Verifier stage: a second model judges the checked claims against the trace summary.

What it may see is exactly a ``VerifierPayload`` (never the Planner's or the
Executor's reasoning); the trace summary it reads is built by
``diagnosis.flow.trace_summary``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from diagnosis.contracts import (
    Finding,
    GatekeeperReport,
    TraceSummaryEntry,
    VerifierOutput,
    VerifierPayload,
)
from diagnosis.flow import trace_summary
from diagnosis.flow.agent import role_ask
from diagnosis.flow.parsing import ParsedExecutorOutput
from diagnosis.llm.base import Agent, CallRecorder, LLMError, Role
from diagnosis.llm.parsing import Params, model_output_parse
from diagnosis.llm.prompts import prompt_messages
from diagnosis.models import DiagnosisSession

# The contract this stage's answer is asked for and read with.
CONTRACT = VerifierOutput


@dataclass(frozen=True)
class VerifierResult:
    """The Verifier's verdict (None when unusable), its parse status and detail, its payload."""

    status: str
    output: VerifierOutput | None
    detail: str
    payload: VerifierPayload
    # ``detail`` as a code and its parameters when the answer did not parse (parsing.Parsed)
    detail_code: str = ""
    detail_params: Params = field(default_factory=dict)


def text_bound(text: str, limit: int) -> str:
    """Keep the head and the tail of an over-long text, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters cut …]\n{text[-half:]}"


def _findings_worded(findings: list[Finding]) -> list[Finding]:
    return [f.model_copy(update={"detail_code": None, "detail_params": {}}) for f in findings]


def _report_worded(report: GatekeeperReport) -> GatekeeperReport:
    """The report with each finding's detail in words only, as the Verifier reads it.

    A finding's ``detail_code`` and ``detail_params`` are for pages (they say what
    ``detail`` says); the model reads the detail, so its payload stays as it was.
    """
    claims = [
        c.model_copy(update={"findings": _findings_worded(c.findings)}) for c in report.claims
    ]
    return report.model_copy(
        update={"claims": claims, "findings": _findings_worded(report.findings)}
    )


def verifier_payload_build(
    *,
    session: DiagnosisSession,
    raw: str,
    parsed: ParsedExecutorOutput,
    report: GatekeeperReport,
    retry_context: dict[str, Any] | None,
) -> VerifierPayload:
    """What the Verifier sees of this attempt: the bounded answer, the report, the trace."""
    return VerifierPayload(
        original_query=session.original_query,
        executor_final_answer=text_bound(raw, settings.DIAGNOSIS_VERIFIER_ANSWER_MAX_CHARS),
        executor_structured_output=parsed.raw_object,
        executor_output_parse_status=parsed.status,
        gatekeeper=_report_worded(report),
        tool_trace_summary=[
            TraceSummaryEntry.model_validate(entry)
            for entry in trace_summary.trace_summary_build(session=session)
        ],
        retry_context=retry_context,
    )


def verifier_messages(payload: VerifierPayload) -> list[dict[str, str]]:
    return prompt_messages("verifier", payload=payload)


def verifier_stage(
    *, payload: VerifierPayload, agent: Agent, recorder: CallRecorder
) -> VerifierResult:
    """Ask the Verifier; a failed or malformed verdict is a recorded status and no verdict."""
    try:
        raw = role_ask(
            agent=agent,
            role=Role.VERIFIER,
            request=payload,
            messages=lambda: verifier_messages(payload),
            contract=CONTRACT,
            recorder=recorder,
        )
        parsed = model_output_parse(raw, CONTRACT)
    except LLMError as exc:
        return VerifierResult(status=exc.status, output=None, detail=str(exc), payload=payload)
    return VerifierResult(
        status=parsed.status,
        output=parsed.output,
        detail=parsed.detail,
        payload=payload,
        detail_code=parsed.detail_code,
        detail_params=parsed.detail_params,
    )
