"""What parsing found wrong with a model's answer is stored as a code a page words in its
language, beside the English detail exports and older rows keep."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import translation
from pydantic import BaseModel, model_validator

from chat.templatetags.chat_tags import finding_detail
from diagnosis.contracts import VerifierOutput
from diagnosis.flow.parsing import (
    ParseStatus,
    detail_coded,
    executor_output_parse,
    model_output_parse,
)
from diagnosis.wording import PARSE_DETAILS, PARSE_STATUS_WORDS

CJK = re.compile(r"[\u4e00-\u9fff]")
GOOD_BINDING = {"source_type": "tool_trace", "source_id": "trace-1", "evidence_excerpt": "x"}


def _broken_answer() -> str:
    """One Executor answer with every kind of item parsing repairs or drops."""
    return json.dumps(
        {
            "answer_version": "executor_evidence_v9",
            "claims": [
                42,
                {"claim_text": "no id"},
                {
                    "claim_id": "c-bad",
                    "claim_text": "",
                    "claim_type": "weird",
                    "support_level": "strong",
                    "evidence_bindings": 5,
                },
                {
                    "claim_id": "c-bindings",
                    "claim_type": "symptom",
                    "claim_text": "payment-service 超时",
                    "evidence_bindings": [
                        GOOD_BINDING,
                        7,
                        {"source_type": ""},
                        {**GOOD_BINDING, "tool_name": 5},
                        {**GOOD_BINDING, "source_invocation_ids": "many"},
                    ],
                },
            ],
            "hypotheses": [5, {"hypothesis_text": ""}],
            "recommended_actions": 3,
            "missing_info": ["", 9],
        }
    )


class _Checked(BaseModel):
    value: int = 0

    @model_validator(mode="after")
    def _whole(self) -> _Checked:
        if self.value == 1:
            raise ValueError("the whole object is wrong")
        if self.value == 2:
            raise RuntimeError("a validator that misbehaves")
        return self


def _stage_results():
    """Every way a whole-object answer (Planner, Verifier, Composer) fails to parse."""
    inputs = ["", "prose only", '{"decision": "PASS", "claim_checks": [', "[1, 2]"]
    results = [model_output_parse(raw, VerifierOutput) for raw in inputs]
    results.append(model_output_parse('{"decision": "MAYBE"}', VerifierOutput))
    results += [model_output_parse(json.dumps({"value": v}), _Checked) for v in (1, 2)]
    return results


def _findings() -> list[dict]:
    parsed = executor_output_parse(_broken_answer())
    notes = [f for n in parsed.claim_notes for f in n.findings]
    unusable = [executor_output_parse(raw).dropped[0] for raw in ('{"x": 1}', '{"claims": 3}')]
    return [f.model_dump() for f in [*parsed.dropped, *notes, *unusable]]


def test_every_parse_problem_is_stored_with_a_code_a_page_can_word():
    codes = {f["detail_code"] for f in _findings()}
    codes |= {r.detail_code for r in _stage_results()}
    # reachable only through a broken contract model or an internal error
    unreachable = {"claim_fields_invalid", "binding_fields_invalid", "item_failed"}
    assert codes == set(PARSE_DETAILS) - unreachable
    for item in _findings():
        assert item["detail"], item  # the English text stays, for exports and the API


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_a_page_reads_each_parse_problem_in_its_own_language(language):
    stored = _findings() + [detail_coded(r) | {"detail": r.detail} for r in _stage_results()]
    for item in stored:
        with translation.override(language):
            worded = finding_detail(item)
        assert worded and "%(" not in worded, item
        assert bool(CJK.search(worded)) == (language == "zh-hans"), (item, worded)


def test_the_wording_numbers_claims_and_items_from_one_and_names_json_types():
    by_code = {f["detail_code"]: f for f in _findings()}
    with translation.override("zh-hans"):
        assert finding_detail(by_code["claim_not_object"]) == "第 1 条论断不是对象（42），已丢弃"
        assert finding_detail(by_code["item_empty"]).startswith("missing_info 的第 1 项")
    with translation.override("en"):
        assert finding_detail(by_code["claim_id_missing"]).startswith("claim 2 has no usable")
        assert finding_detail(by_code["item_not_string"]) == (
            "item 2 of missing_info is not a string (9); dropped"
        )
        not_object = model_output_parse("[1, 2]", VerifierOutput)
        assert finding_detail(detail_coded(not_object)) == (
            "the JSON value is not an object (JSON type: array)"
        )
    # the stored English reads as it always did: JSON paths as the model's JSON has them
    assert by_code["claim_not_object"]["detail"] == "claims[0] is not an object: 42; dropped"


def test_a_malformed_binding_keeps_its_index_and_its_field_names():
    parsed = executor_output_parse(_broken_answer())
    assert parsed.output is not None
    ids = [c.claim_id for c in parsed.output.claims]
    bindings = parsed.claim_notes[ids.index("c-bindings")]
    shown = [(f.binding, f.detail_code, f.detail_params.get("field")) for f in bindings.findings]
    assert shown == [
        (1, "binding_not_object", None),
        (2, "binding_field_missing", "source_type"),
        (3, "binding_field_not_string", "tool_name"),
        (4, "binding_ids_not_integers", None),
    ]
    assert bindings.binding_origins == (0,)


def test_a_stage_answer_that_parses_stores_no_code():
    parsed = model_output_parse(
        '{"decision": "PASS", "claim_checks": [], "summary": "ok"}', VerifierOutput
    )
    assert parsed.status == "ok" and detail_coded(parsed) == {}
    assert detail_coded(model_output_parse("", VerifierOutput)) == {
        "detail_code": "output_empty",
        "detail_params": {},
    }


def test_every_parse_status_has_words_in_both_languages():
    assert set(PARSE_STATUS_WORDS) == {s.value for s in ParseStatus}
    with translation.override("en"):
        for status, words in PARSE_STATUS_WORDS.items():
            assert not CJK.search(str(words)), status
