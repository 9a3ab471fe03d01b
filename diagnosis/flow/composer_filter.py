"""Composer input filter (seed 004): what the Composer may say, decided by code.

| Verifier classification | Composer handling                                  |
|-------------------------|----------------------------------------------------|
| direct_observation      | allowed_claims (definite)                          |
| reasonable_inference    | allowed_claims (bounded wording)                   |
| overstated              | allowed_hypotheses (missing_info under REJECT)     |
| unsupported             | missing_info                                       |
| external_unknown        | missing_info                                       |
| contradicted            | missing_info                                       |

A claim the Gatekeeper demoted is never an allowed claim, whatever the Verifier
said. Under REJECT the allowed hypotheses are always empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnosis.contracts import (
    ALLOWED_CLASSIFICATIONS,
    AllowedClaim,
    AllowedHypothesis,
    ClaimCheck,
    Classification,
    ComposerAction,
    ComposerInput,
    Decision,
    ExecutorEvidenceV2,
    GatekeeperReport,
    Verdict,
    VerifierOutput,
    Wording,
)
from diagnosis.flow.renderer import language_key

_NOT_CONFIRMED = {"zh": "未能证实：{}", "en": "Not confirmed: {}"}


@dataclass
class FilterResult:
    composer_input: ComposerInput
    # claim_id -> what happened to it, for the audit trail and the evidence view
    placements: dict[str, str] = field(default_factory=dict)
    disagreements: list[dict[str, str]] = field(default_factory=list)


def composer_input_build(
    *,
    question: str,
    language: str,
    decision: Decision,
    executor_output: ExecutorEvidenceV2 | None,
    gatekeeper: GatekeeperReport,
    verifier: VerifierOutput | None,
) -> FilterResult:
    lang = language_key(language)
    checks: dict[str, ClaimCheck] = {}
    if verifier is not None:
        for claim_check in verifier.claim_checks:
            checks.setdefault(claim_check.claim_id, claim_check)
    claims: list[AllowedClaim] = []
    hypotheses: list[AllowedHypothesis] = []
    missing: list[str] = []
    placements: dict[str, str] = {}
    disagreements: list[dict[str, str]] = []
    seen: set[str] = set()

    output = executor_output or ExecutorEvidenceV2()
    for claim in output.claims:
        if claim.claim_id in seen:  # a duplicate id never reaches the user twice
            placements.setdefault(claim.claim_id, "dropped")
            continue
        seen.add(claim.claim_id)
        check = checks.get(claim.claim_id)
        classification = check.classification if check else Classification.UNSUPPORTED
        accepted = gatekeeper.verdict_for(claim.claim_id) == Verdict.ACCEPTED
        text = claim.claim_text.strip()
        if not text:
            placements[claim.claim_id] = "dropped"
            continue
        if classification in ALLOWED_CLASSIFICATIONS and not accepted:
            disagreements.append(
                {
                    "claim_id": claim.claim_id,
                    "verifier": classification.value,
                    "gatekeeper": "demoted",
                }
            )
        if classification in ALLOWED_CLASSIFICATIONS and accepted:
            wording = (
                Wording.DEFINITE
                if classification == Classification.DIRECT_OBSERVATION
                else Wording.BOUNDED
            )
            claims.append(
                AllowedClaim(
                    claim_id=claim.claim_id,
                    text=text,
                    wording=wording,
                    entity=claim.entity,
                    claim_type=claim.claim_type,
                    root_cause_kind=claim.root_cause_kind,
                )
            )
            placements[claim.claim_id] = "allowed_claim"
        elif (
            classification == Classification.OVERSTATED
            or (classification in ALLOWED_CLASSIFICATIONS and not accepted)
        ) and decision != Decision.REJECT:
            hypotheses.append(
                AllowedHypothesis(
                    text=text, entity=claim.entity, root_cause_kind=claim.root_cause_kind
                )
            )
            placements[claim.claim_id] = "hypothesis"
        else:
            missing.append(_NOT_CONFIRMED[lang].format(text))
            placements[claim.claim_id] = "missing_info"

    if decision != Decision.REJECT:
        for hypothesis in output.hypotheses:
            if hypothesis.hypothesis_text.strip():
                hypotheses.append(
                    AllowedHypothesis(
                        text=hypothesis.hypothesis_text.strip(),
                        basis=hypothesis.basis.strip(),
                        entity=hypothesis.entity,
                        root_cause_kind=hypothesis.root_cause_kind,
                    )
                )
    missing.extend(item.strip() for item in output.missing_info if item and item.strip())
    actions = [
        ComposerAction(text=a.action_text.strip(), reason=a.reason.strip())
        for a in output.recommended_actions
        if a.action_text.strip()
    ]
    composer_input = ComposerInput(
        decision=decision,
        language=language,
        question=question,
        allowed_claims=claims,
        allowed_hypotheses=hypotheses,
        missing_info=_dedupe(missing),
        recommended_actions=actions,
    )
    return FilterResult(
        composer_input=composer_input, placements=placements, disagreements=disagreements
    )


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
