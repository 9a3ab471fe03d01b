"""Router: turns the Verifier's decision into the session's, with code-enforced limits.

- a malformed or failed Verifier answer degrades to LOW_CONFID;
- RETRY re-runs the Executor at most ``max_retries`` times, then degrades to LOW_CONFID;
- a Verifier that passes a claim the Gatekeeper demoted has been fooled: PASS becomes
  LOW_CONFID (the claim itself is kept out by the Composer filter);
- PASS with no Gatekeeper-accepted claim is not a pass: LOW_CONFID.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnosis.contracts import (
    ALLOWED_CLASSIFICATIONS,
    Decision,
    FindingCode,
    GatekeeperReport,
    Verdict,
    VerifierOutput,
)


@dataclass(frozen=True)
class RouteResult:
    decision: Decision
    retry_context: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


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
            where = f"binding {item.binding}: " if item.binding is not None else ""
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
    if verifier is None:
        return RouteResult(Decision.LOW_CONFID, notes=[f"verifier_malformed:{verifier_status}"])
    notes: list[str] = []
    decision = verifier.decision
    fooled = [
        check.claim_id
        for check in verifier.claim_checks
        if check.classification in ALLOWED_CLASSIFICATIONS
        and gatekeeper.verdict_for(check.claim_id) != Verdict.ACCEPTED
    ]
    if fooled:
        notes.append("verifier_allowed_demoted_claims:" + ",".join(sorted(set(fooled))))

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
            return RouteResult(Decision.RETRY, retry_context=context, notes=notes)
        notes.append("retry_budget_exhausted")
        decision = Decision.LOW_CONFID

    if decision == Decision.PASS and fooled:
        decision = Decision.LOW_CONFID
    if decision == Decision.PASS and gatekeeper.counts.accepted == 0:
        notes.append("pass_without_accepted_claims")
        decision = Decision.LOW_CONFID
    return RouteResult(decision, notes=notes)
