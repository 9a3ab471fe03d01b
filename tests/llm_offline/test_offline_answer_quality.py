"""What an SRE reads: only the facts that matter, in words, with the cause and its cascade first."""

from __future__ import annotations

import json
import re

from diagnosis.contracts import AllowedClaim, AllowedHypothesis, ComposerInput, Decision
from diagnosis.flow.guard import composer_guard
from diagnosis.llm.base import ExecutorRequest, Role
from diagnosis.offline import OfflineEngine
from diagnosis.offline.common import numbers_covered
from diagnosis.offline.symptoms import MAX_SYMPTOMS
from diagnosis.offline.wording import TEMPLATE_CHARS, short_text
from tests.support.agents import agent_answer

from .fakes import LOGS, METRICS, WINDOW, FakeTools, Recorder, series, template

SERVICES = ["cart-service", "mysql", "order-service", "payment-service"]
LONG_MESSAGE = (
    "Payment request failed: orderId=O26030285406 error=org.springframework.jdbc."
    "CannotGetJdbcConnectionException: Failed to obtain JDBC Connection; nested exception is "
    "java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available"
)


def _tools() -> FakeTools:
    tools = FakeTools()
    tools.metrics = dict(METRICS)
    tools.logs = dict(LOGS)
    # A bystander whose p50 drifted by a few percent: real, but no symptom of this incident.
    tools.metrics["cart-service"] = [
        series(
            "cart-service",
            "http_request_duration_seconds",
            {"quantile": "0.5"},
            0.01462,
            0.01545,
            0.0164,
            "2026-03-02T10:35:00Z",
            "2026-03-02T10:30:00Z",
            "up",
            3.0,
            ratio=1.06,
        )
    ]
    # The caller's errors went from almost nothing to a lot, and from zero to some.
    tools.metrics["order-service"] = [
        series(
            "order-service",
            "http_requests_total",
            {"status": "504"},
            0.01542,
            18.19,
            30.5,
            "2026-03-02T10:27:00Z",
            "2026-03-02T10:18:00Z",
            "up",
            1000.0,
            ratio=1179.9,
        ),
        series(
            "order-service",
            "circuit_breaker_open_total",
            {},
            0,
            2.5,
            4,
            "2026-03-02T10:20:00Z",
            "2026-03-02T10:19:00Z",
            "up",
            1000.0,
        ),
    ]
    return tools


def _request(language: str = "zh-CN") -> ExecutorRequest:
    return ExecutorRequest(
        question="payment-service 从 10:20 开始大量超时，帮我看看原因",
        language=language,
        now="2026-03-02T10:40:00Z",
        window=dict(WINDOW),
        plan={"services": ["payment-service"], "symptoms": ["timeout"]},
        services=list(SERVICES),
        attempt=1,
    )


def _execute(tools: FakeTools | None = None, language: str = "zh-CN") -> dict:
    raw = agent_answer(
        OfflineEngine(),
        Role.EXECUTOR,
        _request(language),
        tools=tools or _tools(),
        tool_specs=[],
        recorder=Recorder(),
    )
    return json.loads(raw)


def _composer_input(output: dict, decision: Decision, language: str) -> ComposerInput:
    """Every claim allowed as the Executor worded it (a Verifier that agreed with everything)."""
    return ComposerInput(
        decision=decision,
        language=language,
        question="payment-service 从 10:20 开始大量超时，帮我看看原因",
        allowed_claims=[
            AllowedClaim(
                claim_id=c["claim_id"],
                text=c["claim_text"],
                wording="definite" if c["support_level"] == "direct" else "bounded",
                entity=c["entity"],
                claim_type=c["claim_type"],
            )
            for c in output["claims"]
        ],
        allowed_hypotheses=[
            AllowedHypothesis(text=h["hypothesis_text"], basis=h["basis"], entity=h["entity"])
            for h in output["hypotheses"]
        ],
        missing_info=output["missing_info"],
    )


def _compose(composer_input: ComposerInput) -> str:
    raw = agent_answer(OfflineEngine(), Role.COMPOSER, composer_input, recorder=Recorder())
    answer = json.loads(raw)["final_answer"]
    findings = composer_guard(answer=answer, composer_input=composer_input, known_services=SERVICES)
    assert findings == []
    return answer


def _section(answer: str, heading: str) -> str:
    match = re.search(rf"\*\*{re.escape(heading)}\*\*\n\n(.*?)(?:\n\n\*\*|\Z)", answer, re.S)
    return match.group(1) if match else ""


def test_a_bystander_that_only_drifted_a_little_is_neither_confirmed_nor_suspected():
    output = _execute()
    entities = {c["entity"] for c in output["claims"]} | {h["entity"] for h in output["hypotheses"]}
    assert "cart-service" not in entities
    assert "order-service" in {c["entity"] for c in output["claims"]}


def test_symptom_claims_are_capped_and_the_cause_comes_first():
    tools = _tools()
    tools.metrics["payment-service"] = [
        *METRICS["payment-service"],
        *(
            series(
                "payment-service",
                f"payment_step_{n}_errors_total",
                {},
                0.1,
                20.0 + n,
                30.0 + n,
                "2026-03-02T10:25:00Z",
                "2026-03-02T10:17:00Z",
                "up",
                500.0,
                ratio=200.0 + n,
            )
            for n in range(8)
        ),
    ]
    output = _execute(tools)
    symptoms = [c for c in output["claims"] if c["claim_type"] == "symptom"]
    assert 0 < len(symptoms) <= MAX_SYMPTOMS
    assert output["claims"][0]["claim_type"] == "root_cause"


