from __future__ import annotations

import json

from diagnosis.contracts import (
    GatekeeperClaimResult,
    GatekeeperReport,
    ParseStatus,
    TraceSummaryEntry,
    VerifierPayload,
)
from diagnosis.llm.base import Role
from diagnosis.offline import OfflineEngine
from tests.support.agents import agent_answer

from .fakes import Recorder

METRIC_LINE = 'payment-service hikaricp_connections_active{pool="main"}: window max 20 (up)'
LOG_LINE = "HikariPool-1 - Connection is not available, request timed out after 30004ms"
TRACES = [
    TraceSummaryEntry(
        trace_ref="trace-1",
        invocation_id=11,
        tool_name="query_metrics",
        arguments={"service": "payment-service"},
        status="ok",
        summary=json.dumps(
            {
                "series": [
                    {
                        "service": "payment-service",
                        "metric": "hikaricp_connections_active",
                        "direction": "up",
                    },
                    {
                        "service": "payment-service",
                        "metric": "http_requests_total",
                        "direction": "down",
                    },
                ]
            }
        ),
    ),
    TraceSummaryEntry(
        trace_ref="trace-2",
        invocation_id=12,
        tool_name="query_logs",
        arguments={"service": "payment-service", "level": "ERROR"},
        status="ok",
        summary='{"templates": [{"service": "payment-service", "template": "HikariPool"}]}',
    ),
]


def _claim(claim_id, text, *bindings, claim_type="symptom", entity="payment-service"):
    return {
        "claim_id": claim_id,
        "claim_type": claim_type,
        "claim_text": text,
        "entity": entity,
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": trace,
                "tool_name": tool,
                "evidence_excerpt": excerpt,
            }
            for trace, tool, excerpt in bindings
        ],
    }


METRIC = ("trace-1", "query_metrics", METRIC_LINE)
LOG = ("trace-2", "query_logs", LOG_LINE)


def _verify(claims, verdicts, *, status=ParseStatus.PARSED_V2, retry_context=None):
    report = GatekeeperReport(
        parse_status=status,
        claims=[GatekeeperClaimResult(claim_id=cid, verdict=v) for cid, v in verdicts.items()],
    )
    payload = VerifierPayload(
        original_query="payment-service 为什么超时",
        executor_final_answer="{}",
        executor_structured_output={"answer_version": "executor_evidence_v2", "claims": claims},
        executor_output_parse_status=status,
        gatekeeper=report,
        tool_trace_summary=TRACES,
        retry_context=retry_context,
    )
    recorder = Recorder()
    raw = agent_answer(OfflineEngine(), Role.VERIFIER, payload, recorder=recorder)
    assert recorder.calls[0]["role"] == Role.VERIFIER
    output = json.loads(raw)
    assert output["verifier_version"] == "verifier_v2"
    return output, {c["claim_id"]: c for c in output["claim_checks"]}


