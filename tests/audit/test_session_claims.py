"""One read model of a session's claims (diagnosis.selectors.session_claims) for every page."""

from __future__ import annotations

import pytest

from diagnosis.contracts import Verdict
from diagnosis.selectors import excerpt_lines, session_claims, session_self_evaluation

pytestmark = pytest.mark.django_db


def test_each_claim_carries_its_verdict_check_placement_and_the_invocation_it_cites(
    make_session, django_assert_num_queries
):
    session = make_session()
    with django_assert_num_queries(1):  # the session's invocations, once
        claims = session_claims(session=session)
    by_id = {c.claim_id: c for c in claims.claims}
    assert [c.claim_id for c in claims.allowed] == ["claim-1", "claim-2"]
    assert by_id["claim-1"].verdict == Verdict.ACCEPTED
    assert by_id["claim-1"].classification == "direct_observation"
    assert by_id["claim-3"].placement == "missing_info"
    assert by_id["claim-3"].findings and not by_id["claim-3"].bindings[0].valid
    binding = by_id["claim-1"].bindings[0]
    assert binding.invocation is not None and binding.invocation.trace_ref == "trace-1"
    marked = [line for line in binding.output_lines() if line.marked]
    assert "request timed out after 30000ms" in marked[0].text
    assert claims.hypotheses and claims.missing_info


def test_a_broken_part_of_an_old_row_hides_only_itself(make_session):
    session = make_session()
    evaluation = session.self_evaluation
    evaluation["gatekeeper"]["claims"][0]["facts"] = [{"not": "a fact"}]
    del evaluation["verifier_evaluation"]["composer_output"]["final_answer"]
    session.self_evaluation = evaluation
    read = session_self_evaluation(session)
    assert read.gatekeeper is not None and read.gatekeeper.claims[0].facts == []
    assert read.verifier_evaluation is not None
    assert read.verifier_evaluation.composer_output is None
    assert read.verifier_evaluation.placements["claim-1"] == "allowed_claim"
    assert [c.claim_id for c in session_claims(session=session).allowed] == ["claim-1", "claim-2"]


def test_an_excerpt_in_fragments_is_shown_from_its_first_to_its_last_fragment():
    output = "\n".join(f"line {n}" for n in range(10))
    first, last = output.index("line 3"), output.index("line 6")
    lines = excerpt_lines(output=output, spans=[(first, first + 6), (last, last + 6)])
    assert [line.number for line in lines] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert [line.text for line in lines if line.marked] == ["line 3", "line 6"]
    assert excerpt_lines(output=output, spans=[]) == ()


def test_proposals_read_as_the_flow_read_them_when_it_ran(make_session):
    # A model's loose items (null basis, a number for an entity, a bare string, a null in
    # missing info) are coerced or dropped as the Executor's parser did in the run.
    session = make_session()
    structured = session.executor_structured_output
    structured["hypotheses"] = [
        {"hypothesis_text": "pool too small", "basis": None, "entity": 5},
        "the database is slow",
        {"basis": "no text"},
    ]
    structured["recommended_actions"] = [{"action_text": "raise the pool size", "reason": None}]
    structured["missing_info"] = ["db metrics", None, "  "]
    session.executor_structured_output = structured
    claims = session_claims(session=session)
    assert [(h.hypothesis_text, h.basis, h.entity) for h in claims.hypotheses] == [
        ("pool too small", "", None),
        ("the database is slow", "", None),
    ]
    assert [(a.action_text, a.reason) for a in claims.actions] == [("raise the pool size", "")]
    assert claims.missing_info == ("db metrics",)
