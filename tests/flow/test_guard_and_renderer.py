import json

import pytest

from diagnosis.contracts import (
    AllowedClaim,
    AllowedHypothesis,
    ComposerAction,
    ComposerInput,
)
from diagnosis.flow.guard import composer_guard
from diagnosis.flow.renderer import answer_render

SERVICES = ["payment-service", "order-service", "mysql"]


@pytest.fixture
def composer_input():
    return ComposerInput(
        decision="PASS",
        language="zh-CN",
        question="payment-service 从 10:20 开始大量超时",
        allowed_claims=[
            AllowedClaim(
                claim_id="c1",
                text="payment-service hikaricp_connections_active 在 10:21 达到 20",
                wording="definite",
                entity="payment-service",
                claim_type="symptom",
            ),
            AllowedClaim(
                claim_id="c2", text="连接池配置偏小", wording="bounded", claim_type="root_cause"
            ),
        ],
        allowed_hypotheses=[AllowedHypothesis(text="可能存在连接泄漏", basis="无泄漏日志")],
        missing_info=["缺少 mysql 的慢查询日志"],
        recommended_actions=[ComposerAction(text="检查 HikariCP 配置", reason="确认上限")],
    )


def test_the_fallback_renderer_passes_the_guard(composer_input):
    answer = answer_render(composer_input)
    assert (
        composer_guard(answer=answer, composer_input=composer_input, known_services=SERVICES) == []
    )
    assert "（推断）" in answer


def test_the_fallback_renderer_writes_english_for_an_english_session(composer_input):
    english = composer_input.model_copy(update={"language": "en"})
    answer = answer_render(english)
    assert "**Confirmed (with tool evidence)**" in answer
    assert "(inferred)" in answer


def test_the_fallback_renderer_gives_basis_and_reason_in_the_sessions_brackets(composer_input):
    chinese = answer_render(composer_input)
    assert "- 可能存在连接泄漏（依据：无泄漏日志）" in chinese
    assert "- 检查 HikariCP 配置（原因：确认上限）" in chinese
    english = answer_render(composer_input.model_copy(update={"language": "en"}))
    assert "- 可能存在连接泄漏 (basis: 无泄漏日志)" in english
    assert "- 检查 HikariCP 配置 (why: 确认上限)" in english


def test_an_answer_that_adds_a_number_fails_the_guard(composer_input):
    answer = answer_render(composer_input) + "\n- 错误率达到 35%\n"
    assert "new_number:35%" in composer_guard(
        answer=answer, composer_input=composer_input, known_services=SERVICES
    )


def test_an_answer_that_adds_a_time_fails_the_guard(composer_input):
    answer = "payment-service 在 10:45 恢复"
    assert "new_time:10:45" in composer_guard(
        answer=answer, composer_input=composer_input, known_services=SERVICES
    )


def test_an_answer_that_names_another_service_fails_the_guard(composer_input):
    findings = composer_guard(
        answer="根因是 order-service", composer_input=composer_input, known_services=SERVICES
    )
    assert "new_service:order-service" in findings


def test_an_answer_that_adds_an_identifier_fails_the_guard(composer_input):
    findings = composer_guard(
        answer="请回滚到 v2.13.9", composer_input=composer_input, known_services=SERVICES
    )
    assert "new_identifier:v2.13.9" in findings


def test_a_json_answer_fails_the_guard(composer_input):
    answer = json.dumps({"final_answer": "x"})
    assert "answer_is_json" in composer_guard(
        answer=answer, composer_input=composer_input, known_services=SERVICES
    )


def test_an_answer_quoting_raw_executor_fields_fails_the_guard(composer_input):
    findings = composer_guard(
        answer="user_facing_answer: 连接池配置偏小",
        composer_input=composer_input,
        known_services=SERVICES,
    )
    assert "raw_field:user_facing_answer" in findings


def test_an_empty_answer_fails_the_guard(composer_input):
    assert composer_guard(answer="  ", composer_input=composer_input) == ["empty_answer"]


def test_a_faithful_rephrasing_passes_the_guard(composer_input):
    answer = (
        "**结论**\n\npayment-service 的 hikaricp_connections_active 在 10:21 达到 20，"
        "连接池配置可能偏小。\n\n1. 检查 HikariCP 配置\n"
    )
    assert (
        composer_guard(answer=answer, composer_input=composer_input, known_services=SERVICES) == []
    )


def test_the_renderer_lists_an_accepted_observation_as_confirmed_under_low_confidence(
    composer_input,
):
    answer = answer_render(composer_input.model_copy(update={"decision": "LOW_CONFID"}))
    confirmed = answer.split("**已确认（有工具证据）**")[1].split("\n\n")[0]
    assert "- payment-service hikaricp_connections_active 在 10:21 达到 20\n" in confirmed + "\n"
    assert "置信度较低" not in answer


def test_the_renderer_says_the_root_cause_is_undetermined_when_nothing_may_lead(composer_input):
    bare = composer_input.model_copy(
        update={"allowed_claims": [], "allowed_hypotheses": [AllowedHypothesis(text="泄漏")]}
    )
    assert "根因尚未确定" in answer_render(bare)
    english = answer_render(bare.model_copy(update={"language": "en"}))
    assert "The root cause is undetermined" in english
    assert "根因尚未确定" not in answer_render(composer_input)


def test_the_guard_finds_a_time_of_the_input_inside_a_timestamp():
    composer_input = ComposerInput(
        decision="PASS",
        question="q",
        allowed_claims=[
            AllowedClaim(
                claim_id="c1",
                text="首个错误出现在 2026-03-02T10:21:03Z，共 12,000 次",
                wording="definite",
            )
        ],
    )
    assert (
        composer_guard(answer="10:21 起出现错误，共 12000 次", composer_input=composer_input) == []
    )
    findings = composer_guard(
        answer="10:22 起出现错误，共 12001 次，HikariPool-2 耗尽", composer_input=composer_input
    )
    assert findings == [
        "new_time:10:22",
        "new_number:12001",
        "new_identifier:hikaripool-2",
    ]


def test_a_list_marker_is_not_a_new_number(composer_input):
    answer = "1. payment-service 在 10:21 达到 20\n2. 检查 HikariCP 配置\n"
    assert composer_guard(answer=answer, composer_input=composer_input) == []


@pytest.mark.parametrize(
    ("added", "kind"),
    [("根因是内存泄漏", "memory"), ("root cause: disk full", "disk"), ("CPU 打满", "cpu")],
)
def test_a_composer_naming_a_resource_the_input_never_names_is_replaced(
    composer_input, added, kind
):
    answer = f"**结论**\n\npayment-service 连接池耗尽，{added}。"
    assert f"new_kind:{kind}" in composer_guard(
        answer=answer, composer_input=composer_input, known_services=SERVICES
    )


def test_a_resource_the_input_names_in_either_language_or_as_its_kind_may_be_named(
    composer_input,
):
    named = composer_input.model_copy(
        update={
            "allowed_hypotheses": [
                AllowedHypothesis(text="payment-service 内存不足", basis="heap 升高"),
                AllowedHypothesis(text="x", basis="y", root_cause_kind="disk"),
            ]
        }
    )
    answer = "**结论**\n\npayment-service 的 memory 可能不足；也可能是磁盘。"
    findings = composer_guard(answer=answer, composer_input=named, known_services=SERVICES)
    assert not [f for f in findings if f.startswith("new_kind")]
