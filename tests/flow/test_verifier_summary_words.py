"""The offline Verifier's stored summary says its counts and decision in words, no raw codes."""

from __future__ import annotations

import json
import re

import pytest

from diagnosis.contracts import (
    Classification,
    Decision,
    GatekeeperClaimResult,
    GatekeeperReport,
    ParseStatus,
    VerifierPayload,
)
from diagnosis.llm.base import Role
from diagnosis.offline import OfflineEngine
from tests.llm_offline.fakes import Recorder
from tests.llm_offline.test_offline_verifier import LOG, METRIC, TRACES, _claim
from tests.support.agents import agent_answer

RAW_CODES = re.compile("|".join([*(c.value for c in Classification), *(d.value for d in Decision)]))


def _summary(query, claims, verdicts):
    payload = VerifierPayload(
        original_query=query,
        executor_final_answer="{}",
        executor_structured_output={"answer_version": "executor_evidence_v2", "claims": claims},
        executor_output_parse_status=ParseStatus.PARSED_V2,
        gatekeeper=GatekeeperReport(
            parse_status=ParseStatus.PARSED_V2,
            claims=[GatekeeperClaimResult(claim_id=c, verdict=v) for c, v in verdicts.items()],
        ),
        tool_trace_summary=TRACES,
    )
    output = json.loads(agent_answer(OfflineEngine(), Role.VERIFIER, payload, recorder=Recorder()))
    return output["summary"], output["decision"]


CLAIMS = [
    _claim("claim-1", "payment-service 出现连接获取超时日志", LOG),
    _claim("claim-2", "payment-service 的连接池活跃连接升高", METRIC),
    _claim("claim-3", "mysql 宕机", LOG),
]
VERDICTS = {"claim-1": "accepted", "claim-2": "accepted", "claim-3": "demoted"}


@pytest.mark.parametrize(
    ("query", "words"),
    [
        (
            "payment-service 为什么超时",
            ("3 条声明", "直接观测 2", "缺乏支持 1", "核验结论：证据充分"),
        ),
        (
            "why is payment-service timing out",
            ("3 claims", "Direct observation 2", "Unsupported 1", "verdict: Well supported"),
        ),
    ],
)
def test_the_summary_counts_classifications_in_words_in_the_sessions_language(query, words):
    summary, decision = _summary(query, CLAIMS, VERDICTS)
    assert decision == "PASS"
    assert not RAW_CODES.search(summary), summary
    for word in words:
        assert word in summary, summary


def test_a_summary_without_claims_says_so_in_words():
    summary, _ = _summary("payment-service 为什么超时", [], {})
    assert "没有可核验的声明" in summary and not RAW_CODES.search(summary)
