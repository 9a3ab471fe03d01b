"""The Composer stage: the answer written from the filtered input, or the renderer's.

A Composer answer that fails to parse, fails or fails the guard is replaced by
the deterministic renderer's answer from the same input. One that contradicts
itself (``diagnosis.flow.coherence``) is re-rendered, and the rendering is shown
when it has fewer findings (it mends wording, not the material). The snapshot
says which, and records the coherence findings of the Composer's answer and of
the answer shown, with the answer's one certainty.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis.contracts import (
    AnswerSource,
    CoherenceFinding,
    ComposerInput,
    ComposerOutput,
    ComposerOutputSnapshot,
    ComposerStatus,
)
from diagnosis.flow.agent import role_ask
from diagnosis.flow.coherence import answer_coherence_check
from diagnosis.flow.guard import composer_guard
from diagnosis.flow.renderer import answer_render
from diagnosis.llm.base import Agent, CallRecorder, LLMError, Role
from diagnosis.llm.parsing import model_output_parse
from diagnosis.llm.prompts import prompt_messages

# The contract this stage's answer is asked for and read with.
CONTRACT = ComposerOutput


@dataclass(frozen=True)
class ComposerResult:
    """The answer shown and the audit snapshot of how it was written."""

    answer: str
    snapshot: ComposerOutputSnapshot


def composer_messages(composer_input: ComposerInput) -> list[dict[str, str]]:
    return prompt_messages(
        "composer", language=composer_input.language, composer_input=composer_input
    )


def _fallback(
    composer_input: ComposerInput,
    status: ComposerStatus,
    findings: list[str],
    composer_coherence: list[CoherenceFinding] | None = None,
    services: list[str] | None = None,
) -> ComposerResult:
    answer = answer_render(composer_input)
    found = answer_coherence_check(
        answer=answer, composer_input=composer_input, services=services or []
    )
    snapshot = ComposerOutputSnapshot(
        status=status,
        source=AnswerSource.FALLBACK,
        final_answer=answer,
        guard_findings=findings,
        composer_coherence=composer_coherence or [],
        coherence_findings=found,
        certainty=composer_input.certainty(),
    )
    return ComposerResult(answer=snapshot.final_answer, snapshot=snapshot)


def composer_stage(
    *,
    composer_input: ComposerInput,
    agent: Agent,
    recorder: CallRecorder,
    known_services: list[str],
) -> ComposerResult:
    """Ask the Composer and guard its answer; fall back to the renderer when it fails."""
    try:
        raw = role_ask(
            agent=agent,
            role=Role.COMPOSER,
            request=composer_input,
            messages=lambda: composer_messages(composer_input),
            contract=CONTRACT,
            recorder=recorder,
        )
        parsed = model_output_parse(raw, CONTRACT)
    except LLMError as exc:
        return _fallback(
            composer_input,
            ComposerStatus.ERROR,
            [f"{exc.status}: {exc}"[:300]],
            services=known_services,
        )
    output = parsed.output
    if output is None:
        return _fallback(
            composer_input,
            ComposerStatus.MALFORMED,
            [f"{parsed.status}: {parsed.detail[:300]}"],
            services=known_services,
        )
    findings = composer_guard(
        answer=output.final_answer, composer_input=composer_input, known_services=known_services
    )
    if findings:
        return _fallback(
            composer_input, ComposerStatus.GUARD_FAILED, findings, services=known_services
        )
    incoherent = answer_coherence_check(
        answer=output.final_answer, composer_input=composer_input, services=known_services
    )
    if incoherent:
        rendered = _fallback(
            composer_input, ComposerStatus.INCOHERENT, [], incoherent, known_services
        )
        # the rendering mends wording; what the material itself holds (a kind without
        # its evidence) it cannot, and then the Composer's answer stays, its findings kept
        if len(rendered.snapshot.coherence_findings) < len(incoherent):
            return rendered
    snapshot = ComposerOutputSnapshot(
        status=ComposerStatus.OK,
        source=AnswerSource.COMPOSER,
        final_answer=output.final_answer,
        composer_coherence=incoherent,
        coherence_findings=incoherent,
        certainty=composer_input.certainty(),
    )
    return ComposerResult(answer=output.final_answer, snapshot=snapshot)
