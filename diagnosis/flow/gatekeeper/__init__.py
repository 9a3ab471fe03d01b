"""The Gatekeeper: code that checks every evidence binding and every fact (docs/contracts.md §2).

Given the parsed Executor output and this session's persisted tool
invocations, every claim's bindings are checked (``excerpts``: the excerpt
occurs in the stored output; ``instructions``: it is evidence, not an
instruction), then the facts its text states (``diagnosis.facts``: numbers,
times, dates, identifiers, service names) against its valid excerpts. A claim
that fails is ``demoted`` with a finding code for each failure, and the
``gatekeeper_v2`` report is returned; the flow records it at
``session.self_evaluation["gatekeeper"]`` (``diagnosis.flow.run``).
Stored ``gatekeeper_v1`` reports read with the same model (no ``facts``).

Decisions where docs/contracts.md §2 is silent:

- ``support_level`` ``indirect`` and ``none`` claims are accepted with valid
  bindings *of any kind* (a runbook chunk is fine) and need no fact of their
  own; ``direct`` (and anything unknown, read as direct) needs a valid binding
  to a ``query_metrics`` or ``query_logs`` invocation, every binding valid and
  at least one fact. **Every** accepted claim, indirect ones included, has its
  facts bound: the Composer states an accepted inference too (bounded), so an
  invented number may not ride on an indirect claim either.
- A fact is bound by the *region of the output* a valid excerpt matched
  (``FactSource`` checks a region's edges against the output around it), or
  by the arguments of an invocation a valid binding cites. Arguments bind
  identifiers and service names only, through any argument, the free-text
  ``query`` included: the call returned output for what it named
  (docs/contracts.md §2); a time or number in the arguments (the window,
  ``limit``) is a request, not an observation, and binds nothing. Facts are
  read as people write them (``diagnosis.facts``): ``x42`` is the count 42, a
  timestamp holds its date and its clock time, whatever its form.
- The minimum length (8) counts letters, digits and CJK characters of each
  fragment (see ``excerpts``); ``...`` joining fragments does not count.
- An instruction-like excerpt (``excerpt_is_instruction``) makes its binding
  invalid, whatever the claim's support level.
- A knowledge chunk counts as returned by a ``lookup_knowledge`` invocation
  when its id is listed in the invocation's ``summary["chunks"]`` (or, for a
  summary without that list, when its header is in the output); the excerpt
  must occur inside that chunk's block of the output (the block from its
  ``=== <chunk_id> | … ===`` header to the next returned chunk's header).
- A ``tool_trace`` binding may cite a ``lookup_knowledge`` invocation by trace
  ref; it is then a knowledge binding (it cannot confirm a direct claim).
- A binding whose ``source_invocation_ids`` disagree is invalid even when its
  ``source_id`` and excerpt hold.
- Findings of a claim are reported in this order: parse findings, then
  ``duplicate_claim_id``, then per-binding findings (``binding`` is the index
  the model wrote), then ``no_bindings``/``knowledge_only_binding``/
  ``invalid_binding_beside_valid``, then ``claim_fact_unbound`` (one per
  fact, with ``fact`` set) and ``claim_not_specific``.
- ``report.claims`` is aligned by position with ``parsed.output.claims``;
  with duplicate ids, use ``gatekeeper_accepted_claims`` rather than a lookup
  by id.
- ``gatekeeper_check`` never raises; ``gatekeeper_stage`` lets database errors
  (not input errors) propagate to the flow.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from diagnosis.contracts import (
    Claim,
    Finding,
    FindingCode,
    GatekeeperClaimResult,
    GatekeeperCounts,
    GatekeeperReport,
    Hypothesis,
    ParseStatus,
    Verdict,
)
from diagnosis.flow.gatekeeper.checker import ClaimChecker
from diagnosis.flow.gatekeeper.excerpts import (
    MIN_EXCERPT_CHARS,
    MatchResult,
    excerpt_locate,
    excerpt_matches,
)
from diagnosis.flow.gatekeeper.instructions import excerpt_is_instruction
from diagnosis.flow.gatekeeper.invocations import (
    STATUS_OK,
    InvocationRecord,
    knowledge_blocks,
    knowledge_tool_is,
)
from diagnosis.flow.parsing import ClaimNotes, ParsedExecutorOutput, finding
from diagnosis.models import DiagnosisSession, ToolInvocation

__all__ = [
    "MIN_EXCERPT_CHARS",
    "STATUS_OK",
    "InvocationRecord",
    "MatchResult",
    "excerpt_is_instruction",
    "excerpt_locate",
    "excerpt_matches",
    "gatekeeper_accepted_claims",
    "gatekeeper_check",
    "gatekeeper_stage",
    "knowledge_blocks",
    "knowledge_tool_is",
]

_MAX_LOOKUP_IDS = 10_000
_MAX_DB_ID = 2**63 - 1


def _status_of(parsed: object) -> ParseStatus:
    try:
        return ParseStatus(parsed.status)  # type: ignore[attr-defined]
    except Exception:
        return ParseStatus.SCHEMA_INVALID


def _claims_of(parsed: object) -> list[Claim]:
    output = getattr(parsed, "output", None)
    claims = getattr(output, "claims", None)
    return [c for c in claims if isinstance(c, Claim)] if isinstance(claims, list) else []


def _hypotheses_of(parsed: object) -> list[tuple[int, Hypothesis]]:
    """The output's hypotheses with their positions in it (what a finding names)."""
    output = getattr(parsed, "output", None)
    hypotheses = getattr(output, "hypotheses", None)
    if not isinstance(hypotheses, list):
        return []
    return [(i, h) for i, h in enumerate(hypotheses) if isinstance(h, Hypothesis)]


