from __future__ import annotations

import json

from diagnosis.llm.base import PlannerRequest, Role
from diagnosis.offline import OfflineEngine
from tests.support.agents import agent_answer

from .fakes import Recorder

SERVICES = ["api-gateway", "mysql", "order-service", "payment-service"]


def _plan(question, *, now="2026-03-02T10:40:00Z", window=None, history=(), alert=None):
    recorder = Recorder()
    raw = agent_answer(
        OfflineEngine(),
        Role.PLANNER,
        PlannerRequest(
            question=question,
            language="zh-CN",
            now=now,
            window=window,
            services=list(SERVICES),
            history=list(history),
            alert=alert,
        ),
        recorder=recorder,
    )
    assert recorder.calls[0]["role"] == Role.PLANNER
    return json.loads(raw)


def test_the_planner_reads_from_10_20_relative_to_now_and_starts_a_little_earlier():
    plan = _plan("payment-service 从 10:20 开始大量超时，帮我看看原因")
    assert plan["plan_version"] == "planner_v1"
    assert plan["window"] == {"start": "2026-03-02T10:10:00Z", "end": "2026-03-02T10:40:00Z"}
    assert plan["services"] == ["payment-service"]
    assert "timeout" in plan["symptoms"]
    assert plan["tools"] == ["query_metrics", "query_logs", "query_traces", "lookup_knowledge"]


def test_a_clock_time_later_than_now_means_yesterday():
    plan = _plan("since 23:50 orders fail", now="2026-03-02T00:20:00Z")
    assert plan["window"]["start"] == "2026-03-01T23:40:00Z"


def test_chinese_clock_words_and_relative_windows_are_understood():
    assert _plan("api 凌晨 3 点 10 分左右开始报错", now="2026-05-21T03:30:00Z")["window"] == {
        "start": "2026-05-21T03:00:00Z",
        "end": "2026-05-21T03:30:00Z",
    }
    assert _plan("过去一小时 mysql 很慢")["window"]["start"] == "2026-03-02T09:40:00Z"
    assert _plan("last 30 minutes: 5xx on the gateway")["window"]["start"] == (
        "2026-03-02T10:10:00Z"
    )


def test_without_times_it_uses_the_window_hint_or_the_last_thirty_minutes():
    hint = {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}
    assert _plan("订单失败了", window=hint)["window"] == hint
    assert _plan("订单失败了")["window"]["start"] == "2026-03-02T10:10:00Z"


def test_services_are_matched_in_any_case_and_service_looking_tokens_are_kept():
    plan = _plan("Order-Service 和 MySQL 报错，还有 coupon-service 也不正常")
    assert plan["services"] == ["order-service", "mysql", "coupon-service"]


def test_a_follow_up_question_inherits_the_services_of_the_conversation():
    plan = _plan("那现在呢？", history=[{"question": "payment-service 超时", "answer": "…"}])
    assert plan["services"] == ["payment-service"]


def test_an_alert_names_its_service_and_start_time():
    plan = _plan(
        "告警",
        alert={
            "labels": {"service": "order-service", "alertname": "High5xx"},
            "startsAt": "2026-03-02T10:25:00Z",
        },
    )
    assert plan["services"] == ["order-service"]
    assert plan["window"]["start"] == "2026-03-02T10:15:00Z"
    assert "errors" in plan["symptoms"]
