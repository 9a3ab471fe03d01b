"""A Gatekeeper finding keeps its English detail and says it again as a code a page words."""

from __future__ import annotations

import re

import pytest
from django.utils import translation

from chat.templatetags.chat_tags import evidence_label, finding_detail
from diagnosis.flow.parsing import executor_output_parse
from diagnosis.flow.verifier import verifier_payload_build
from diagnosis.wording import FINDING_DETAILS, PARSE_DETAILS
from tests.support.gatekeeper import gatekeeper_run

from .conftest import binding, claim, executor_json

REAL = "request timed out after 30000ms"
CJK = re.compile(r"[\u4e00-\u9fff]")


def _broken_output(incident) -> str:
    """One claim per kind of broken binding or fact the Gatekeeper words."""
    knowledge = {"source_type": "lookup_evidence_block"}
    return executor_json(
        claim("c-tool", [binding(excerpt=REAL, tool_name="query_metrics")]),
        claim("c-failed", [binding("trace-4", "Loki returned 502 Bad Gateway")]),
        claim("c-missing", [binding(excerpt="this sentence is nowhere in that output")]),
        claim("c-fragment", [binding(excerpt=f"{REAL} ... nowhere in that output at all")]),
        claim("c-short", [binding(excerpt="abc")]),
        claim("c-short-fragment", [binding(excerpt=f"{REAL} ... ab")]),
        claim("c-many", [binding(excerpt=" ... ".join(f"{c * 9}" for c in "abcde"))]),
        claim("c-number", [binding(excerpt="request timed out after 30001ms")]),
        claim("c-far", [binding(excerpt="Connection is not available ... retry budget exhausted")]),
        claim("c-trace", [binding("trace-99", REAL)]),
        claim("c-chunk", [binding("kb-nope", "连接池耗尽的处置步骤", **knowledge)]),
        claim("c-type", [binding(excerpt=REAL, source_type="url")]),
        claim("c-gone", [binding(excerpt=REAL, source_invocation_ids=[987654])]),
        claim("c-foreign", [binding(excerpt=REAL, source_invocation_ids=[incident.other_logs.id])]),
        claim("c-mismatch", [binding(excerpt=REAL, source_invocation_ids=[incident.metrics.id])]),
        claim("c-fact", [binding(excerpt=REAL)], claim_text="payment-service 超时 4242 次"),
        claim("c-vague", [binding(excerpt=REAL)], claim_text="出现了一些问题"),
        claim("c-none", []),
        claim("c-none", [binding(excerpt=REAL)]),
        claim(
            "c-knowledge",
            [binding("kb-payment-pool-exhaustion", "新请求会等待 connectionTimeout", **knowledge)],
        ),
        claim("c-beside", [binding(excerpt=REAL), binding("trace-99", REAL)]),
        claim(
            "c-kind",
            [binding("trace-2", 'container_cpu_usage_percent{service="payment-service"}')],
            claim_type="root_cause",
            claim_text="payment-service 的 container_cpu_usage_percent 升高",
            root_cause_kind="memory",
        ),
        # a hypothesis's kind that no output about its service shows (a report-level finding)
        hypotheses=[
            {
                "hypothesis_text": "payment-service 的磁盘写满",
                "entity": "payment-service",
                "root_cause_kind": "disk",
                "basis": "磁盘使用率升高",
            },
            # a figure its text invents, and one its basis invents
            {"hypothesis_text": "payment-service 超时 7777 次", "entity": "payment-service"},
            {
                "hypothesis_text": "payment-service 的连接池可能耗尽",
                "entity": "payment-service",
                "basis": "错误率为 31.4159%",
            },
        ],
    )


@pytest.fixture
def stored(incident):
    gatekeeper_run(session=incident.session, parsed=executor_output_parse(_broken_output(incident)))
    incident.session.refresh_from_db()
    report = incident.session.self_evaluation["gatekeeper"]
    by_id: dict[str, list[dict]] = {}
    for result in report["claims"]:  # a repeated id is kept as "<id>#2"
        key = result["claim_id"] + ("#2" if result["claim_id"] in by_id else "")
        by_id[key] = result["findings"]
    by_id["#report"] = report["findings"]
    return by_id


