"""What the question names is checked first; the badge says what the answer settles."""

import json

import pytest

from diagnosis.contracts import AllowedClaim, AllowedHypothesis, ComposerInput, Decision, Wording
from diagnosis.flow.scope import root_cause_status, services_unknown
from diagnosis.models import DiagnosisSession
from tests.flow.conftest import (
    QUERY_LOGS,
    composer_json,
    executor_json,
    log_claim,
    verifier_json,
)

KNOWN = ["payment-service", "order-service", "mysql"]


def test_a_service_the_question_names_and_the_environment_lacks_is_found():
    assert services_unknown(
        question="billing-service 从 10:20 开始大量超时",
        planned=["billing-service", "payment-service"],
        known=KNOWN,
    ) == ["billing-service"]


def test_a_known_service_is_never_reported_missing_whatever_its_case():
    assert (
        services_unknown(
            question="Payment-Service is slow", planned=["Payment-Service"], known=KNOWN
        )
        == []
    )


def test_a_name_the_planner_added_but_the_question_does_not_hold_is_not_reported():
    assert services_unknown(question="结账很慢", planned=["billing-service"], known=KNOWN) == []


def test_a_name_inside_a_longer_name_is_not_taken_for_it():
    assert (
        services_unknown(
            question="payment-service-v2 is slow", planned=["payment-service"], known=["mysql"]
        )
        == []
    )


def test_an_environment_without_a_service_list_reports_nothing_missing():
    assert (
        services_unknown(question="billing-service 慢", planned=["billing-service"], known=[]) == []
    )


def _input(claims=(), hypotheses=()):
    return ComposerInput(
        decision=Decision.PASS,
        question="q",
        allowed_claims=list(claims),
        allowed_hypotheses=list(hypotheses),
    )


def test_the_badge_says_confirmed_only_for_an_allowed_root_cause_claim():
    root = AllowedClaim(claim_id="c1", text="t", wording=Wording.DEFINITE, claim_type="root_cause")
    symptom = AllowedClaim(claim_id="c2", text="t", wording=Wording.DEFINITE, claim_type="symptom")
    hypothesis = AllowedHypothesis(text="h", basis="b")
    assert root_cause_status(_input([root])) == "confirmed"
    assert root_cause_status(_input([symptom], [hypothesis])) == "hypothesised"
    assert root_cause_status(_input([symptom])) == "undetermined"
    assert root_cause_status(None) == "undetermined"


ROOT_CLAIM = log_claim(claim_type="root_cause", text="payment-service 连接池耗尽导致超时")
ANSWER = "**结论**\n\npayment-service 连接池耗尽导致超时。\n"


@pytest.mark.django_db
def test_an_answer_about_a_service_the_environment_lacks_says_so_first_and_is_not_pass(
    run_scripted,
):
    planner = {
        "content": json.dumps(
            {"plan_version": "planner_v1", "services": ["billing-service", "payment-service"]}
        )
    }
    session = run_scripted(
        {
            "planner": [planner],
            "executor": [QUERY_LOGS, executor_json(ROOT_CLAIM)],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json(ANSWER)],
        },
        question="billing-service 和 payment-service 从 10:20 开始大量超时",
    )
    assert session.status == DiagnosisSession.Status.COMPLETED
    assert session.decision == "LOW_CONFID"
    first_line = session.final_answer.splitlines()[0]
    assert "billing-service" in first_line and "mini-pool" in first_line
    assert session.self_evaluation["scope"] == {"unknown_services": ["billing-service"]}


@pytest.mark.django_db
def test_the_unknown_service_notice_follows_the_answer_language(run_scripted):
    planner = {
        "content": json.dumps({"plan_version": "planner_v1", "services": ["billing-service"]})
    }
    session = run_scripted(
        {
            "planner": [planner],
            "executor": [QUERY_LOGS, executor_json(ROOT_CLAIM)],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json(ANSWER)],
        },
        language="en",
        question="billing-service times out since 10:20",
    )
    assert session.final_answer.startswith("**Note: billing-service is not in environment")


@pytest.mark.django_db
def test_a_confirmed_root_cause_claim_gives_the_confirmed_badge(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(ROOT_CLAIM)],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json(ANSWER)],
        }
    )
    assert session.decision == "PASS"
    assert session.root_cause_status == "confirmed"


@pytest.mark.django_db
def test_a_pass_with_only_symptoms_is_not_badged_as_a_found_root_cause(run_scripted):
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json("**结论**\n\npayment-service 出现连接池超时日志。\n")],
        }
    )
    assert session.decision == "PASS"
    assert session.root_cause_status != "confirmed"


def test_the_window_notice_names_the_window_and_its_timezone_in_the_answer_language():
    from diagnosis.flow.scope import window_notice

    window = {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}
    assert "2026-03-02 10:00 至 10:40（UTC）" in window_notice(window=window, language="zh-CN")
    english = window_notice(window=window, language="en")
    assert "2026-03-02 10:00 to 10:40 (UTC)" in english
    overnight = {"start": "2026-03-01T23:30:00Z", "end": "2026-03-02T00:10:00Z"}
    assert "2026-03-01 23:30 to 2026-03-02 00:10" in window_notice(window=overnight, language="en")
    assert window_notice(window=None, language="en") == ""
