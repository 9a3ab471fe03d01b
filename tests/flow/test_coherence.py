"""The coherence check against hand-built incoherent answers, and the renderer's answers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, find, given, settings
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
from diagnosis.offline.composer import answer_compose


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


def test_a_ratio_in_a_statement_naming_a_path_of_services_is_the_last_named_services():
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        "**已确认**\n\n- cart 的 p99 窗口均值约为基线的 3.2 倍。\n"
        "- checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        "**可能的原因（待证实）**\n\n"
        "- checkout 变慢；传播路径：cart → checkout（依据：p99 窗口均值约为基线的 114.9 倍）\n"
    )
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == []


@pytest.mark.parametrize(
    "answer",
    [
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        "**已确认**\n\n- checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        "**可能的原因（待证实）**\n\n"
        "- checkout 变慢；传播路径：cart → checkout（依据：p99 窗口均值约为基线的 154.3 倍）\n",
        "**Conclusion**\n\nFrom this run, the HikariPool-1 pool of payment-service ran out.\n\n"
        "**Confirmed**\n\n- checkout p99 window mean about 114.9× the baseline.\n\n"
        "**Possible causes**\n\n- cart calls checkout, checkout p99 window mean about 154.3× "
        "the baseline.\n",
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        "**已确认**\n\n- cart 的 p99 约为基线的 3.2 倍，checkout 的 p99 约为基线的 114.9 倍。\n"
        "- checkout 的 p99 约为基线的 154.3 倍。\n",
    ],
)
def test_one_series_given_two_ratios_in_items_naming_several_services_is_found(answer):
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == ["series_two_figures"]


@pytest.mark.parametrize(
    "item",
    [
        "- cart 的 p99 约为基线的 3.2 倍，checkout 的 p99 约为基线的 114.9 倍。",
        "- cart calls checkout; checkout p99 about 114.9× the baseline, cart p99 about 3.2× "
        "the baseline.",
    ],
)
def test_several_services_each_with_its_own_ratio_in_one_item_are_coherent(item):
    answer = (
        "**结论**\n\n根据本次取证，checkout 的 p99 窗口均值约为基线的 114.9 倍。\n\n"
        f"**已确认**\n\n- cart 的 p99 窗口均值约为基线的 3.2 倍。\n{item}\n"
    )
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == []


@pytest.mark.parametrize(
    ("basis", "found"),
    [
        ("http_requests_total{status=504} 明显高于基线（窗口水平约为基线的 1428.5 倍）", []),
        ("http_requests_total{status=504} 明显高于基线（窗口水平约为基线的 111.7 倍）", ["x"]),
    ],
)
@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_cascade_hypothesis_basis_is_about_its_subject_not_the_cause_it_names(
    basis, found, language
):
    """ "checkout 的异常可能是受 payment-service 影响的连锁反应（依据：…）": the basis is
    checkout's series, though payment-service is named last."""
    confirmed = (
        "- checkout 的 http_requests_total{status=504} 相对基线升高：窗口水平约为基线的 1428.5 倍。"
    )
    item = f"- checkout 的异常可能是受 payment-service 影响的连锁反应。（依据：{basis}）"
    if language == "en":
        confirmed = (
            "- checkout http_requests_total{status=504} rose above its baseline: window level "
            "about 1428.5× the baseline."
        )
        number = "1428.5" if not found else "111.7"
        item = (
            "- the checkout anomaly is likely a cascade from payment-service (basis: "
            f"http_requests_total{{status=504}} above its baseline, about {number}× the baseline)"
        )
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        f"**已确认**\n\n{confirmed}\n\n**可能的原因（待证实）**\n\n{item}\n"
    )
    expected = ["series_two_figures"] if found else []
    assert codes(answer, _input(claims=[ROOT_DEFINITE])) == expected


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize(
    ("labels", "expected"), [("{statistic=p99}", []), ("{statistic=avg}", ["x"])]
)
def test_a_series_is_its_name_and_its_labels(language, labels, expected):
    """The avg and the p99 of one metric are two series (each its own ratio); the same
    labels twice are one, whatever else the item names."""
    confirmed = (
        "- petsearch 的 latency_seconds{statistic=avg} 相对基线升高，窗口水平约为基线的 4.63 倍。"
    )
    item = (
        "- petsearch 变慢；传播路径：petsite → petsearch"
        f"（依据：latency_seconds{labels} 明显高于基线（窗口水平约为基线的 19.53 倍））"
    )
    if language == "en":
        confirmed = "- petsearch latency_seconds{statistic=avg} rose: about 4.63× the baseline."
        item = (
            "- petsearch slowed down; path: petsite → petsearch (basis: "
            f"latency_seconds{labels} above its baseline, about 19.53× the baseline)"
        )
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        f"**已确认**\n\n{confirmed}\n\n**可能的原因（待证实）**\n\n{item}\n"
    )
    found = answer_coherence_check(
        answer=answer,
        composer_input=_input(claims=[ROOT_DEFINITE]),
        services=["payment-service", "petsearch", "petsite"],
    )
    assert [f.code.value for f in found] == (["series_two_figures"] if expected else [])


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_second_ratio_in_a_basis_is_its_own_series(language):
    """In "X 的异常可能是受 Y 影响的连锁反应（依据：A{…} …111.7 倍；B{…} …22.81 倍）" the
    second ratio is B's, not A's again (found on the demo pack payment-pool-saturation)."""
    confirmed = (
        "- api-gateway 的 http_requests_total{status=504} 相对基线升高，"
        "窗口水平约为基线的 111.7 倍。"
    )
    item = (
        "- api-gateway 的异常可能是受 payment-service 影响的连锁反应。（依据："
        "http_requests_total{status=504} 明显高于基线（窗口水平约为基线的 111.7 倍）；"
        "http_request_duration_seconds{quantile=0.99} 明显高于基线（窗口水平约为基线的 22.81 倍））"
    )
    if language == "en":
        confirmed = "- api-gateway http_requests_total{status=504} rose: about 111.7× the baseline."
        item = (
            "- the api-gateway anomaly is likely a cascade from payment-service (basis: "
            "http_requests_total{status=504} above its baseline (about 111.7× the baseline); "
            "http_request_duration_seconds{quantile=0.99} above its baseline (about 22.81× "
            "the baseline))"
        )
    answer = (
        "**结论**\n\n根据本次取证，payment-service 的 HikariPool-1 连接池耗尽。\n\n"
        f"**已确认**\n\n{confirmed}\n\n**可能的原因（待证实）**\n\n{item}\n"
    )
    services = ["payment-service", "api-gateway"]
    found = answer_coherence_check(
        answer=answer, composer_input=_input(claims=[ROOT_DEFINITE]), services=services
    )
    assert found == []
    # the same first series given another figure in the basis is still found
    twice = answer.replace("111.7 倍）；", "112.0 倍）；").replace(
        "111.7× the baseline); ", "112.0× the baseline); "
    )
    found = answer_coherence_check(
        answer=twice, composer_input=_input(claims=[ROOT_DEFINITE]), services=services
    )
    assert [f.code.value for f in found] == ["series_two_figures"]


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


