"""Reads of the diagnosis domain."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, TypeVar

from django.db import connection
from django.utils.translation import gettext
from pydantic import BaseModel, ValidationError

from config.celery import app as celery_app
from diagnosis.contracts import (
    FAILURE_CODES,
    ClaimCheck,
    ClaimFact,
    Disagreement,
    Finding,
    FindingCode,
    GatekeeperClaimResult,
    Hypothesis,
    RecommendedAction,
    Verdict,
    VerifierEvaluation,
)
from diagnosis.flow.gatekeeper import excerpt_locate
from diagnosis.flow.parsing import executor_proposals_parse
from diagnosis.models import DiagnosisSession, ToolInvocation

# the session record's reads (diagnosis.sessions.record), named here as the app's entry points
from diagnosis.sessions.record import llm_usage_totals as llm_usage_totals
from diagnosis.sessions.record import session_self_evaluation as session_self_evaluation

EXCERPT_CONTEXT_LINES = 2  # lines shown before and after an excerpt in its output
_Item = TypeVar("_Item", bound=BaseModel)


@dataclass(frozen=True)
class ComponentHealth:
    ok: bool
    detail: str


def database_health() -> ComponentHealth:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return ComponentHealth(ok=False, detail=type(exc).__name__)
    return ComponentHealth(ok=True, detail=connection.vendor)


def broker_health(*, timeout: float = 2.0) -> ComponentHealth:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            transport = conn.transport_cls
    except Exception as exc:
        return ComponentHealth(ok=False, detail=type(exc).__name__)
    return ComponentHealth(ok=True, detail=str(transport))


def session_failure_code(*, session: DiagnosisSession) -> str:
    """The stable failure code of a failed session ("" otherwise), for API clients."""
    if session.status != DiagnosisSession.Status.FAILED:
        return ""
    code = session.error.partition(":")[0]
    return code if code in FAILURE_CODES else "internal_error"


def session_failure_message(*, session: DiagnosisSession) -> str:
    """What users and API clients learn of a failed run: never the exception itself.

    The exception text stays in ``session.error`` for reviewers (admin, audit).
    """
    if session.status != DiagnosisSession.Status.FAILED:
        return ""
    return gettext(
        "诊断在运行中出错，没有得出任何经过证据校验的结论。请稍后重试；审计页面为审核人员记录了失败原因。"
    )


# --- SessionClaims: the one read model of "claims with evidence" -------------------
#
# Chat, audit, export, evaluation and the REST API render from ``session_claims``.


@dataclass(frozen=True)
class ExcerptSegment:
    text: str
    marked: bool = False


@dataclass(frozen=True)
class ExcerptLine:
    """One line of a tool output around an excerpt; ``number`` counts from 1."""

    number: int
    segments: tuple[ExcerptSegment, ...]

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments)

    @property
    def marked(self) -> bool:
        return any(segment.marked for segment in self.segments)


def _line_segments(
    output: str, begin: int, end: int, spans: Sequence[tuple[int, int]]
) -> tuple[ExcerptSegment, ...]:
    cuts = sorted({begin, end} | {min(max(p, begin), end) for span in spans for p in span})
    segments = tuple(
        ExcerptSegment(text=output[a:b], marked=any(s <= a and b <= e for s, e in spans))
        for a, b in itertools.pairwise(cuts)
    )
    return segments or (ExcerptSegment(text=""),)


def excerpt_lines(
    *,
    output: str,
    spans: Sequence[tuple[int, int]],
    context_lines: int = EXCERPT_CONTEXT_LINES,
    max_chars: int | None = None,
) -> tuple[ExcerptLine, ...]:
    """The one excerpt highlighter: the lines from the first to the last matched span,
    ``context_lines`` around them, the spans split out to be marked.

    ``max_chars`` bounds what is shown of very long lines (around the match); ``()``
    when nothing matched.
    """
    if not spans:
        return ()
    spans = sorted(spans)
    first, last = spans[0][0], spans[-1][1]
    starts = [0] + [m.end() for m in re.finditer("\n", output)]
    line_first = bisect.bisect_right(starts, first) - 1
    line_last = bisect.bisect_right(starts, max(first, last - 1)) - 1
    shown_first = max(0, line_first - context_lines)
    shown_last = min(len(starts) - 1, line_last + context_lines)

    def line_end(i: int) -> int:
        return starts[i + 1] - 1 if i + 1 < len(starts) else len(output)

    begin, end = starts[shown_first], line_end(shown_last)
    if max_chars is not None and end - begin > max_chars:
        begin = max(begin, first - max_chars // 2)
        end = min(end, max(last, begin) + max_chars // 2)
    lines = []
    for i in range(shown_first, shown_last + 1):
        a, b = max(starts[i], begin), min(line_end(i), end)
        if a <= b:
            lines.append(ExcerptLine(number=i + 1, segments=_line_segments(output, a, b, spans)))
    return tuple(lines)


def excerpt_context(
    *, excerpt: str, output: str, max_chars: int | None = None
) -> tuple[ExcerptLine, ...]:
    """Where ``excerpt`` sits in ``output``, in its lines (``()``: not found)."""
    return excerpt_lines(output=output, spans=excerpt_locate(excerpt, output), max_chars=max_chars)


@dataclass(frozen=True)
class ClaimBinding:
    """One evidence binding of a claim, resolved to the invocation its source_id names."""

    index: int  # as the model wrote it (what findings and facts cite)
    source_type: str
    source_id: str  # the trace_ref of a tool_trace binding
    tool_name: str  # as the model wrote it ("" when it gave none)
    excerpt: str
    valid: bool  # the claim was accepted and no finding names this binding
    invocation: ToolInvocation | None  # None: no invocation of the session has that trace_ref
    instruction: bool = False  # the excerpt reads as an instruction (excerpt_is_instruction)

    @property
    def invocation_id(self) -> int | None:
        return self.invocation.pk if self.invocation is not None else None

    @cached_property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """Where the excerpt sits in the invocation's output (``()``: not there)."""
        if self.invocation is None:
            return ()
        return tuple(excerpt_locate(self.excerpt, self.invocation.output))

    def output_lines(self, *, max_chars: int | None = None) -> tuple[ExcerptLine, ...]:
        """The excerpt in its lines of the invocation's output (``()``: not found)."""
        if self.invocation is None:
            return ()
        return excerpt_lines(output=self.invocation.output, spans=self.spans, max_chars=max_chars)


