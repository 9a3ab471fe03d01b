"""Tolerant parsing of raw model output: the parse statuses of docs/contracts.md §1."""

from __future__ import annotations

import json

from diagnosis.contracts import (
    ComposerOutput,
    ExecutorEvidenceV1,
    ExecutorEvidenceV2,
    PlannerOutput,
    VerifierOutput,
)
from diagnosis.flow.parsing import executor_output_parse, json_object_extract, model_output_parse

from .conftest import binding, claim, executor_json

GOOD = executor_json(claim("claim-1", [binding("trace-1", "request timed out after 30000ms")]))


def codes(findings):
    return {f.code for f in findings}


def test_a_plain_v2_object_parses_as_v2():
    parsed = executor_output_parse(GOOD)
    assert parsed.status == "parsed_v2"
    assert isinstance(parsed.output, ExecutorEvidenceV2)
    assert parsed.output.claims[0].evidence_bindings[0].source_id == "trace-1"
    assert parsed.raw_object == json.loads(GOOD)
    assert parsed.dropped == []


def test_a_fenced_json_block_after_prose_is_found():
    raw = f"I looked at the logs and metrics.\n\nHere is the result:\n```json\n{GOOD}\n```\nDone."
    assert executor_output_parse(raw).status == "parsed_v2"


def test_a_fence_without_a_language_tag_is_found():
    assert executor_output_parse(f"```\n{GOOD}\n```").status == "parsed_v2"


def test_a_json_fence_is_preferred_over_another_fence():
    raw = f'```bash\necho "{{}}"\n```\nand\n```json\n{GOOD}\n```'
    assert executor_output_parse(raw).status == "parsed_v2"


def test_an_object_after_a_line_of_prose_and_before_trailing_prose_is_found():
    raw = f"最终结论：{GOOD}\n以上。"
    parsed = executor_output_parse(raw)
    assert parsed.status == "parsed_v2"
    assert parsed.output.claims[0].claim_id == "claim-1"


def test_the_longest_object_in_prose_wins_over_a_small_one_before_it():
    raw = 'I filtered by {"service": "payment-service"} and found:\n' + GOOD
    assert executor_output_parse(raw).status == "parsed_v2"


def test_a_utf8_bom_before_the_json_is_ignored():
    assert executor_output_parse("\ufeff" + GOOD).status == "parsed_v2"
    assert executor_output_parse(b"\xef\xbb\xbf" + GOOD.encode()).status == "parsed_v2"


def test_bytes_that_are_not_utf8_do_not_crash():
    assert executor_output_parse(b"\xff\xfe\x00garbage{").status == "invalid_json"


def test_empty_and_blank_outputs_are_empty():
    for raw in (None, "", "   \n\t", b"", "\ufeff"):
        parsed = executor_output_parse(raw)
        assert parsed.status == "empty"
        assert parsed.output is None


def test_prose_without_json_is_invalid_json():
    parsed = executor_output_parse("payment-service 的连接池耗尽了，建议扩容。{not json}")
    assert parsed.status == "invalid_json"
    assert parsed.raw_object is None


def test_a_top_level_json_array_is_not_an_object():
    parsed = executor_output_parse(json.dumps([json.loads(GOOD)]))
    assert parsed.status == "not_an_object"
    assert parsed.output is None
    assert codes(parsed.dropped) == {"unusable_output"}


def test_a_json_string_or_number_is_not_an_object():
    assert executor_output_parse('"just a string"').status == "not_an_object"
    assert executor_output_parse("42").status == "not_an_object"
    assert executor_output_parse("null").status == "not_an_object"


def test_claims_that_are_not_a_list_make_the_output_schema_invalid():
    parsed = executor_output_parse(
        json.dumps({"answer_version": "executor_evidence_v2", "claims": {}})
    )
    assert parsed.status == "schema_invalid"
    assert parsed.output is None
    assert parsed.raw_object == {"answer_version": "executor_evidence_v2", "claims": {}}


def test_an_object_without_claims_is_schema_invalid():
    assert executor_output_parse('{"answer": "连接池耗尽"}').status == "schema_invalid"