def _report(
    status: ParseStatus, results: list[GatekeeperClaimResult], findings: list[Finding]
) -> GatekeeperReport:
    accepted = sum(1 for r in results if r.verdict == Verdict.ACCEPTED)
    return GatekeeperReport(
        parse_status=status,
        claims=results,
        findings=findings,
        counts=GatekeeperCounts(
            claims=len(results), accepted=accepted, demoted=len(results) - accepted
        ),
    )


def _internal_error_report(parsed: object, exc: BaseException) -> GatekeeperReport:
    detail = f"the Gatekeeper failed ({type(exc).__name__}); every claim is demoted"
    failed = finding(
        FindingCode.INTERNAL_ERROR,
        detail,
        detail_code="gatekeeper_failed",
        params={"error": type(exc).__name__},
    )
    try:
        results = [
            GatekeeperClaimResult(
                claim_id=str(c.claim_id),
                verdict=Verdict.DEMOTED,
                findings=[failed.model_copy()],
            )
            for c in _claims_of(parsed)
        ]
    except Exception:
        results = []
    return _report(_status_of(parsed), results, [failed])


def gatekeeper_check(
    *,
    parsed: ParsedExecutorOutput,
    invocations: Sequence[InvocationRecord],
    session_id: int,
    foreign_invocation_ids: Collection[int] = (),
    services: Iterable[str] = (),
) -> GatekeeperReport:
    """Check every claim of ``parsed`` against this session's invocations. Pure; never raises.

    ``invocations`` are this session's (records of another session are treated
    as foreign); ``foreign_invocation_ids`` are cited ids known to exist in
    other sessions (they give ``invocation_not_in_session`` rather than
    ``unknown_source_id``); ``services`` are the environment's service names
    (facts a claim must bind, whatever their form).
    """
    try:
        status = _status_of(parsed)
        findings = [f for f in (getattr(parsed, "dropped", None) or []) if isinstance(f, Finding)]
        if status not in (ParseStatus.PARSED_V2, ParseStatus.PARSED_V1):
            return _report(status, [], findings)
        checker = ClaimChecker(invocations, session_id, foreign_invocation_ids, services)
        notes: tuple[ClaimNotes, ...] = tuple(getattr(parsed, "claim_notes", ()) or ())
        results: list[GatekeeperClaimResult] = []
        seen: set[str] = set()
        for position, claim in enumerate(_claims_of(parsed)):
            claim_notes = notes[position] if position < len(notes) else ClaimNotes()
            try:
                result = checker.claim_check(claim, claim_notes, duplicate=claim.claim_id in seen)
            except Exception as exc:
                result = GatekeeperClaimResult(
                    claim_id=str(claim.claim_id),
                    verdict=Verdict.DEMOTED,
                    findings=[
                        finding(
                            FindingCode.INTERNAL_ERROR,
                            type(exc).__name__,
                            detail_code="claim_check_failed",
                            params={"error": type(exc).__name__},
                        )
                    ],
                )
            seen.add(claim.claim_id)
            results.append(result)
        for position, hypothesis in _hypotheses_of(parsed):
            findings.extend(checker.hypothesis_kind_check(hypothesis, position))
            findings.extend(checker.hypothesis_facts_check(hypothesis, position))
        return _report(status, results, findings)
    except Exception as exc:
        return _internal_error_report(parsed, exc)