def test_the_kind_a_claim_names_is_no_evidence_of_that_kind():
    text = "checkout 的 p99 延迟相对基线升高（类型：内存）"
    root = AllowedClaim(claim_id="c1", text=text, wording=Wording.DEFINITE,
                        claim_type="root_cause", root_cause_kind="memory")  # fmt: skip
    answer = f"**结论**\n\n根据本次取证，{text}。\n"
    assert codes(answer, _input(claims=[root])) == ["kind_without_evidence"]


AMBIGUOUS = (
    "svc 自身处理变慢可能是本次故障的根因（类型：延迟或网络——这里没有能显示网络问题的计数器，"
    "现有证据无法区分两者；能区分它们的是重传、丢包或往返时延等网络计数器）"
)


def _ambiguous(alternative_basis: str | None) -> ComposerInput:
    lead = AllowedHypothesis(
        text=AMBIGUOUS,
        basis="p99 明显高于基线",
        entity="svc",
        root_cause_kind="latency",
        root_cause_kind_alternative="network",
    )
    if alternative_basis is None:
        return _input(hypotheses=[lead])
    other = AllowedHypothesis(
        text="svc 的故障也可能是网络而不是延迟",
        basis=alternative_basis,
        entity="svc",
        root_cause_kind="network",
        root_cause_kind_alternative="latency",
    )
    return _input(hypotheses=[lead, other])