def test_no_claims_at_all_is_a_valid_answer():
    parsed = executor_output_parse(executor_json())
    assert parsed.status == "parsed_v2"
    assert parsed.output.claims == []


def test_missing_hypotheses_actions_and_missing_info_read_as_empty():
    raw = json.dumps({"answer_version": "executor_evidence_v2", "claims": []})
    parsed = executor_output_parse(raw)
    assert parsed.status == "parsed_v2"
    assert parsed.output.hypotheses == []
    assert parsed.output.recommended_actions == []
    assert parsed.output.missing_info == []
    assert parsed.dropped == []


def test_a_v1_object_parses_as_v1_and_its_user_facing_answer_is_not_kept():
    raw = json.dumps(
        {
            "answer_version": "executor_evidence_v1",
            "diagnosis_summary": "连接池耗尽",
            "claims": [claim("claim-1", [binding("trace-1", "request timed out after 30000ms")])],
            "hypotheses": [],
            "recommended_actions": [],
            "missing_info": [],
            "user_facing_answer": "根因已确认：数据库宕机（未经核实）",
        },
        ensure_ascii=False,
    )
    parsed = executor_output_parse(raw)
    assert parsed.status == "parsed_v1"
    assert isinstance(parsed.output, ExecutorEvidenceV1)
    assert parsed.output.user_facing_answer == ""
    assert "数据库宕机" not in parsed.output.model_dump_json()
    assert parsed.raw_object["user_facing_answer"] == "根因已确认：数据库宕机（未经核实）"


def test_a_v1_object_without_version_is_recognised_by_its_fields():
    raw = json.dumps({"claims": [], "user_facing_answer": "x", "diagnosis_summary": "y"})
    assert executor_output_parse(raw).status == "parsed_v1"


def test_an_unknown_answer_version_is_read_as_v2_with_a_finding():
    parsed = executor_output_parse(
        json.dumps({"answer_version": "executor_evidence_v9", "claims": []})
    )
    assert parsed.status == "parsed_v2"
    assert codes(parsed.dropped) == {"unknown_answer_version"}


def test_wrong_types_inside_v2_are_handled_item_by_item():
    raw = json.dumps(
        {
            "answer_version": "executor_evidence_v2",
            "claims": [
                "payment-service is down",
                {"claim_text": "no id"},
                {
                    "claim_id": 7,
                    "claim_type": 5,
                    "claim_text": "id is a number",
                    "support_level": True,
                    "evidence_bindings": "trace-1",
                },
                {
                    "claim_id": "claim-2",
                    "claim_text": ["not", "text"],
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": "trace-1",
                            "source_invocation_ids": "abc",
                            "evidence_excerpt": "x",
                        },
                        {
                            "source_type": "tool_trace",
                            "source_id": 1,
                            "source_invocation_ids": ["12", 13],
                            "evidence_excerpt": "request timed out after 30000ms",
                        },
                    ],
                },
            ],
            "hypotheses": [
                "连接泄漏",
                {"basis": "no text"},
                {"hypothesis_text": "慢查询", "needed_evidence": "慢日志"},
            ],
            "recommended_actions": {"action_text": "扩容连接池", "evidence_bindings": None},
            "missing_info": ["慢查询日志", 3, None],
        },
        ensure_ascii=False,
    )
    parsed = executor_output_parse(raw)

    assert parsed.status == "parsed_v2"
    assert [c.claim_id for c in parsed.output.claims] == ["7", "claim-2"]
    first, second = parsed.claim_notes
    assert codes(first.findings) == {"unknown_claim_type", "malformed_claim", "malformed_binding"}
    assert parsed.output.claims[0].claim_type == "other"
    assert parsed.output.claims[0].support_level == "direct"
    assert second.demote  # no claim_text
    assert second.binding_origins == (1,)
    assert parsed.output.claims[1].evidence_bindings[0].source_id == "1"
    assert parsed.output.claims[1].evidence_bindings[0].source_invocation_ids == [12, 13]
    assert [f.binding for f in second.findings if f.code == "malformed_binding"] == [0]
    assert [h.hypothesis_text for h in parsed.output.hypotheses] == ["连接泄漏", "慢查询"]
    assert parsed.output.hypotheses[1].needed_evidence == ["慢日志"]
    assert [a.action_text for a in parsed.output.recommended_actions] == ["扩容连接池"]
    assert parsed.output.missing_info == ["慢查询日志"]
    assert [f.code for f in parsed.dropped].count("malformed_claim") == 2
    assert [f.code for f in parsed.dropped].count("malformed_item") == 3


