"""gatekeeper_run: whole outputs against a persisted session, and what it stores."""

from __future__ import annotations

import json

import pytest

import diagnosis.flow.gatekeeper as gatekeeper_module
import diagnosis.flow.gatekeeper.checker as checker_module
from diagnosis.contracts import Claim, ExecutorEvidenceV2, ParseStatus
from diagnosis.flow.gatekeeper import (
    InvocationRecord,
    gatekeeper_accepted_claims,
    gatekeeper_check,
)
from diagnosis.flow.parsing import ParsedExecutorOutput, executor_output_parse
from tests.support.gatekeeper import gatekeeper_run

from .conftest import LOGS_OUTPUT, binding, claim, executor_json

REAL = "request timed out after 30000ms"


def stored_report(incident):
    incident.session.refresh_from_db()
    return incident.session.self_evaluation["gatekeeper"]


def run(incident, raw):
    return gatekeeper_run(session=incident.session, parsed=executor_output_parse(raw))


def test_the_report_is_stored_on_the_session_next_to_what_was_there(incident):
    run(incident, executor_json(claim("claim-1", [binding("trace-1", REAL)])))

    incident.session.refresh_from_db()
    evaluation = incident.session.self_evaluation
    assert evaluation["history"] == [{"attempt": 1}]
    assert evaluation["gatekeeper"] == {
        "gatekeeper_version": "gatekeeper_v2",
        "parse_status": "parsed_v2",
        "claims": [
            {
                "claim_id": "claim-1",
                "verdict": "accepted",
                "valid_bindings": 1,
                "findings": [],
                # the service is bound by the query's service argument
                "facts": [
                    {
                        "text": "payment-service",
                        "kind": "identifier",
                        "start": 0,
                        "end": 15,
                        "binding": 0,
                        "via": "argument",
                    }
                ],
            }
        ],
        "findings": [],
        "counts": {"claims": 1, "accepted": 1, "demoted": 0},
    }


def test_a_duplicate_claim_id_demotes_the_later_claim(incident):
    raw = executor_json(
        claim("claim-1", [binding("trace-1", REAL)]),
        claim("claim-1", [binding("trace-1", REAL)], claim_text="根因是数据库宕机。"),
    )
    parsed = executor_output_parse(raw)
    report = gatekeeper_run(session=incident.session, parsed=parsed)

    first, second = stored_report(incident)["claims"]
    assert first["verdict"] == "accepted"
    assert second["verdict"] == "demoted"
    # (it names nothing concrete either)
    assert [f["code"] for f in second["findings"]] == ["duplicate_claim_id", "claim_not_specific"]
    assert [c.claim_text for c in gatekeeper_accepted_claims(parsed, report)] == [
        "payment-service 出现连接池超时。"
    ]


def test_a_claim_without_text_is_demoted_even_when_its_binding_holds(incident):
    raw = json.dumps(
        {
            "claims": [
                {
                    "claim_id": "claim-1",
                    "claim_type": "symptom",
                    "evidence_bindings": [binding("trace-1", REAL)],
                }
            ]
        }
    )
    run(incident, raw)
    [result] = stored_report(incident)["claims"]
    assert result["verdict"] == "demoted"
    assert result["valid_bindings"] == 1
    assert {f["code"] for f in result["findings"]} == {"malformed_claim", "claim_not_specific"}


def test_a_dropped_claim_is_reported_as_a_finding_of_the_output(incident):
    run(incident, json.dumps({"claims": ["payment-service is down", claim("claim-1", [])]}))
    stored = stored_report(incident)
    assert [f["code"] for f in stored["findings"]] == ["malformed_claim"]
    assert stored["counts"]["claims"] == 1


def test_a_v1_output_is_checked_and_its_user_facing_answer_stays_out_of_the_report(incident):
    raw = json.dumps(
        {
            "answer_version": "executor_evidence_v1",
            "diagnosis_summary": "连接池耗尽",
            "claims": [claim("claim-1", [binding("trace-1", REAL)])],
            "user_facing_answer": "已确认：数据库主库宕机。",
        },
        ensure_ascii=False,
    )
    run(incident, raw)
    stored = stored_report(incident)
    assert stored["parse_status"] == "parsed_v1"
    assert stored["counts"]["accepted"] == 1
    assert "数据库主库宕机" not in json.dumps(stored, ensure_ascii=False)


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("我无法确定原因。", "invalid_json", id="prose only"),
        pytest.param("[1, 2, 3]", "not_an_object", id="a JSON array"),
        pytest.param('{"claims": "none"}', "schema_invalid", id="claims not a list"),
    ],
)
def test_an_unusable_output_is_recorded_with_its_parse_status_and_no_claims(incident, raw, status):
    run(incident, raw)
    stored = stored_report(incident)
    assert stored["parse_status"] == status
    assert stored["claims"] == []
    assert stored["counts"] == {"claims": 0, "accepted": 0, "demoted": 0}
    assert [f["code"] for f in stored["findings"]] == ["unusable_output"]


def test_no_claims_at_all_gives_an_empty_report(incident):
    run(incident, executor_json(missing_info=["没有数据库日志"]))
    stored = stored_report(incident)
    assert stored["parse_status"] == "parsed_v2"
    assert stored["counts"] == {"claims": 0, "accepted": 0, "demoted": 0}


def test_five_thousand_claims_are_all_checked(incident):
    claims = [
        claim(f"claim-{n}", [binding("trace-1", REAL if n % 2 else "an invented log line here")])
        for n in range(5000)
    ]
    run(incident, executor_json(*claims))
    stored = stored_report(incident)
    assert stored["counts"] == {"claims": 5000, "accepted": 2500, "demoted": 2500}