def test_two_kinds_the_evidence_cannot_tell_apart_are_no_contradiction():
    answer = f"**结论**\n\n尚未能直接确认根因，最可能的方向是：{AMBIGUOUS}。\n"
    basis = "svc 没有网络计数器（重传、丢包、往返时延），无法排除网络问题；p99 明显高于基线"
    assert codes(answer, _ambiguous(basis)) == []


def test_a_second_kind_needs_its_evidence_too():
    """The second kind of "latency or network" is shown by a hypothesis of that kind on the
    same service whose basis says why the network cannot be ruled out; without one (or with
    a basis that shows no network at all), the second kind is a kind without evidence."""
    answer = f"**结论**\n\n尚未能直接确认根因，最可能的方向是：{AMBIGUOUS}。\n"
    assert codes(answer, _ambiguous(None)) == ["kind_without_evidence"]
    assert codes(answer, _ambiguous("p99 明显高于基线")) == ["kind_without_evidence"] * 2


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
    found = answer_coherence_check(answer=answer, composer_input=composer_input, services=SERVICES)
    assert found == [], (answer, found)


@pytest.mark.parametrize("language", ["zh-CN", "en"])
@pytest.mark.parametrize(
    "written",
    ["可能：根因已确认：{text}", "Likely: root cause is confirmed: {text}", "疑似，{text}"],
)
def test_the_offline_composer_puts_one_hedge_on_a_statement_that_hedged_itself(language, written):
    """The statement's one hedge is the composer's: one written in front of it is dropped
    (the issue's "初步判断（尚待证实）：可能：根因已确认：…")."""
    root = ROOT_BOUNDED.model_copy(update={"text": written.format(text=ROOT_BOUNDED.text)})
    hypothesis = AllowedHypothesis(
        text=written.format(text="连接池耗尽"), basis="日志 pool exhausted"
    )
    for ci in (
        _input(claims=[root], language=language),
        _input(hypotheses=[hypothesis], language=language),
    ):
        answer = answer_compose(ci)
        assert answer_coherence_check(answer=answer, composer_input=ci) == [], answer
        assert "根因已确认" not in answer.split("**", 3)[2] or ci.certainty() == Certainty.CONFIRMED


def _careless_render(composer_input: ComposerInput) -> str:
    """The renderer's layout with every statement as written and a hedge put in front of
    each unconfirmed one: what the property must be able to catch."""
    lines = ["**诊断结论**", "", answer_render(composer_input).splitlines()[2], ""]
    for claim in composer_input.allowed_claims:
        hedge = "" if claim.wording == Wording.DEFINITE else "初步判断（尚待证实）："
        lines.append(f"- {hedge}{claim.text}")
    lines += [f"- 可能：{h.text}（依据：{h.basis}）" for h in composer_input.allowed_hypotheses]
    return "\n".join(lines) + "\n"


def test_the_property_fails_on_a_renderer_that_stacks_hedges():
    """The strategy reaches inputs a careless renderer gets wrong, so the property can fail."""
    incoherent = find(
        composer_inputs,
        lambda ci: bool(answer_coherence_check(answer=_careless_render(ci), composer_input=ci)),
        settings=settings(max_examples=2000, database=None),
    )
    assert answer_coherence_check(answer=answer_render(incoherent), composer_input=incoherent) == []