def test_nan_and_infinity_are_read_as_null():
    parsed = executor_output_parse('{"claims": [], "score": NaN, "max": Infinity}')
    assert parsed.status == "parsed_v2"
    assert parsed.raw_object["score"] is None


def test_deeply_nested_input_does_not_crash():
    deep = "[" * 100_000 + "]" * 100_000
    assert executor_output_parse(deep).status == "invalid_json"
    nested = '{"claims": [], "x": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
    assert executor_output_parse(nested).status in {"invalid_json", "parsed_v2"}


def test_ten_megabytes_of_output_do_not_crash():
    noise = ("payment-service timeout {retry} [warn] " * 300_000)[:10_000_000]
    assert executor_output_parse(noise).status == "invalid_json"
    big_excerpt = "x" * 10_000_000
    raw = executor_json(claim("claim-1", [binding("trace-1", big_excerpt)]))
    assert executor_output_parse(raw).status == "parsed_v2"


def test_a_huge_integer_does_not_crash():
    assert executor_output_parse('{"claims": [], "n": ' + "9" * 5000 + "}").status == "invalid_json"


def test_an_already_parsed_object_is_accepted():
    assert executor_output_parse(json.loads(GOOD)).status == "parsed_v2"


def test_json_object_extract_reports_its_status():
    assert json_object_extract(None) == ("empty", None)
    assert json_object_extract("nope") == ("invalid_json", None)
    assert json_object_extract('x ```json\n{"a": 1}\n```') == ("ok", {"a": 1})
    assert json_object_extract("[1, 2]") == ("ok", [1, 2])


def test_model_output_parse_validates_a_verifier_answer():
    answer = {
        "verifier_version": "verifier_v2",
        "decision": "PASS",
        "claim_checks": [{"claim_id": "claim-1", "classification": "direct_observation"}],
    }
    raw = f"Verdict:\n```json\n{json.dumps(answer)}\n```"
    result = model_output_parse(raw, VerifierOutput)
    status, parsed, error = result.status, result.output, result.detail
    assert status == "ok"
    assert parsed.decision == "PASS"
    assert error == ""


def test_model_output_parse_reports_a_schema_error_with_detail():
    result = model_output_parse('{"decision": "MAYBE"}', VerifierOutput)
    status, parsed, error = result.status, result.output, result.detail
    assert status == "schema_invalid"
    assert parsed is None
    assert "decision" in error


def test_model_output_parse_reports_each_unusable_shape():
    assert model_output_parse("", ComposerOutput).status == "empty"
    assert model_output_parse("no json", ComposerOutput).status == "invalid_json"
    assert model_output_parse("[1]", ComposerOutput).status == "not_an_object"
    assert model_output_parse('{"final_answer": "**结论**"}', ComposerOutput).status == "ok"
    assert model_output_parse('{"services": ["payment-service"]}', PlannerOutput).status == "ok"


def test_an_array_after_prose_is_not_an_object():
    assert executor_output_parse(f"Result:\n[{GOOD}]").status == "not_an_object"


def test_an_array_inside_a_broken_object_is_not_taken_for_the_answer():
    assert executor_output_parse('{"claims": [], "x": }').status == "invalid_json"


def test_a_fenced_json_block_wins_over_a_longer_object_in_the_prose():
    example = executor_json(
        claim("claim-example", [binding("trace-9", "an example excerpt " * 20)]),
        claim("claim-example-2", []),
    )
    raw = f"The format is {example}.\nMy answer:\n```json\n{GOOD}\n```"
    parsed = executor_output_parse(raw)
    assert [c.claim_id for c in parsed.output.claims] == ["claim-1"]
