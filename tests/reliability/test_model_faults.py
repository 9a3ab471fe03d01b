"""Every role × every fault of an OpenAI-compatible server, through a whole session.

Each run goes through the real ``openai`` provider and SDK against the loopback
server; one role gets the fault on every request, the other roles play well.
"""

from __future__ import annotations

import pytest

from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from tests.reliability.conftest import is_raw_json
from tests.support.openai_faults import (
    FAULT_MODES,
    RETRYABLE_MODES,
    UFA_MARKER,
    faulty_responder,
    requests_per_logical_call,
)
from tests.support.openai_server import HUGE_CHARS

ROLES = ("planner", "executor", "verifier", "composer")
FAILED_CALL_STATUS = {
    "timeout": {"timeout"},
    "429": {"error"},
    "500": {"error"},
    "malformed_json": {"error"},
    "wrong_schema": {"error"},
    "empty": {"empty"},
    "truncated": {"truncated"},
}


def _stage_record(session: DiagnosisSession, role: str) -> str:
    """The status a reviewer sees for the role's stage on the session itself."""
    evaluation = session.self_evaluation
    if role == "planner":
        return session.plan["status"]
    if role == "executor":
        attempt = evaluation["attempts"][0]
        return attempt["executor_error"].split(":", 1)[0] or attempt["parse_status"]
    if role == "verifier":
        return evaluation["verifier_evaluation"]["status"]
    return evaluation["verifier_evaluation"]["composer_output"]["status"]


def _assert_safe_answer(session: DiagnosisSession) -> None:
    answer = session.final_answer
    assert answer.strip()
    assert not is_raw_json(answer)
    assert '"answer_version"' not in answer and '"claims"' not in answer
    assert UFA_MARKER not in answer
    assert "x" * 200 not in answer  # no 1 MB model answer passed through
    for output in ToolInvocation.objects.filter(session=session).values_list("output", flat=True):
        for line in output.splitlines():
            if len(line) >= 40:
                assert line not in answer, "a raw tool output line reached the user"


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize("role", ROLES)
def test_a_faulty_model_role_still_ends_the_session_with_a_safe_recorded_answer(
    openai_run, settings, role, mode
):
    session, server = openai_run(faulty_responder(role, mode))

    assert session.status == DiagnosisSession.Status.COMPLETED, session.error
    assert session.stage == DiagnosisSession.Stage.DONE
    _assert_safe_answer(session)

    calls = list(LLMCall.objects.filter(session=session, role=role))
    assert calls, "every HTTP attempt of the role is an LLMCall row"
    per_call = requests_per_logical_call(server)
    budget = 1 + settings.LLM_MAX_RETRIES
    for counts in per_call.values():
        assert max(counts) <= budget
    assert sum(per_call[role]) == len(calls)
    stage = _stage_record(session, role)

    if mode in FAILED_CALL_STATUS:
        assert {c.status for c in calls} <= FAILED_CALL_STATUS[mode] | {"ok"}
        assert any(c.status in FAILED_CALL_STATUS[mode] for c in calls)
        assert stage not in {"ok", "parsed_v2"}, stage
    if mode in RETRYABLE_MODES:
        assert max(per_call[role]) == budget  # retried, and no more than allowed
        assert all(c.error for c in calls)
    elif mode != "truncated":
        assert max(per_call[role]) == 1  # nothing to gain by asking again
    if mode == "truncated" and role != "composer":
        # a cut plan, report or verdict is never taken for a whole one
        assert stage == "truncated", stage
    if mode == "huge":
        assert any(c.raw_response.endswith("chars in all]") for c in calls)
        assert stage not in {"ok", "parsed_v2"}, stage
        assert len(session.final_answer) < HUGE_CHARS // 10
    if mode == "invalid_utf8":
        assert any("\ufffd" in c.raw_response for c in calls)

    if role == "composer" and mode != "invalid_utf8":
        snapshot = session.self_evaluation["verifier_evaluation"]["composer_output"]
        assert snapshot["source"] == "fallback" and session.answer_source == "fallback"
        assert snapshot["guard_findings"]
    if role == "verifier" and mode != "invalid_utf8":
        assert session.decision == "LOW_CONFID"