def gatekeeper_accepted_claims(
    parsed: ParsedExecutorOutput, report: GatekeeperReport
) -> list[Claim]:
    """The claims the Gatekeeper accepted, by position (safe with duplicate ids)."""
    claims = _claims_of(parsed)
    if len(claims) != len(report.claims):
        return []
    return [
        claim
        for claim, result in zip(claims, report.claims, strict=True)
        if result.verdict == Verdict.ACCEPTED and result.claim_id == claim.claim_id
    ]


def _cited_ids(parsed: ParsedExecutorOutput) -> set[int]:
    ids: set[int] = set()
    try:
        for claim in _claims_of(parsed):
            for binding in claim.evidence_bindings or []:
                for inv_id in binding.source_invocation_ids or []:
                    if isinstance(inv_id, int) and 0 < inv_id <= _MAX_DB_ID:
                        ids.add(inv_id)
    except Exception:  # gatekeeper_check reports a malformed parse result itself
        return set()
    return ids


def session_services(*, session: DiagnosisSession) -> list[str]:
    """The service names a session's claims are checked for: its environment's and any it named."""
    environment = getattr(session, "environment", None)
    named = (session.context or {}).get("services") if isinstance(session.context, dict) else None
    names = [*(getattr(environment, "services", None) or []), *(named or [])]
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))


def gatekeeper_stage(
    *, session: DiagnosisSession, parsed: ParsedExecutorOutput
) -> GatekeeperReport:
    """Check ``parsed`` against the session's persisted invocations; the caller records it."""
    rows = ToolInvocation.objects.filter(session_id=session.pk).values_list(
        "id", "session_id", "trace_ref", "tool_name", "status", "output", "summary", "arguments"
    )
    records = [
        InvocationRecord(
            id=row[0],
            session_id=row[1],
            trace_ref=row[2],
            tool_name=row[3],
            status=row[4],
            output=row[5] or "",
            summary=row[6] if isinstance(row[6], dict) else {},
            arguments=row[7],
        )
        for row in rows
    ]
    elsewhere = sorted(_cited_ids(parsed) - {r.id for r in records})[:_MAX_LOOKUP_IDS]
    foreign: set[int] = set()
    if elsewhere:
        foreign = set(
            ToolInvocation.objects.filter(id__in=elsewhere)
            .exclude(session_id=session.pk)
            .values_list("id", flat=True)
        )
    return gatekeeper_check(
        parsed=parsed,
        invocations=records,
        session_id=session.pk,
        foreign_invocation_ids=foreign,
        services=session_services(session=session),
    )