def test_a_claim_says_how_far_a_series_moved_with_numbers_from_its_own_excerpts():
    output = _execute()
    texts = " ".join(c["claim_text"] for c in output["claims"])
    assert "窗口均值约为基线的 1179.9 倍" in texts
    assert "基线为 0，窗口内新出现" in texts
    for claim in output["claims"]:
        excerpts = "\n".join(b["evidence_excerpt"] for b in claim["evidence_bindings"])
        assert numbers_covered(claim["claim_text"], excerpts), claim["claim_text"]


def test_a_basis_reads_as_words_not_an_internal_anomaly_score():
    output = _execute()
    english = _execute(language="en")
    bases = [h["basis"] for h in output["hypotheses"]]
    english_bases = [h["basis"] for h in english["hypotheses"]]
    assert not any("异常分" in b for b in bases)
    assert not any("anomaly score" in b for b in english_bases)
    order = next(h for h in output["hypotheses"] if h["entity"] == "order-service")
    assert "明显高于基线（窗口均值约为基线的 1179.9 倍）" in order["basis"]
    order_en = next(h for h in english["hypotheses"] if h["entity"] == "order-service")
    assert "well above its baseline (window mean about 1179.9× the baseline)" in order_en["basis"]


def test_a_long_log_message_is_quoted_up_to_the_limit_and_cut_at_a_word() -> None:
    assert short_text(LONG_MESSAGE[:150]) == LONG_MESSAGE[:150]
    cut = short_text(LONG_MESSAGE)
    assert cut.endswith("…") and len(cut) <= TEMPLATE_CHARS
    kept = cut[:-1]
    assert LONG_MESSAGE.startswith(kept) and LONG_MESSAGE[len(kept)] == " "
    # no word to cut at: never end inside a number
    assert short_text("x" * 150 + "1234567890123") == "x" * 150 + "…"
    assert short_text("x" * 150 + "12345678.12345") == "x" * 150 + "…"


def test_a_log_claim_quotes_the_whole_message_when_it_fits():
    tools = _tools()
    message = LONG_MESSAGE[:150]
    tools.logs[("payment-service", "WARN")] = [
        template(
            "payment-service",
            "WARN",
            "Payment request failed: orderId=<ID> error=<*>",
            584,
            0,
            "2026-03-02T10:16:53.418Z",
            [message],
        )
    ]
    output = _execute(tools)
    assert any(message in c["claim_text"] for c in output["claims"])


def test_the_conclusion_names_the_cause_with_its_evidence_and_the_cascade():
    output = _execute()
    root = next(c for c in output["claims"] if c["claim_type"] == "root_cause")
    answer = _compose(_composer_input(output, Decision.PASS, "zh-CN"))
    lead = _section(answer, "结论")
    assert root["claim_text"] in lead
    assert "影响沿调用链传导：order-service 调用 payment-service 超时" in lead
    assert root["claim_text"] not in _section(answer, "已确认")

    english = _execute(language="en")
    answer_en = _compose(_composer_input(english, Decision.PASS, "en"))
    lead_en = _section(answer_en, "Conclusion")
    assert "root cause" in lead_en
    assert "order-service timed out calling payment-service" in lead_en


def test_a_confirmed_cause_stays_confirmed_without_a_pass_and_the_rest_is_hedged():
    # issue 14: an accepted direct observation is stated as confirmed whatever the decision
    output = _execute()
    lead = _section(_compose(_composer_input(output, Decision.LOW_CONFID, "zh-CN")), "结论")
    assert lead.startswith("根据本次取证，payment-service")
    assert "“已确认”之外的内容尚待证实。" in lead
    english = _execute(language="en")
    lead_en = _section(_compose(_composer_input(english, Decision.LOW_CONFID, "en")), "Conclusion")
    assert lead_en.startswith("From this session's evidence: ")
    assert "Anything beyond what is confirmed is not proven yet." in lead_en


def test_without_a_confirmed_cause_the_conclusion_gives_the_likeliest_suspect_and_why():
    tools = _tools()
    tools.logs = {k: v for k, v in tools.logs.items() if k[0] != "payment-service"}
    output = _execute(tools)
    assert not [c for c in output["claims"] if c["claim_type"] == "root_cause"]
    lead = _section(_compose(_composer_input(output, Decision.PASS, "zh-CN")), "结论")
    assert lead.startswith("尚未能直接确认根因，最可能的方向是：payment-service")
    assert "（依据：" in lead


def test_when_only_small_drifts_were_seen_they_are_named_once_under_missing_info():
    tools = _tools()
    tools.metrics = {"cart-service": tools.metrics["cart-service"]}
    # a drift of its own (a request rate that drifted is its callers' load: analysis.demand)
    tools.metrics["mysql"] = [
        series(
            "mysql",
            "mysql_query_duration_seconds",
            {},
            0.027147,
            0.028468,
            0.029892,
            "2026-03-02T10:20:00Z",
            "2026-03-02T10:18:00Z",
            "up",
            4.7,
            ratio=1.05,
        )
    ]
    tools.logs = {}
    output = _execute(tools)
    assert not [c for c in output["claims"] if c["claim_type"] == "symptom"]
    drifts = [m for m in output["missing_info"] if "仅有轻微波动" in m]
    assert len(drifts) == 1
    assert "mysql" in drifts[0] or "cart-service" in drifts[0]
    assert not any("明显" in h["basis"] for h in output["hypotheses"])
