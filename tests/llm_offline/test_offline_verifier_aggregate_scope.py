"""Scope as the excerpt states it: an aggregate excerpt carries the scope of its set."""

from __future__ import annotations

import pytest

from tests.llm_offline.test_offline_verifier import _claim, _verify

ALLOCATED = "Allocated resources: memory 2174Mi (57%) 4096Mi (108%)"


@pytest.mark.parametrize(
    ("text", "excerpt"),
    [
        ("节点上所有 Pod 的内存 requests 合计 2174Mi", ALLOCATED),
        ("all pods on the node request 2174Mi of memory in total", ALLOCATED),
        (
            "payment-service 的全部 3 个副本都未就绪",
            "payment-service ready replicas 0 of 3; 3 of 3 not ready",
        ),
        ("every payment-service replica restarted", "restarts: 3/3 replicas of payment-service"),
        ("整个集群的请求量合计 12000", "total requests 12000 across the cluster"),
    ],
)
def test_a_whole_set_claim_quoting_an_aggregate_over_that_set_is_not_overstated(text, excerpt):
    _, checks = _verify(
        [_claim("claim-1", text, ("trace-2", "query_logs", excerpt))], {"claim-1": "accepted"}
    )
    assert checks["claim-1"]["classification"] == "direct_observation", checks["claim-1"]


@pytest.mark.parametrize(
    ("text", "excerpt"),
    [
        ("payment-service 的所有副本都未就绪", "payment-service 2 of 3 replicas not ready"),
        ("every payment-service pod times out", "payment-service pod-1 request timed out"),
    ],
)
def test_a_part_of_the_set_still_does_not_carry_a_whole_set_claim(text, excerpt):
    _, checks = _verify(
        [_claim("claim-1", text, ("trace-2", "query_logs", excerpt))], {"claim-1": "accepted"}
    )
    assert checks["claim-1"]["classification"] == "overstated"