def test_every_finding_the_gatekeeper_writes_is_stored_with_a_code_a_page_can_word(stored):
    codes = {f["detail_code"] for findings in stored.values() for f in findings}
    assert codes == set(FINDING_DETAILS) - set(PARSE_DETAILS) - {
        "excerpt_is_instruction",
        "unknown_claim_type",
        "gatekeeper_failed",
        "claim_check_failed",
    }
    for findings in stored.values():
        for item in findings:
            assert item["detail"], item  # the English text stays, for exports and the API
            assert isinstance(item.get("detail_params", {}), dict)


def test_the_stored_english_detail_numbers_evidence_from_one_as_the_pages_do(stored):
    assert stored["c-tool"][0]["detail"] == "binding says 'query_metrics', trace-1 is 'query_logs'"
    assert stored["c-beside"][-1]["detail"].startswith("evidence 2 is invalid")
    assert stored["c-fact"][0]["detail"] == "'4242' is in no bound excerpt (evidence 1)"
    # the parameters keep the index as the model wrote it; pages add one
    assert stored["c-fact"][0]["detail_params"] == {"fact": "4242", "bindings": [0]}
    assert stored["c-beside"][-1]["binding"] is None and stored["c-tool"][0]["binding"] == 0


def test_a_chinese_page_reads_each_finding_in_chinese_and_an_english_page_in_english(stored):
    for findings in stored.values():
        for item in findings:
            with translation.override("zh-hans"):
                chinese = finding_detail(item)
            with translation.override("en"):
                english = finding_detail(item)
            assert CJK.search(chinese) and "%(" not in chinese, item
            assert english and not CJK.search(english.replace("连接池耗尽的处置步骤", "")), item
            assert "%(" not in english and item["detail"] not in chinese


def test_the_wording_numbers_evidence_from_one_and_names_a_status_by_its_label(stored):
    with translation.override("zh-hans"):
        assert finding_detail(stored["c-beside"][-1]).startswith("其中 证据 2 无效")
        assert finding_detail(stored["c-fact"][0]) == "“4242”不在任何已绑定的摘录中（证据 1）"
        assert "“错误”" in finding_detail(stored["c-failed"][0])
    with translation.override("en"):
        assert finding_detail(stored["c-beside"][-1]).startswith(
            "of its bindings, evidence 2 is invalid"
        )


def test_an_english_sentence_names_evidence_in_lower_case_where_a_heading_capitalises_it(stored):
    with translation.override("en"):
        assert finding_detail(stored["c-fact"][0]) == "“4242” is in no bound excerpt (evidence 1)"
        assert evidence_label(0) == "Evidence 1"
    with translation.override("zh-hans"):
        assert evidence_label(0) == "证据 1"


def test_a_finding_stored_before_the_codes_or_with_an_unknown_code_is_not_worded():
    assert finding_detail({"code": "excerpt_not_found", "detail": "mysql down"}) == ""
    assert finding_detail({"code": "x", "detail": "y", "detail_code": "not_a_code"}) == ""
    broken = {"code": "x", "detail_code": "tool_name_mismatch", "detail_params": {"tool": "a"}}
    assert finding_detail(broken) == ""  # a parameter missing: the stored text is shown


def test_every_wording_has_an_english_translation():
    with translation.override("en"):
        for code, message in FINDING_DETAILS.items():
            assert not CJK.search(str(message)), code


def test_the_verifier_reads_each_finding_as_it_did_before_the_codes(incident):
    parsed = executor_output_parse(_broken_output(incident))
    report = gatekeeper_run(session=incident.session, parsed=parsed)
    payload = verifier_payload_build(
        session=incident.session, raw="{}", parsed=parsed, report=report, retry_context=None
    )
    dumped = payload.model_dump(mode="json")["gatekeeper"]
    findings = [f for c in dumped["claims"] for f in c["findings"]]
    assert findings and all(set(f) == {"code", "binding", "detail", "fact"} for f in findings)
    assert any(f.detail_code for c in report.claims for f in c.findings)  # the stored report
