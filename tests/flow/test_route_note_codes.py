"""Each routing note is stored as its text and, at the same position, as a code a page words."""

from __future__ import annotations

import re

from django.utils import translation

from audit.templatetags.audit_tags import route_notes_worded
from diagnosis.contracts import Decision, RouteNote, VerifierEvaluation
from diagnosis.flow.router import route, scope_note
from diagnosis.wording import ROUTE_NOTES

from .test_router import _gatekeeper, _verifier

CJK = re.compile(r"[\u4e00-\u9fff]")


def _route(verifier, gatekeeper, *, status="ok", retries_used=0, max_retries=1):
    return route(
        verifier=verifier,
        verifier_status=status,
        gatekeeper=gatekeeper,
        retries_used=retries_used,
        max_retries=max_retries,
    )


def _routes():
    """A fooled Verifier, a pass with nothing accepted, a spent retry budget, a bad answer."""
    return (
        _route(_verifier("PASS", c1="direct_observation"), _gatekeeper(c1="demoted")),
        _route(_verifier("PASS", c1="unsupported"), _gatekeeper(c1="demoted")),
        _route(
            _verifier("RETRY", c1="unsupported"),
            _gatekeeper(c1="accepted"),
            retries_used=2,
            max_retries=2,
        ),
        _route(None, _gatekeeper(), status="invalid_json"),
    )


def test_the_notes_read_as_before_and_each_has_its_code_at_the_same_position():
    fooled, empty, exhausted, malformed = _routes()
    assert fooled.notes == ["verifier_allowed_demoted_claims:c1"]
    assert fooled.note_codes == [
        RouteNote(code="verifier_allowed_demoted_claims", params={"claims": ["c1"]})
    ]
    assert empty.notes == ["pass_without_accepted_claims"]
    assert [n.code for n in empty.note_codes] == ["pass_without_accepted_claims"]
    assert exhausted.decision == Decision.LOW_CONFID
    assert exhausted.notes == ["retry_budget_exhausted"]
    assert exhausted.note_codes == [
        RouteNote(code="retry_budget_exhausted", params={"max_retries": 2})
    ]
    assert malformed.notes == ["verifier_malformed:invalid_json"]
    assert malformed.note_codes[0].params == {"status": "invalid_json"}


def test_a_page_words_each_coded_note_in_its_language_and_shows_older_notes_as_recorded():
    routes = _routes()
    text, code = scope_note(["mysql"])
    evaluation = VerifierEvaluation(
        route_notes=[*(n for r in routes for n in r.notes), text, "an old note"],
        route_note_codes=[*(c for r in routes for c in r.note_codes), code],
    )
    with translation.override("zh-hans"):
        chinese = route_notes_worded(evaluation)
    with translation.override("en"):
        english = route_notes_worded(evaluation)
    assert [recorded for _, recorded in chinese] == evaluation.route_notes
    assert chinese[-1] == ("", "an old note")  # stored before the codes: shown as recorded
    for worded, _ in chinese[:-1]:
        assert CJK.search(worded) and "%(" not in worded
    for worded, _ in english[:-1]:
        assert worded and not CJK.search(worded) and "%(" not in worded
    assert "c1" in chinese[0][0] and "mysql" in chinese[-2][0]
    assert "invalid_json" not in chinese[3][0]  # a status is named by its label


def test_every_routing_note_code_has_an_english_translation():
    with translation.override("en"):
        for code, message in ROUTE_NOTES.items():
            assert not CJK.search(str(message)), code
