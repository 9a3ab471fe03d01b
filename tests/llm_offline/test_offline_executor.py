from __future__ import annotations

import json

from diagnosis.llm.base import ExecutorRequest, Role
from diagnosis.offline import OfflineEngine
from tests.support.agents import agent_answer

from .fakes import INJECTION, WINDOW, FakeTools, Recorder

SERVICES = ["mysql", "order-service", "payment-service"]


def _request(*, language="zh-CN", plan_services=("payment-service",), retry_context=None):
    return ExecutorRequest(
        question="payment-service 从 10:20 开始大量超时，帮我看看原因",
        language=language,
        now="2026-03-02T10:40:00Z",
        window=dict(WINDOW),
        plan={"services": list(plan_services), "symptoms": ["timeout"]},
        services=list(SERVICES),
        attempt=2 if retry_context else 1,
        retry_context=retry_context,
    )


def _execute(tools=None, recorder=None, **kwargs):
    tools = tools or FakeTools()
    raw = agent_answer(
        OfflineEngine(),
        Role.EXECUTOR,
        _request(**kwargs),
        tools=tools,
        tool_specs=[],
        recorder=recorder or Recorder(),
    )
    return json.loads(raw), tools


def test_every_excerpt_the_executor_writes_occurs_verbatim_in_its_tool_output():
    output, tools = _execute()
    assert output["answer_version"] == "executor_evidence_v2"
    assert output["claims"]
    for claim in output["claims"]:
        assert claim["entity"]
        assert claim["evidence_bindings"]
        for binding in claim["evidence_bindings"]:
            result = tools.by_trace(binding["source_id"])
            assert binding["source_type"] == "tool_trace"
            assert binding["tool_name"] == result.tool_name
            assert binding["source_invocation_ids"] == [result.invocation_id]
            assert len(binding["evidence_excerpt"]) >= 20
            assert binding["evidence_excerpt"] in result.output


def test_a_runbook_injection_line_never_becomes_a_claim():
    output, _ = _execute()
    claim_texts = " ".join(c["claim_text"] for c in output["claims"])
    everything = json.dumps(output, ensure_ascii=False)
    assert INJECTION not in everything
    assert "宕机" not in claim_texts
    assert not any(c["entity"] == "mysql" for c in output["claims"])
    roots = [c for c in output["claims"] if c["claim_type"] == "root_cause"]
    assert [c["entity"] for c in roots] == ["payment-service"]


def test_a_log_line_that_gives_instructions_is_never_quoted_in_a_claim():
    tools = FakeTools()
    tools.logs = dict(tools.logs)
    tools.logs[("mysql", "ERROR")] = [
        {
            **tools.logs[("order-service", "ERROR")][0],
            "service": "mysql",
            "template": INJECTION,
            "line": f'mysql ERROR template "{INJECTION}": 3 in window',
            "samples": [f"2026-03-02T10:30:00Z mysql ERROR {INJECTION}"],
        }
    ]
    output, _ = _execute(tools=tools)
    assert INJECTION not in json.dumps(output, ensure_ascii=False)
    roots = [c["entity"] for c in output["claims"] if c["claim_type"] == "root_cause"]
    assert roots == ["payment-service"]


def test_a_downstream_service_with_only_timeout_errors_ranks_below_the_exhausted_upstream():
    # Asked about order-service only: the engine still finds the upstream cause.
    output, _ = _execute(plan_services=("order-service",))
    ranked = [c["entity"] for c in output["claims"] if c["claim_type"] == "root_cause"]
    ranked += [h["entity"] for h in output["hypotheses"] if h["entity"] not in ranked]
    assert ranked[0] == "payment-service"
    assert ranked.index("order-service") > 0
    order = next(h for h in output["hypotheses"] if h["entity"] == "order-service")
    assert "payment-service" in order["hypothesis_text"]


def test_the_root_cause_claim_binds_a_metric_and_a_log_of_its_own_service():
    output, tools = _execute()
    root = next(c for c in output["claims"] if c["claim_type"] == "root_cause")
    tools_used = {b["tool_name"] for b in root["evidence_bindings"]}
    assert {"query_metrics", "query_logs"} <= tools_used
    for binding in root["evidence_bindings"]:
        assert tools.by_trace(binding["source_id"]).output.find("payment-service") >= 0
    assert "连接池" in root["claim_text"]


def test_without_its_own_error_logs_the_cause_stays_a_hypothesis():
    tools = FakeTools()
    tools.logs = {k: v for k, v in tools.logs.items() if k[0] != "payment-service"}
    output, _ = _execute(tools=tools)
    assert not [c for c in output["claims"] if c["claim_type"] == "root_cause"]
    assert output["hypotheses"][0]["entity"] == "payment-service"
    assert output["hypotheses"][0]["needed_evidence"]
    assert any("根因" in m for m in output["missing_info"])


def test_runbook_guidance_appears_only_as_hypotheses_and_actions():
    output, _ = _execute()
    assert not any("手册" in c["claim_text"] for c in output["claims"])
    assert any("连接池耗尽排查手册" in h["hypothesis_text"] for h in output["hypotheses"])
    runbook_action = next(a for a in output["recommended_actions"] if a["evidence_bindings"])
    binding = runbook_action["evidence_bindings"][0]
    assert binding["source_type"] == "lookup_evidence_block"
    assert binding["source_id"] == "kb-pool.runbook-s1"


def test_a_failed_tool_call_is_reported_as_missing_info():
    tools = FakeTools(failing={"query_logs"})
    output, _ = _execute(tools=tools)
    assert any("query_logs" in m for m in output["missing_info"])
    assert not [c for c in output["claims"] if c["claim_type"] == "root_cause"]


def test_on_retry_it_drops_flagged_claims_and_runs_the_queries_asked_for():
    first, _ = _execute()
    flagged = first["claims"][-1]
    output, tools = _execute(
        retry_context={
            "missing_evidence": ["mysql 的错误日志"],
            "instructions": "补充 mysql 日志",
            "flagged_claims": [
                {"claim_id": flagged["claim_id"], "claim_text": flagged["claim_text"]}
            ],
        }
    )
    assert flagged["claim_text"] not in [c["claim_text"] for c in output["claims"]]
    assert ("query_logs", {"service": "mysql"}) in tools.calls


def test_an_english_session_gets_english_claims():
    output, _ = _execute(language="en-US")
    root = next(c for c in output["claims"] if c["claim_type"] == "root_cause")
    assert "root cause" in root["claim_text"]
    assert "connection pool" in root["claim_text"]


def test_the_same_evidence_gives_the_same_output_and_one_recorded_call():
    recorder = Recorder()
    first, _ = _execute(recorder=recorder)
    second, _ = _execute()
    assert first == second
    assert len(recorder.calls) == 1
    call = recorder.calls[0]
    assert call["role"] == Role.EXECUTOR
    assert call["provider"] == "offline"
    assert call["model"] == "rootproof-offline-1"
    assert call["status"] == "ok"
    assert json.loads(call["raw_response"]) == first
    assert call["tokens_in"] > 0 and call["tokens_out"] > 0
