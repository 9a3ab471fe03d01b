from __future__ import annotations

import json

from diagnosis.contracts import (
    AllowedClaim,
    AllowedHypothesis,
    ComposerAction,
    ComposerInput,
    Decision,
)
from diagnosis.flow.guard import composer_guard
from diagnosis.llm.base import Role
from diagnosis.offline import OfflineEngine
from tests.support.agents import agent_answer

from .fakes import Recorder

SERVICES = ["payment-service", "order-service", "mysql", "api-gateway"]


def _input(decision=Decision.PASS, language="zh-CN", wording="definite"):
    return ComposerInput(
        decision=decision,
        language=language,
        question="payment-service 从 10:20 开始大量超时，帮我看看原因",
        allowed_claims=[
            AllowedClaim(
                claim_id="claim-1",
                text="payment-service 的连接池耗尽是本次故障的根因：连接数达到上限",
                wording=wording,
                entity="payment-service",
                claim_type="root_cause",
            ),
            AllowedClaim(
                claim_id="claim-2",
                text="payment-service 出现新的 ERROR 日志，共 829 次，首次于 2026-03-02T10:16:53Z",
                wording="definite",
                entity="payment-service",
                claim_type="symptom",
            ),
        ],
        allowed_hypotheses=[
            AllowedHypothesis(
                text="order-service 的异常可能是受 payment-service 影响的连锁反应",
                basis="它的错误指向 payment-service",
                entity="order-service",
            )
        ],
        missing_info=["没有查到 mysql 的指标或日志数据"],
        recommended_actions=[
            ComposerAction(
                text="检查 payment-service 的连接池配置", reason="证据显示它最可能是根因"
            )
        ],
    )


def _compose(composer_input):
    recorder = Recorder()
    raw = agent_answer(OfflineEngine(), Role.COMPOSER, composer_input, recorder=recorder)
    assert recorder.calls[0]["role"] == Role.COMPOSER
    output = json.loads(raw)
    assert output["answer_version"] == "composer_v1"
    return output["final_answer"]


def test_the_composed_answer_uses_only_input_text_and_passes_the_composer_guard():
    for decision in (Decision.PASS, Decision.LOW_CONFID, Decision.REJECT):
        for language in ("zh-CN", "en"):
            composer_input = _input(decision=decision, language=language)
            answer = _compose(composer_input)
            assert (
                composer_guard(
                    answer=answer, composer_input=composer_input, known_services=SERVICES
                )
                == []
            )


def test_a_chinese_answer_opens_with_the_conclusion_and_has_its_sections():
    answer = _compose(_input())
    assert answer.startswith("**结论**")
    for heading in ("**已确认**", "**可能的原因（待证实）**", "**缺少的信息**", "**建议的下一步**"):
        assert heading in answer
    assert "829" in answer


def test_a_bounded_claim_is_worded_as_a_possibility_with_one_hedge():
    answer = _compose(_input(wording="bounded"))
    assert "初步判断（尚待证实）：payment-service 的连接池耗尽是本次故障的根因" in answer
    assert "（尚待证实）：可能：" not in answer
    english = _compose(_input(wording="bounded", language="en-US"))
    assert "(unconfirmed): payment-service" in english
    assert "Likely: payment-service" not in english
    assert "**Conclusion**" in english


def test_a_rejected_session_lists_no_hypotheses():
    answer = _compose(_input(decision=Decision.REJECT))
    assert "order-service 的异常可能" not in answer
    assert "核验发现" in answer


def _conclusion(answer):
    """The text up to the second heading: what the answer states first."""
    sections = answer.split("\n\n**")
    return sections[0]


def test_an_accepted_observation_is_stated_as_confirmed_under_low_confidence():
    answer = _compose(_input(decision=Decision.LOW_CONFID))
    conclusion = _conclusion(answer)
    assert "根据本次取证，payment-service 的连接池耗尽是本次故障的根因" in conclusion
    assert "可能：payment-service 的连接池耗尽" not in answer
    assert "- payment-service 出现新的 ERROR 日志，共 829 次" in answer


def test_an_overstated_claim_as_a_hypothesis_never_leads_the_conclusion():
    composer_input = _input(decision=Decision.LOW_CONFID).model_copy(
        update={
            "allowed_claims": [],
            "allowed_hypotheses": [
                AllowedHypothesis(
                    text="frontend 故障已导致全站用户无法访问",
                    basis="Back-off restarting failed container",
                    claim_id="claim-3",
                )
            ],
        }
    )
    answer = _compose(composer_input)
    conclusion = _conclusion(answer)
    assert "全站用户无法访问" not in conclusion
    assert "根因尚未确定" in conclusion
    assert "- 可能：frontend 故障已导致全站用户无法访问" in answer
    assert composer_guard(answer=answer, composer_input=composer_input) == []


def test_the_executors_hypothesis_with_a_basis_may_lead_and_one_without_may_not():
    with_basis = _input(decision=Decision.LOW_CONFID).model_copy(update={"allowed_claims": []})
    assert "最可能的方向是：order-service 的异常" in _conclusion(_compose(with_basis))
    without = with_basis.model_copy(
        update={"allowed_hypotheses": [AllowedHypothesis(text="mysql 慢查询占满连接")]}
    )
    conclusion = _conclusion(_compose(without))
    assert "mysql" not in conclusion
    assert "根因尚未确定" in conclusion


def test_with_nothing_allowed_the_conclusion_says_the_root_cause_is_undetermined_in_english():
    empty = ComposerInput(decision=Decision.LOW_CONFID, language="en", question="why?")
    answer = _compose(empty)
    assert "The root cause is undetermined" in answer
    assert "would settle it" in answer
