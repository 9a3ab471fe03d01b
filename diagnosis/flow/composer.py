"""The Composer stage: the answer written from the filtered input, or the renderer's.

A Composer answer that fails to parse, fails, or fails the guard is replaced by
the deterministic renderer's answer from the same input; the snapshot says which.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis.contracts import (
    AnswerSource,
    ComposerInput,
    ComposerOutput,
    ComposerOutputSnapshot,
    ComposerStatus,
)
from diagnosis.flow.agent import role_ask
from diagnosis.flow.guard import composer_guard
from diagnosis.flow.renderer import answer_render
from diagnosis.llm.base import Agent, CallRecorder, LLMError, Role
from diagnosis.llm.parsing import model_output_parse
from diagnosis.llm.prompts import prompt_messages


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
    composer_input: ComposerInput, status: ComposerStatus, findings: list[str]
) -> ComposerResult:
    snapshot = ComposerOutputSnapshot(
        status=status,
        source=AnswerSource.FALLBACK,
        final_answer=answer_render(composer_input),
        guard_findings=findings,
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
            contract=ComposerOutput,
            recorder=recorder,
        )
        parsed = model_output_parse(raw, ComposerOutput)
    except LLMError as exc:
        return _fallback(composer_input, ComposerStatus.ERROR, [f"{exc.status}: {exc}"[:300]])
    output = parsed.output
    if output is None:
        return _fallback(
            composer_input, ComposerStatus.MALFORMED, [f"{parsed.status}: {parsed.detail[:300]}"]
        )
    findings = composer_guard(
        answer=output.final_answer, composer_input=composer_input, known_services=known_services
    )
    if findings:
        return _fallback(composer_input, ComposerStatus.GUARD_FAILED, findings)
    snapshot = ComposerOutputSnapshot(
        status=ComposerStatus.OK, source=AnswerSource.COMPOSER, final_answer=output.final_answer
    )
    return ComposerResult(answer=output.final_answer, snapshot=snapshot)
