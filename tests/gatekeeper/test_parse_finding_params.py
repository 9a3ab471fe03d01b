"""A finding's parameters may have any name, and a list item parsing turns down is always
recorded with its reason (no assert stands in for the check, so ``python -O`` reads alike)."""

from __future__ import annotations

import json

from diagnosis.contracts import FindingCode, Hypothesis
from diagnosis.flow import parsing
from diagnosis.flow.parsing import executor_output_parse, executor_proposals_parse, finding

from .conftest import binding, claim, executor_json


def test_a_finding_keeps_parameters_named_like_its_own_arguments():
    made = finding(
        FindingCode.MALFORMED_ITEM,
        "the detail",
        3,
        detail_code="item_not_object",
        params={"code": "E42", "detail": "d", "binding": 7, "detail_code": "x", "params": "p"},
    )
    assert (made.code, made.detail, made.binding, made.detail_code) == (
        "malformed_item",
        "the detail",
        3,
        "item_not_object",
    )
    assert made.detail_params == {
        "code": "E42",
        "detail": "d",
        "binding": 7,
        "detail_code": "x",
        "params": "p",
    }


def test_a_finding_without_parameters_has_none():
    assert finding(FindingCode.NO_BINDINGS, "none", detail_code="no_bindings").detail_params == {}


def test_a_turned_down_binding_is_recorded_at_its_index_and_the_others_are_kept():
    good = binding("trace-1", "request timed out after 30000ms")
    raw = executor_json(claim("claim-1", [7, good, {"source_type": ""}]))
    parsed = executor_output_parse(raw)
    assert parsed.status == "parsed_v2"
    assert parsed.claim_notes[0].binding_origins == (1,)
    assert [(f.binding, f.detail_code) for f in parsed.claim_notes[0].findings] == [
        (0, "binding_not_object"),
        (2, "binding_field_missing"),
    ]


def test_an_item_whose_parser_raises_is_dropped_with_a_recorded_reason(monkeypatch):
    def parse_or_raise(item: object) -> Hypothesis | parsing._Problem:
        if item == "boom":
            raise RecursionError("deep")
        return Hypothesis.model_validate({"hypothesis_text": str(item)})

    monkeypatch.setattr(parsing, "_hypothesis_parse", parse_or_raise)
    raw = json.loads(executor_json(claim("claim-1", [])))
    raw["hypotheses"] = ["pool exhausted", "boom", 5]
    parsed = executor_output_parse(json.dumps(raw))
    assert parsed.status == "parsed_v2"
    assert parsed.output is not None
    assert [h.hypothesis_text for h in parsed.output.hypotheses] == ["pool exhausted", "5"]
    (dropped,) = [f for f in parsed.dropped if f.code == FindingCode.MALFORMED_ITEM]
    assert dropped.detail_code == "item_failed"
    assert dropped.detail_params == {"error": "RecursionError", "field": "hypotheses", "item": 2}


def test_a_stored_answer_reads_its_proposals_past_the_items_it_turns_down():
    hypotheses, actions, missing = executor_proposals_parse(
        {
            "hypotheses": [5, "pool exhausted", {"hypothesis_text": ""}],
            "recommended_actions": ["raise the pool size", None],
            "missing_info": ["", "the pool's metrics", 9],
        }
    )
    assert [h.hypothesis_text for h in hypotheses] == ["pool exhausted"]
    assert [a.action_text for a in actions] == ["raise the pool size"]
    assert missing == ["the pool's metrics"]