@dataclass(frozen=True)
class FactSegment:
    """A piece of a claim's text; a fact links to the binding that binds it."""

    text: str
    kind: str = ""  # "" for plain text, else the fact's kind (number, time, identifier, …)
    binding: int | None = None  # index of the binding that binds it; None when unbound
    via: str = ""  # "excerpt" or "argument"

    @property
    def is_fact(self) -> bool:
        return bool(self.kind)

    @property
    def bound(self) -> bool:
        return self.binding is not None


def claim_fact_segments(*, text: str, facts: Sequence[ClaimFact]) -> tuple[FactSegment, ...]:
    """The claim's text cut at its facts (gatekeeper_v2); one plain segment for a v1 report."""
    spans: list[ClaimFact] = []
    cursor = 0
    for fact in facts:
        if not cursor <= fact.start < fact.end or text[fact.start : fact.end] != fact.text:
            continue  # overlapping, or a report about other text: show it plain
        spans.append(fact)
        cursor = fact.end
    segments: list[FactSegment] = []
    cursor = 0
    for fact in spans:
        if fact.start > cursor:
            segments.append(FactSegment(text=text[cursor : fact.start]))
        segments.append(
            FactSegment(
                text=fact.text, kind=fact.kind or "fact", binding=fact.binding, via=fact.via or ""
            )
        )
        cursor = fact.end
    if cursor < len(text) or not segments:
        segments.append(FactSegment(text=text[cursor:]))
    return tuple(segments)


@dataclass(frozen=True)
class SessionClaim:
    """A claim the Executor proposed, with what each stage made of it."""

    claim_id: str
    text: str
    claim_type: str
    entity: str
    support_level: str
    verdict: str  # Gatekeeper: accepted / demoted / "" when it gave none
    findings: tuple[Finding, ...]
    facts: tuple[ClaimFact, ...]  # gatekeeper_v2: the text's facts and what binds each
    classification: str  # Verifier; "" when it gave none
    reason: str
    # allowed_claim / hypothesis / missing_info / evidence_gap / superseded_figure / dropped / ""
    placement: str
    bindings: tuple[ClaimBinding, ...]

    @property
    def allowed(self) -> bool:
        return self.placement == "allowed_claim"

    @property
    def accepted(self) -> bool:
        return self.verdict == Verdict.ACCEPTED

    @cached_property
    def segments(self) -> tuple[FactSegment, ...]:
        """The text cut at its facts, each linked to the binding that binds it."""
        return claim_fact_segments(text=self.text, facts=self.facts)


@dataclass(frozen=True)
class SessionClaims:
    """Everything the Executor proposed in its last attempt and what became of it."""

    claims: tuple[SessionClaim, ...]
    hypotheses: tuple[Hypothesis, ...]
    actions: tuple[RecommendedAction, ...]
    missing_info: tuple[str, ...]
    disagreements: tuple[Disagreement, ...]
    invocations: tuple[ToolInvocation, ...]  # every tool call of the session, in order

    @property
    def allowed(self) -> tuple[SessionClaim, ...]:
        return tuple(c for c in self.claims if c.allowed)

    @property
    def not_allowed(self) -> tuple[SessionClaim, ...]:
        return tuple(c for c in self.claims if not c.allowed)


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def valid_items(model: type[_Item], value: object) -> tuple[_Item, ...]:
    """The items of a stored list that read as ``model``; a malformed one is left out."""
    items = []
    for raw in _dicts(value):
        try:
            items.append(model.model_validate(raw))
        except ValidationError:
            continue
    return tuple(items)


