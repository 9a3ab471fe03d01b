"""The coherence check against hand-built incoherent answers, and the renderer's answers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnosis.contracts import (
    AllowedClaim,
    AllowedHypothesis,
    Certainty,
    ComposerAction,
    ComposerInput,
    Decision,
    Wording,
)
from diagnosis.flow.coherence import answer_coherence_check
from diagnosis.flow.renderer import answer_render


def _input(*, claims=(), hypotheses=(), decision=Decision.PASS, language="zh-CN"):
    return ComposerInput(
        decision=decision,
        language=language,
        question="q",
        allowed_claims=list(claims),
        allowed_hypotheses=list(hypotheses),
    )


ROOT_DEFINITE = AllowedClaim(
    claim_id="c1",
    text="payment-service 的 HikariPool-1 连接池耗尽",
    wording=Wording.DEFINITE,
    claim_type="root_cause",
)
ROOT_BOUNDED = ROOT_DEFINITE.model_copy(update={"wording": Wording.BOUNDED})
SYMPTOM = AllowedClaim(
    claim_id="c2",
    text="checkout 的 p99 相对基线升高",
    wording=Wording.DEFINITE,
    claim_type="symptom",
)


SERVICES = ["payment-service", "checkout", "cart"]


def codes(answer, composer_input):
    found = answer_coherence_check(answer=answer, composer_input=composer_input, services=SERVICES)
    return [f.code.value for f in found]


# --- one certainty per answer ---------------------------------------------------------------


def test_the_certainty_is_one_decision_from_the_cause_claims_then_the_hypotheses():
    hypothesis = AllowedHypothesis(text="可能是连接池耗尽", basis="日志")
    assert _input(claims=[ROOT_DEFINITE, SYMPTOM]).certainty() == Certainty.CONFIRMED
    assert _input(claims=[ROOT_BOUNDED]).certainty() == Certainty.INFERRED
    assert _input(claims=[SYMPTOM], hypotheses=[hypothesis]).certainty() == Certainty.HYPOTHESISED
    rejected = _input(claims=[SYMPTOM], hypotheses=[hypothesis], decision=Decision.REJECT)
    assert rejected.certainty() == Certainty.UNDETERMINED
    assert _input(claims=[SYMPTOM]).certainty() == Certainty.UNDETERMINED


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n初步判断（尚待证实）：payment-service 的 HikariPool-1 连接池耗尽。\n",
        "**Conclusion**\n\nLikely the HikariPool-1 pool of payment-service ran out.\n",
    ],
)
def test_a_confirmed_root_cause_whose_conclusion_opens_with_a_hedge_is_a_mismatch(answer):
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == ["badge_conclusion_mismatch"]


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n根因已确认：checkout 的 p99 相对基线升高。\n",
        "**Conclusion**\n\nRoot cause confirmed: checkout p99 rose.\n",
    ],
)
def test_a_conclusion_that_calls_an_unconfirmed_cause_confirmed_is_a_mismatch(answer):
    assert codes(answer, _input(claims=[SYMPTOM])) == ["badge_conclusion_mismatch"]


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n初步判断（尚待证实）：可能：连接池耗尽。\n",
        "**Conclusion**\n\nPreliminary finding (unconfirmed): Likely: the pool ran out.\n",
    ],
)
def test_two_hedges_on_one_statement_are_stacked(answer):
    assert codes(answer, _input(claims=[ROOT_BOUNDED])) == ["stacked_hedges"]


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n暂无。\n\n**可能的原因（待证实）**\n\n- 可能：根因已确认：日志服务超时。\n",
        "**Conclusion**\n\nNone.\n\n**Possible causes**\n\n"
        "- Likely: root cause confirmed: timeouts.\n",
    ],
)
def test_a_hypothesis_that_calls_itself_confirmed_is_a_hedged_confirmation(answer):
    hypothesis = AllowedHypothesis(text="x", basis="y")
    assert codes(answer, _input(hypotheses=[hypothesis])) == ["hedged_confirmation"]


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n根据本次取证，checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        "**可能的原因（待证实）**\n\n"
        "- 依据：checkout 的 p99 明显高于基线（窗口均值约为基线的 154.3 倍）。\n",
        "**Conclusion**\n\nFrom this run, checkout p99 window mean about 114.9× the baseline.\n\n"
        "**Possible causes**\n\n"
        "- basis: checkout p99 above its baseline (about 154.3× the baseline).\n",
    ],
)
def test_one_series_given_two_ratios_is_found(answer):
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == ["series_two_figures"]


def test_a_bare_series_name_that_could_be_either_of_two_stated_series_is_not_a_finding():
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        "**已确认**\n\n- cart 的 p99 窗口均值约为基线的 3.2 倍。\n"
        "- checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        "**可能的原因（待证实）**\n\n- cart 受影响。（依据：p99 窗口均值约为基线的 3.2 倍）\n"
        "- checkout 受影响。（依据：p99 窗口均值约为基线的 114.9 倍）\n"
    )
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == []


def test_a_ratio_in_a_statement_naming_a_path_of_services_is_no_one_series():
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        "**已确认**\n\n- cart 的 p99 窗口均值约为基线的 3.2 倍。\n"
        "- checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        "**可能的原因（待证实）**\n\n"
        "- checkout 变慢；传播路径：cart → checkout（依据：p99 窗口均值约为基线的 114.9 倍）\n"
    )
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == []


def test_two_series_with_their_own_ratios_are_coherent():
    answer = (
        "**结论**\n\n根据本次取证，checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        "**已确认**\n\n- cart 的 p99 窗口均值约为基线的 3.2 倍。\n"
        "- checkout 的 p99 窗口均值约为基线的 114.9 倍。\n"
    )
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == []


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n根据本次取证，cart 的 cpu 相对基线升高："
        "窗口内最大值 0.8（04:03），变化始于 04:09。\n",
        "**Conclusion**\n\nFrom this run, cart cpu rose: window maximum 0.8 (at 04:03), "
        "changing from 04:09.\n",
    ],
)
def test_a_peak_stated_before_the_onset_is_found(answer):
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == ["peak_before_onset"]


def test_a_peak_after_the_onset_or_said_to_come_before_the_change_is_coherent():
    after = "**结论**\n\n根据本次取证，cart 的 cpu：窗口内最大值 0.8（04:13），变化始于 04:09。\n"
    said = "**Conclusion**\n\nFrom this run: window maximum 0.8 (04:03, before the change), "
    said += "changing from 04:09.\n"
    assert codes(after, _input(claims=[ROOT_DEFINITE])) == []
    assert codes(said, _input(claims=[ROOT_DEFINITE])) == []


@pytest.mark.parametrize(
    "text",
    ["checkout 的 p99 延迟相对基线升高", "checkout cpu usage rose above its baseline"],
)
def test_a_memory_kind_whose_basis_is_a_latency_or_cpu_series_is_found(text):
    root = AllowedClaim(
        claim_id="c1",
        text=text,
        wording=Wording.DEFINITE,
        claim_type="root_cause",
        root_cause_kind="memory",
    )
    answer = f"**结论**\n\n根据本次取证，{text}。\n"
    assert codes(answer, _input(claims=[root])) == ["kind_without_evidence"]
    named = root.model_copy(update={"text": text + "，容器内存达到 limit"})
    assert codes(f"**结论**\n\n根据本次取证，{named.text}。\n", _input(claims=[named])) == []


@pytest.mark.parametrize(
    ("kind", "shown", "unshown"),
    [
        ("errors", "petshop_availability_percent 明显低于基线", "petshop_requests 基线为 0"),
        ("network", "net_retransmitted_segments_rate 明显高于基线", "p99 明显高于基线"),
        ("code", "新出现的错误日志，如「NullPointerException」", "p99 明显高于基线"),
        ("resource_exhaustion", "hikaricp_connections_active 已达到上限", "p99 明显高于基线"),
    ],
)
def test_every_kind_is_checked_against_the_series_its_basis_cites(kind, shown, unshown):
    def hypothesis(basis: str) -> AllowedHypothesis:
        return AllowedHypothesis(text="svc 可能是根因", basis=basis, entity="svc",
                                 root_cause_kind=kind)  # fmt: skip

    answer = "**结论**\n\n尚未能直接确认根因。\n"
    assert codes(answer, _input(hypotheses=[hypothesis(shown)])) == []
    assert codes(answer, _input(hypotheses=[hypothesis(unshown)])) == ["kind_without_evidence"]


@pytest.mark.parametrize("language", ["zh-CN", "en"])
def test_a_coherent_answer_passes(language):
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        "**已确认**\n\n- checkout 的 p99 相对基线升高：窗口均值约为基线的 12.5 倍。\n\n"
        "**可能的原因（待证实）**\n\n- 可能是慢查询拖住了连接。\n"
    )
    if language == "en":
        answer = (
            "**Conclusion**\n\nFrom this run, the HikariPool-1 pool of payment-service ran out.\n\n"
            "**Confirmed**\n\n- checkout p99 rose: window mean about 12.5× the baseline.\n\n"
            "**Possible causes (unconfirmed)**\n\n- Slow queries likely held the connections.\n"
        )
    assert codes(answer, _input(claims=[ROOT_DEFINITE, SYMPTOM], language=language)) == []


# --- the renderer's answers pass the check --------------------------------------------------

FRAGMENTS = [
    "payment-service",
    "checkout",
    "HikariPool-1",
    "的 p99",
    "连接池耗尽",
    "request timed out after 30000ms",
    "可能",
    "Likely:",
    "根因已确认：",
    "root cause confirmed:",
    "疑似",
    "窗口均值约为基线的 3.2 倍",
    "在 10:21",
    "error ratio 35%",
    "。",
]
texts = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6).map(" ".join)
claims = st.builds(
    AllowedClaim,
    claim_id=st.sampled_from(["c1", "c2", "c3"]),
    text=texts,
    wording=st.sampled_from(list(Wording)),
    claim_type=st.sampled_from(["root_cause", "contributing_factor", "symptom", "impact"]),
)
hypotheses = st.builds(
    AllowedHypothesis,
    text=texts,
    basis=st.one_of(st.just(""), texts),
    claim_id=st.one_of(st.none(), st.just("c9")),
)
composer_inputs = st.builds(
    ComposerInput,
    decision=st.sampled_from([Decision.PASS, Decision.LOW_CONFID, Decision.REJECT]),
    language=st.sampled_from(["zh-CN", "en"]),
    question=st.just("q"),
    allowed_claims=st.lists(claims, max_size=3),
    allowed_hypotheses=st.lists(hypotheses, max_size=3),
    missing_info=st.lists(texts, max_size=2),
    recommended_actions=st.lists(st.builds(ComposerAction, text=texts), max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composer_inputs)
def test_for_any_composer_input_the_rendered_answer_passes_the_check(composer_input):
    answer = answer_render(composer_input)
    found = answer_coherence_check(answer=answer, composer_input=composer_input)
    assert found == [], (answer, found)
