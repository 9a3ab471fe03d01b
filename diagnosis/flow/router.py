"""Router: turns the Verifier's decision into the session's, with code-enforced limits.

- a malformed or failed Verifier answer degrades to LOW_CONFID;
- RETRY re-runs the Executor at most ``max_retries`` times, then degrades to LOW_CONFID;
- a Verifier that passes a claim the Gatekeeper demoted has been fooled: PASS becomes
  LOW_CONFID (the claim itself is kept out by the Composer filter);
- PASS with no Gatekeeper-accepted claim is not a pass: LOW_CONFID.

Each routing note is stored as its text (``notes``, as older sessions have it) and,
at the same position, as a code with its parameters (``note_codes``): pages word
the code in their own language (``diagnosis.wording.ROUTE_NOTES``), the text stays for exports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnosis.contracts import (
    ALLOWED_CLASSIFICATIONS,
    Decision,
    FindingCode,
    GatekeeperReport,
    RouteNote,
    Verdict,
    VerifierOutput,
)
from diagnosis.llm.parsing import evidence_numbers


@dataclass(frozen=True)
class RouteResult:
    decision: Decision
    retry_context: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    note_codes: list[RouteNote] = field(default_factory=list)  # notes[i] as a code


@dataclass
class _Notes:
    texts: list[str] = field(default_factory=list)
    codes: list[RouteNote] = field(default_factory=list)

    def add(self, text: str, code: str, **params: str | int | list[str]) -> None:
        """One routing note: its text and, at the same position, its code."""
        self.texts.append(text)
        self.codes.append(RouteNote(code=code, params=params))

    def result(
        self, decision: Decision, retry_context: dict[str, Any] | None = None
    ) -> RouteResult:
        return RouteResult(decision, retry_context or {}, list(self.texts), list(self.codes))


def scope_note(unknown: Sequence[str]) -> tuple[str, RouteNote]:
    """The note of a PASS lowered because the question names services the environment lacks."""
    return (
        "question names services the environment lacks: PASS became LOW_CONFID",
        RouteNote(code="scope_unknown_services", params={"services": list(unknown)}),
    )


_MAX_PROBLEMS = 6


def _demoted_summary(gatekeeper: GatekeeperReport) -> list[dict[str, Any]]:
    """Per demoted claim: its finding codes, each finding in words, and its unbound facts.

    The Executor reads this on a retry: ``unbound_facts`` are the numbers, times
    and names its excerpts did not hold, ``problems`` say what each finding was
    ("'900' is in no excerpt of claim-3").
    """
    summary = []
    for result in gatekeeper.claims:
        if result.verdict != Verdict.DEMOTED:
            continue
        unbound = [
            f.fact for f in result.findings if f.code == FindingCode.CLAIM_FACT_UNBOUND and f.fact
        ]
        problems = [
            f"{fact!r} is in no excerpt of {result.claim_id}" for fact in dict.fromkeys(unbound)
        ]
        for item in result.findings:
            if item.code == FindingCode.CLAIM_FACT_UNBOUND:
                continue
            where = f"{evidence_numbers([item.binding])}: " if item.binding is not None else ""
            problems.append(f"{item.code}: {where}{item.detail}".strip())
        entry: dict[str, Any] = {
            "claim_id": result.claim_id,
            "findings": sorted({f.code for f in result.findings}),
        }
        if unbound:
            entry["unbound_facts"] = list(dict.fromkeys(unbound))
        if problems:
            entry["problems"] = problems[:_MAX_PROBLEMS]
        summary.append(entry)
    return summary


def route(
    *,
    verifier: VerifierOutput | None,
    verifier_status: str,
    gatekeeper: GatekeeperReport,
    retries_used: int,
    max_retries: int,
) -> RouteResult:
    notes = _Notes()
    if verifier is None:
        notes.add(
            f"verifier_malformed:{verifier_status}", "verifier_malformed", status=verifier_status
        )
        return notes.result(Decision.LOW_CONFID)
    decision = verifier.decision
    fooled = [
        check.claim_id
        for check in verifier.claim_checks
        if check.classification in ALLOWED_CLASSIFICATIONS
        and gatekeeper.verdict_for(check.claim_id) != Verdict.ACCEPTED
    ]
    if fooled:
        claims = sorted(set(fooled))
        notes.add(
            "verifier_allowed_demoted_claims:" + ",".join(claims),
            "verifier_allowed_demoted_claims",
            claims=claims,
        )

    if decision == Decision.RETRY:
        if retries_used < max_retries:
            request = verifier.retry_request
            context = {
                "previous_attempt": retries_used + 1,
                "missing_evidence": list(request.missing_evidence) if request else [],
                "instructions": request.instructions if request else "",
                "demoted_claims": _demoted_summary(gatekeeper),
                "flagged_claims": [
                    {"claim_id": c.claim_id, "classification": c.classification.value}
                    for c in verifier.claim_checks
                    if c.classification not in ALLOWED_CLASSIFICATIONS
                ],
            }
            return notes.result(Decision.RETRY, context)
        notes.add("retry_budget_exhausted", "retry_budget_exhausted", max_retries=max_retries)
        decision = Decision.LOW_CONFID

    if decision == Decision.PASS and fooled:
        decision = Decision.LOW_CONFID
    if decision == Decision.PASS and gatekeeper.counts.accepted == 0:
        notes.add("pass_without_accepted_claims", "pass_without_accepted_claims")
        decision = Decision.LOW_CONFID
    return notes.result(decision)