def test_a_direct_symptom_and_a_root_cause_bound_to_metric_and_log_pass():
    output, checks = _verify(
        [
            _claim(
                "claim-1",
                "payment-service 的连接池耗尽是根因",
                METRIC,
                LOG,
                claim_type="root_cause",
            ),
            _claim("claim-2", "payment-service 出现连接获取超时日志", LOG),
        ],
        {"claim-1": "accepted", "claim-2": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "direct_observation"
    assert checks["claim-2"]["classification"] == "direct_observation"
    assert output["decision"] == "PASS"


def test_a_root_cause_bound_to_a_log_only_is_a_bounded_inference():
    output, checks = _verify(
        [
            _claim("claim-1", "payment-service 的连接池耗尽是根因", LOG, claim_type="root_cause"),
            _claim("claim-2", "payment-service 出现连接获取超时日志", LOG),
        ],
        {"claim-1": "accepted", "claim-2": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "reasonable_inference"
    assert "可能" in checks["claim-1"]["bounded_wording"]
    assert output["decision"] == "PASS"


def test_a_claim_the_gatekeeper_demoted_is_never_allowed_and_blocks_a_pass():
    output, checks = _verify(
        [
            _claim(
                "claim-1",
                "mysql 的连接池耗尽是根因",
                ("trace-9", "query_logs", "made up"),
                claim_type="root_cause",
                entity="payment-service",
            ),
            _claim("claim-2", "payment-service 出现连接获取超时日志", LOG),
        ],
        {"claim-1": "demoted", "claim-2": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "unsupported"
    assert output["decision"] == "LOW_CONFID"


def test_a_claim_about_something_outside_the_trace_is_external_unknown():
    _, checks = _verify(
        [_claim("claim-1", "redis 集群已经恢复", entity="redis")], {"claim-1": "demoted"}
    )
    assert checks["claim-1"]["classification"] == "external_unknown"


def test_a_claim_opposite_to_the_trace_is_contradicted_and_rejected():
    output, checks = _verify(
        [
            _claim("claim-1", "payment-service 的 http_requests_total 明显升高", METRIC),
            _claim("claim-2", "payment-service 出现连接获取超时日志", LOG),
        ],
        {"claim-1": "demoted", "claim-2": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "contradicted"
    assert output["decision"] == "REJECT"


def test_absolute_wording_missing_from_the_evidence_is_overstated():
    _, checks = _verify(
        [_claim("claim-1", "payment-service 已经宕机", LOG)], {"claim-1": "accepted"}
    )
    assert checks["claim-1"]["classification"] == "overstated"


def test_nothing_accepted_asks_for_a_retry_once_then_settles_for_low_confidence():
    claims = [_claim("claim-1", "payment-service 出现超时", ("trace-2", "query_logs", "nope"))]
    first, _ = _verify(claims, {"claim-1": "demoted"})
    assert first["decision"] == "RETRY"
    assert first["retry_request"]["missing_evidence"]
    second, _ = _verify(claims, {"claim-1": "demoted"}, retry_context={"attempt": 1})
    assert second["decision"] == "LOW_CONFID"
    assert second["retry_request"] is None


def test_unparsable_output_is_retried_and_a_schema_invalid_retry_is_rejected():
    first, _ = _verify([], {}, status=ParseStatus.INVALID_JSON)
    assert first["decision"] == "RETRY"
    second, _ = _verify([], {}, status=ParseStatus.SCHEMA_INVALID, retry_context={"attempt": 1})
    assert second["decision"] == "REJECT"
    third, _ = _verify([], {}, status=ParseStatus.EMPTY, retry_context={"attempt": 1})
    assert third["decision"] == "LOW_CONFID"


def test_the_retry_asked_for_unparsable_output_names_the_reason_in_words():
    output, _ = _verify([], {}, status=ParseStatus.TRUNCATED)
    instructions = output["retry_request"]["instructions"]
    assert "输出被截断" in instructions
    assert "truncated" not in instructions  # the stored status code is not the reason


ENTRY_ERRORS = (
    "trace-1",
    "query_metrics",
    'http_requests_total{service="payment-service",status="503"}: error ratio 0.41 (up)',
)


def test_universal_scope_the_excerpts_do_not_carry_is_overstated_and_the_reason_says_so():
    for text, word in [
        ("payment-service 所有连接请求都超时", "所有"),
        ("整个 payment-service 集群 HikariPool-1 连接不可用", "整个"),
        ("every payment-service pod times out after 30004ms", "every"),
        ("the whole cluster shows HikariPool-1 timeouts", "whole"),
    ]:
        _, checks = _verify([_claim("claim-1", text, LOG)], {"claim-1": "accepted"})
        assert checks["claim-1"]["classification"] == "overstated", text
        assert word in checks["claim-1"]["reason"]
        assert checks["claim-1"]["reason"].startswith("范围越界")


def test_a_universal_word_the_excerpt_carries_is_not_overstated():
    excerpt = ("trace-2", "query_logs", "all 3 replicas of payment-service are not ready")
    _, checks = _verify(
        [_claim("claim-1", "payment-service: all 3 replicas are not ready", excerpt)],
        {"claim-1": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "direct_observation"


def test_user_impact_from_one_components_symptom_is_overstated():
    for text in [
        "payment-service 连接池超时已导致全站用户无法访问",
        "用户无法支付：HikariPool-1 连接不可用",
        "users cannot pay because HikariPool-1 timed out",
    ]:
        _, checks = _verify([_claim("claim-1", text, LOG)], {"claim-1": "accepted"})
        assert checks["claim-1"]["classification"] == "overstated", text
        # "全站" is a universal scope too: either rule names why
        assert checks["claim-1"]["reason"].startswith(("影响缺少证据", "范围越界"))
    _, checks = _verify([_claim("claim-1", "用户无法支付", LOG)], {"claim-1": "accepted"})
    assert checks["claim-1"]["reason"].startswith("影响缺少证据")


def test_user_impact_with_failing_requests_at_the_entry_is_an_observation():
    _, checks = _verify(
        [_claim("claim-1", "用户请求失败：payment-service 的 503 错误率为 0.41", ENTRY_ERRORS)],
        {"claim-1": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "direct_observation"


def test_a_component_that_cannot_reach_another_is_no_user_impact_claim():
    _, checks = _verify(
        [_claim("claim-1", "payment-service HikariPool-1 连接不可用", LOG)],
        {"claim-1": "accepted"},
    )
    assert checks["claim-1"]["classification"] == "direct_observation"


def test_the_rule_is_named_in_english_for_an_english_session():
    report = GatekeeperReport(
        parse_status=ParseStatus.PARSED_V2,
        claims=[GatekeeperClaimResult(claim_id="claim-1", verdict="accepted")],
    )
    payload = VerifierPayload(
        original_query="why does payment-service time out?",
        executor_final_answer="{}",
        executor_structured_output={
            "claims": [_claim("claim-1", "all payment-service requests time out", LOG)]
        },
        executor_output_parse_status=ParseStatus.PARSED_V2,
        gatekeeper=report,
        tool_trace_summary=TRACES,
    )
    output = json.loads(agent_answer(OfflineEngine(), Role.VERIFIER, payload, recorder=Recorder()))
    [check] = output["claim_checks"]
    assert check["classification"] == "overstated"
    assert check["reason"].startswith("universal scope")