def test_the_invocations_are_loaded_in_one_query_and_foreign_ids_in_one_more(
    incident, django_assert_num_queries
):
    parsed = executor_output_parse(
        executor_json(
            claim(
                "claim-1",
                [binding("trace-1", REAL, source_invocation_ids=[incident.other_logs.id])],
            ),
            claim("claim-2", [binding("trace-1", REAL, source_invocation_ids=[424242])]),
            claim("claim-3", [binding("trace-2", "window max 118 at 10:08:00Z")]),
        )
    )
    with django_assert_num_queries(3):  # invocations, foreign ids, the session update
        gatekeeper_run(session=incident.session, parsed=parsed)
    codes = [{f["code"] for f in c["findings"]} for c in stored_report(incident)["claims"]]
    assert codes == [{"invocation_not_in_session"}, {"unknown_source_id"}, set()]


def test_no_foreign_lookup_is_made_when_every_cited_id_is_in_the_session(
    incident, django_assert_num_queries
):
    parsed = executor_output_parse(
        executor_json(
            claim("claim-1", [binding("trace-1", REAL, source_invocation_ids=[incident.logs.id])])
        )
    )
    with django_assert_num_queries(2):
        gatekeeper_run(session=incident.session, parsed=parsed)


def test_an_invocation_id_too_large_for_the_database_is_simply_unknown(incident):
    run(
        incident,
        executor_json(claim("claim-1", [binding("trace-1", REAL, source_invocation_ids=[2**70])])),
    )
    [result] = stored_report(incident)["claims"]
    assert {f["code"] for f in result["findings"]} == {"unknown_source_id"}


def test_each_invocation_output_is_normalised_once_however_many_bindings_cite_it(
    incident, monkeypatch
):
    calls = []
    real = checker_module.text_normalize

    def counting(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(checker_module, "text_normalize", counting)
    claims = [
        claim(
            f"claim-{n}",
            [binding("trace-1", REAL), binding("trace-1", "HikariPool-1 - Connection")],
        )
        for n in range(20)
    ]
    run(incident, executor_json(*claims))

    assert calls.count(LOGS_OUTPUT) == 1
    assert stored_report(incident)["counts"]["accepted"] == 20


def test_bindings_are_reported_with_the_index_the_model_wrote(incident):
    raw = executor_json(
        claim("claim-1", ["not a binding", binding("trace-1", "an invented log line here")])
    )
    run(incident, raw)
    [result] = stored_report(incident)["claims"]
    assert [(f["code"], f["binding"]) for f in result["findings"]] == [
        ("malformed_binding", 0),
        ("excerpt_not_found", 1),
    ]


def test_an_internal_error_demotes_every_claim_instead_of_raising(incident, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(checker_module.ClaimChecker, "claim_check", broken)
    monkeypatch.setattr(
        gatekeeper_module, "_claims_of", lambda parsed: (_ for _ in ()).throw(KeyError())
    )
    parsed = executor_output_parse(executor_json(claim("claim-1", [binding("trace-1", REAL)])))
    report = gatekeeper_run(session=incident.session, parsed=parsed)
    assert report.findings[0].code == "internal_error"
    assert stored_report(incident)["counts"]["accepted"] == 0


def test_a_failing_claim_check_demotes_only_that_claim(incident, monkeypatch):
    real = checker_module.ClaimChecker.claim_check

    def flaky(self, claim_obj, notes, duplicate):
        if claim_obj.claim_id == "claim-2":
            raise ValueError("boom")
        return real(self, claim_obj, notes, duplicate)

    monkeypatch.setattr(checker_module.ClaimChecker, "claim_check", flaky)
    run(
        incident,
        executor_json(
            claim("claim-1", [binding("trace-1", REAL)]),
            claim("claim-2", [binding("trace-1", REAL)]),
        ),
    )
    first, second = stored_report(incident)["claims"]
    assert first["verdict"] == "accepted"
    assert second["verdict"] == "demoted"
    assert second["findings"][0]["code"] == "internal_error"


def test_a_hand_built_parse_result_with_an_unknown_claim_type_gets_the_finding():
    output = ExecutorEvidenceV2(
        claims=[
            Claim.model_validate(claim("claim-1", [binding("trace-1", REAL)], claim_type="guess"))
        ]
    )
    parsed = ParsedExecutorOutput(
        status=ParseStatus.PARSED_V2, raw_object=None, output=output, dropped=[]
    )
    record = InvocationRecord(
        1, 7, "trace-1", "query_logs", "ok", LOGS_OUTPUT, {}, {"service": "payment-service"}
    )
    report = gatekeeper_check(parsed=parsed, invocations=[record], session_id=7)
    [result] = report.claims
    assert result.verdict == "accepted"
    assert [f.code for f in result.findings] == ["unknown_claim_type"]


def test_records_of_another_session_passed_in_are_treated_as_foreign():
    parsed = executor_output_parse(
        executor_json(claim("claim-1", [binding("trace-1", REAL, source_invocation_ids=[2])]))
    )
    records = [
        InvocationRecord(1, 7, "trace-1", "query_logs", "ok", LOGS_OUTPUT, {}),
        InvocationRecord(2, 8, "trace-1", "query_logs", "ok", LOGS_OUTPUT, {}),
    ]
    report = gatekeeper_check(parsed=parsed, invocations=records, session_id=7)
    assert [f.code for f in report.claims[0].findings] == ["invocation_not_in_session"]