def _claim_bindings(
    raw: object, *, gate: GatekeeperClaimResult | None, by_trace: dict[str, ToolInvocation]
) -> tuple[ClaimBinding, ...]:
    accepted = gate is not None and gate.verdict == Verdict.ACCEPTED
    bad = {f.binding for f in gate.findings} if gate is not None else set()
    instructions = {
        f.binding
        for f in (gate.findings if gate is not None else [])
        if f.code == FindingCode.EXCERPT_IS_INSTRUCTION.value
    }
    bindings = []
    for index, binding in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(binding, dict):
            continue
        source_id = str(binding.get("source_id", ""))
        bindings.append(
            ClaimBinding(
                index=index,
                source_type=str(binding.get("source_type", "")),
                source_id=source_id,
                tool_name=str(binding.get("tool_name") or ""),
                excerpt=str(binding.get("evidence_excerpt") or ""),
                valid=accepted and index not in bad,
                invocation=by_trace.get(source_id),
                instruction=index in instructions,
            )
        )
    return tuple(bindings)


@dataclass(frozen=True)
class _Verdicts:
    """What the Gatekeeper and the Verifier said, by claim id (the last word wins)."""

    gates: dict[str, GatekeeperClaimResult]
    checks: dict[str, ClaimCheck]
    placements: dict[str, str]
    by_trace: dict[str, ToolInvocation]


def _session_claim(claim: dict[str, Any], *, verdicts: _Verdicts) -> SessionClaim:
    claim_id = str(claim.get("claim_id", ""))
    gate = verdicts.gates.get(claim_id)
    check = verdicts.checks.get(claim_id)
    return SessionClaim(
        claim_id=claim_id,
        text=str(claim.get("claim_text", "")),
        claim_type=str(claim.get("claim_type", "")),
        entity=str(claim.get("entity") or ""),
        support_level=str(claim.get("support_level", "")),
        verdict=str(gate.verdict) if gate is not None else "",
        findings=tuple(gate.findings) if gate is not None else (),
        facts=tuple(gate.facts) if gate is not None else (),
        classification=str(check.classification) if check is not None else "",
        reason=check.reason if check is not None else "",
        placement=str(verdicts.placements.get(claim_id, "")),
        bindings=_claim_bindings(
            claim.get("evidence_bindings"), gate=gate, by_trace=verdicts.by_trace
        ),
    )


def session_claims(*, session: DiagnosisSession) -> SessionClaims:
    """The session's claims read model, in one query (the session's tool invocations).

    Claims, hypotheses, actions and missing info come from the Executor's structured
    output of the last attempt; verdicts, findings and facts from the Gatekeeper report;
    classifications, placements and disagreements from the Verifier evaluation (both
    read with ``session_self_evaluation``). Each binding carries the invocation its
    ``source_id`` (trace_ref) names; where the excerpt sits in that output is computed
    only when a page asks (``ClaimBinding.spans`` / ``output_lines``).
    """
    evaluation = session_self_evaluation(session)
    report = evaluation.gatekeeper
    verifier = evaluation.verifier_evaluation or VerifierEvaluation()
    structured = session.executor_structured_output
    structured = structured if isinstance(structured, dict) else {}
    invocations = tuple(session.invocations.order_by("sequence"))
    verdicts = _Verdicts(
        gates={g.claim_id: g for g in report.claims} if report is not None else {},
        checks={c.claim_id: c for c in verifier.claim_checks},
        placements=verifier.placements,
        by_trace={inv.trace_ref: inv for inv in invocations},
    )
    hypotheses, actions, missing = executor_proposals_parse(structured)
    return SessionClaims(
        claims=tuple(
            _session_claim(claim, verdicts=verdicts) for claim in _dicts(structured.get("claims"))
        ),
        hypotheses=tuple(hypotheses),
        actions=tuple(actions),
        missing_info=tuple(missing),
        disagreements=tuple(verifier.disagreements),
        invocations=invocations,
    )


# --- Claims as plain values (the diagnose command's JSON) -----------------------------


def _binding_plain(binding: ClaimBinding) -> dict[str, Any]:
    plain = {f.name: getattr(binding, f.name) for f in fields(binding) if f.name != "invocation"}
    return {**plain, "invocation_id": binding.invocation_id}


@dataclass(frozen=True)
class ClaimView:
    """A claim as plain values: what ``diagnose --json`` prints of it."""

    claim: SessionClaim

    def as_dict(self) -> dict[str, Any]:
        claim = self.claim
        plain = {f.name: getattr(claim, f.name) for f in fields(claim)}
        return {
            **plain,
            "findings": [f.model_dump(mode="json", exclude_unset=True) for f in claim.findings],
            "facts": [f.model_dump(mode="json", exclude_unset=True) for f in claim.facts],
            "bindings": [_binding_plain(b) for b in claim.bindings],
        }


def session_claims_view(*, session: DiagnosisSession) -> list[ClaimView]:
    """``session_claims`` as plain values (what ``diagnose --json`` prints)."""
    return [ClaimView(claim=claim) for claim in session_claims(session=session).claims]


# --- What a session records about itself (self_evaluation) ---------------------------
