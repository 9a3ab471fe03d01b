"""Property tests: no input makes the parser or the Gatekeeper raise."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnosis.contracts import (
    ComposerOutput,
    GatekeeperReport,
    ParseStatus,
    PlannerOutput,
    VerifierOutput,
)
from diagnosis.facts import text_normalize, text_normalize_mapped
from diagnosis.flow.gatekeeper import (
    InvocationRecord,
    excerpt_locate,
    excerpt_matches,
    gatekeeper_check,
)
from diagnosis.flow.parsing import ParsedExecutorOutput, executor_output_parse, model_output_parse

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)

keys = st.sampled_from(
    [
        "claim_id",
        "claim_type",
        "claim_text",
        "support_level",
        "evidence_bindings",
        "source_type",
        "source_id",
        "tool_name",
        "source_invocation_ids",
        "evidence_excerpt",
        "entity",
    ]
)
values = st.sampled_from(
    [
        "claim-1",
        "trace-1",
        "trace-2",
        "tool_trace",
        "lookup_evidence_block",
        "kb-a",
        "direct",
        "indirect",
        "none",
        "root_cause",
        "query_logs",
        "lookup_knowledge",
        "timed out after 30000ms",
        "超时 …",
        1,
        2,
        -1,
        2**64,
        None,
        True,
        [],
        {},
        [1, 2],
        ["x"],
    ]
)
shaped_values = st.recursive(
    values,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=6),
    max_leaves=25,
)
shaped_outputs = st.fixed_dictionaries(
    {
        "answer_version": st.sampled_from(["executor_evidence_v2", "executor_evidence_v1", 3]),
        "claims": st.lists(shaped_values, max_size=6),
    },
    optional={
        "hypotheses": shaped_values,
        "recommended_actions": shaped_values,
        "missing_info": shaped_values,
    },
)

texty = st.text(
    alphabet=st.sampled_from(list("ab 1230.,%-—–“”'\"`…\n\t　连接池耗尽ＡＢ１２（）：=|"))
    | st.characters(),
    max_size=200,
)
records = st.lists(
    st.builds(
        InvocationRecord,
        id=st.integers(1, 6),
        session_id=st.sampled_from([1, 2]),
        trace_ref=st.sampled_from(["trace-1", "trace-2", "trace-3"]),
        tool_name=st.sampled_from(["query_logs", "query_metrics", "lookup_knowledge", "other"]),
        status=st.sampled_from(["ok", "error"]),
        output=texty
        | st.just("=== kb-a | t / h ===\ntimed out after 30000ms\n=== kb-b | x ===\ny"),
        summary=st.just({})
        | st.just({"chunks": [{"chunk_id": "kb-a"}, "x"]})
        | st.just({"chunks": 3}),
    ),
    max_size=5,
)


@FAST
@given(st.text() | st.binary())
def test_the_executor_parser_never_raises_on_arbitrary_text(raw):
    parsed = executor_output_parse(raw)
    assert parsed.status in set(ParseStatus)


@FAST
@given(json_values, st.sampled_from(["", "prose ", "```json\n", "\ufeff"]))
def test_the_executor_parser_never_raises_on_arbitrary_json(value, prefix):
    parsed = executor_output_parse(prefix + json.dumps(value))
    assert (parsed.output is None) == (parsed.status not in {"parsed_v2", "parsed_v1"})


@FAST
@given(json_values | st.text(), st.sampled_from([VerifierOutput, ComposerOutput, PlannerOutput]))
def test_model_output_parse_never_raises(value, model):
    raw = value if isinstance(value, str) else json.dumps(value)
    result = model_output_parse(raw, model)
    status, parsed, _error = result.status, result.output, result.detail
    assert (parsed is not None) == (status == "ok")


@FAST
@given(shaped_outputs, records)
def test_the_gatekeeper_never_raises_on_executor_shaped_json(obj, invocation_records):
    parsed = executor_output_parse(json.dumps(obj))
    report = gatekeeper_check(
        parsed=parsed, invocations=invocation_records, session_id=1, foreign_invocation_ids=[5]
    )
    assert isinstance(report, GatekeeperReport)
    assert report.counts.claims == report.counts.accepted + report.counts.demoted
    GatekeeperReport.model_validate_json(report.model_dump_json())


@FAST
@given(st.text() | st.binary(), records)
def test_the_gatekeeper_never_raises_on_arbitrary_text(raw, invocation_records):
    report = gatekeeper_check(
        parsed=executor_output_parse(raw), invocations=invocation_records, session_id=1
    )
    assert isinstance(report, GatekeeperReport)


@FAST
@given(json_values)
def test_the_gatekeeper_never_raises_on_a_hand_built_parse_result(value):
    parsed = ParsedExecutorOutput(status=value, raw_object=value, output=value, dropped=value)  # type: ignore[arg-type]
    assert isinstance(
        gatekeeper_check(parsed=parsed, invocations=[], session_id=1), GatekeeperReport
    )


@FAST
@given(texty, texty)
def test_matching_and_locating_never_raise(excerpt, text):
    result = excerpt_matches(excerpt, text_normalize(text))
    spans = excerpt_locate(excerpt, text)
    assert all(0 <= s < e <= len(text) for s, e in spans)
    if spans:
        assert result.matched


@FAST
@given(
    st.text(
        alphabet=st.sampled_from(list("aB1 .,%-—“”'`…\n\t　连接池耗尽ＡＢ１２（）：")), max_size=120
    )
)
def test_highlighting_normalises_exactly_like_the_gatekeeper(text):
    assert text_normalize_mapped(text)[0] == text_normalize(text)
