from diagnosis.contracts import Decision, GatekeeperReport, VerifierOutput
from diagnosis.flow.router import route


def _gatekeeper(**verdicts):
    return GatekeeperReport.model_validate(
        {
            "parse_status": "parsed_v2",
            "claims": [{"claim_id": c, "verdict": v} for c, v in verdicts.items()],
            "counts": {
                "claims": len(verdicts),
                "accepted": sum(v == "accepted" for v in verdicts.values()),
                "demoted": sum(v == "demoted" for v in verdicts.values()),
            },
        }
    )


def _verifier(decision, **classes):
    return VerifierOutput.model_validate(
        {
            "decision": decision,
            "claim_checks": [{"claim_id": c, "classification": v} for c, v in classes.items()],
            "retry_request": {"missing_evidence": ["mysql 指标"], "instructions": "查 mysql"},
        }
    )


def test_a_pass_stays_a_pass_when_the_gatekeeper_agrees():
    result = route(
        verifier=_verifier("PASS", c1="direct_observation"),
        verifier_status="ok",
        gatekeeper=_gatekeeper(c1="accepted"),
        retries_used=0,
        max_retries=1,
    )
    assert result.decision == Decision.PASS and result.notes == []


def test_a_verifier_that_passes_a_demoted_claim_turns_pass_into_low_confid():
    result = route(
        verifier=_verifier("PASS", c1="direct_observation", c2="direct_observation"),
        verifier_status="ok",
        gatekeeper=_gatekeeper(c1="accepted", c2="demoted"),
        retries_used=0,
        max_retries=1,
    )
    assert result.decision == Decision.LOW_CONFID
    assert result.notes == ["verifier_allowed_demoted_claims:c2"]


def test_a_malformed_verifier_answer_degrades_to_low_confid():
    result = route(
        verifier=None,
        verifier_status="invalid_json",
        gatekeeper=_gatekeeper(c1="accepted"),
        retries_used=0,
        max_retries=1,
    )
    assert result.decision == Decision.LOW_CONFID
    assert result.notes == ["verifier_malformed:invalid_json"]


def test_retry_is_honoured_within_budget_with_a_retry_context():
    result = route(
        verifier=_verifier("RETRY"),
        verifier_status="ok",
        gatekeeper=_gatekeeper(c1="demoted"),
        retries_used=0,
        max_retries=1,
    )
    assert result.decision == Decision.RETRY
    assert result.retry_context["missing_evidence"] == ["mysql 指标"]
    assert result.retry_context["demoted_claims"] == [{"claim_id": "c1", "findings": []}]


def test_retry_beyond_the_budget_degrades_to_low_confid():
    result = route(
        verifier=_verifier("RETRY"),
        verifier_status="ok",
        gatekeeper=_gatekeeper(c1="accepted"),
        retries_used=1,
        max_retries=1,
    )
    assert result.decision == Decision.LOW_CONFID
    assert "retry_budget_exhausted" in result.notes


def test_a_pass_with_no_accepted_claim_is_low_confid():
    result = route(
        verifier=_verifier("PASS"),
        verifier_status="ok",
        gatekeeper=_gatekeeper(c1="demoted"),
        retries_used=0,
        max_retries=1,
    )
    assert result.decision == Decision.LOW_CONFID


def test_reject_stays_reject():
    result = route(
        verifier=_verifier("REJECT", c1="contradicted"),
        verifier_status="ok",
        gatekeeper=_gatekeeper(c1="accepted"),
        retries_used=0,
        max_retries=1,
    )
    assert result.decision == Decision.REJECT


def test_a_retry_names_each_unbound_fact_of_each_demoted_claim():
    gatekeeper = GatekeeperReport.model_validate(
        {
            "parse_status": "parsed_v2",
            "claims": [
                {"claim_id": "claim-1", "verdict": "accepted", "valid_bindings": 1},
                {
                    "claim_id": "claim-3",
                    "verdict": "demoted",
                    "valid_bindings": 1,
                    "findings": [
                        {
                            "code": "claim_fact_unbound",
                            "detail": "'900' is in no bound excerpt (binding 0)",
                            "fact": "900",
                        },
                        {
                            "code": "excerpt_not_found",
                            "binding": 1,
                            "detail": "trace-2: excerpt not found in the output: 'x'",
                        },
                    ],
                },
            ],
            "counts": {"claims": 2, "accepted": 1, "demoted": 1},
        }
    )
    result = route(
        verifier=_verifier("RETRY"),
        verifier_status="ok",
        gatekeeper=gatekeeper,
        retries_used=0,
        max_retries=1,
    )
    [demoted] = result.retry_context["demoted_claims"]
    assert demoted["claim_id"] == "claim-3"
    assert demoted["unbound_facts"] == ["900"]
    assert demoted["problems"][0] == "'900' is in no excerpt of claim-3"
    # evidence is numbered from 1, as the pages number it (the finding's index is 1)
    assert demoted["problems"][1].startswith("excerpt_not_found: evidence 2: trace-2")
