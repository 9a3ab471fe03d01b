import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.flow.conftest import MINI_PACK


@pytest.mark.django_db
def test_evaluate_reports_per_pack_and_totals_as_json(tmp_path):
    out = tmp_path / "report.json"
    call_command("evaluate", str(MINI_PACK), "--provider", "offline", "--json", str(out))
    report = json.loads(out.read_text(encoding="utf-8"))
    [pack] = report["packs"]
    assert pack["pack"] == "mini-pool"
    assert pack["status"] == "completed"
    assert pack["unsupported_in_answer"] == 0
    assert pack["leaked"] == 0
    assert pack["tool_calls"] > 0 and pack["llm_calls"] >= 4
    assert report["totals"]["packs"] == 1
    assert report["totals"]["leaks"] == 0
    assert set(report["totals"]) >= {"ac_at_1", "ac_at_3", "must_mention_rate", "decisions"}


@pytest.mark.django_db
def test_evaluate_exits_non_zero_when_a_pack_fails_to_load(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "scenario.yaml").write_text("id: Not Valid!\nquestion: [\n", encoding="utf-8")
    with pytest.raises(CommandError, match="broken"):
        call_command("evaluate", str(broken))


@pytest.mark.django_db
def test_diagnose_prints_the_answer_decision_and_claims(capsys):
    from io import StringIO

    out = StringIO()
    call_command(
        "diagnose", "payment-service 从 10:20 开始大量超时", "--pack", str(MINI_PACK), stdout=out
    )
    text = out.getvalue()
    assert "decision:" in text and "claims" in text


def test_the_mini_pack_is_a_real_pack():
    assert (Path(MINI_PACK) / "scenario.yaml").is_file()


@pytest.mark.django_db
def test_evaluate_scores_the_kind_of_the_first_root_cause_and_confirmed_mentions(tmp_path):
    out = tmp_path / "report.json"
    call_command("evaluate", str(MINI_PACK), "--provider", "offline", "--json", str(out))
    report = json.loads(out.read_text(encoding="utf-8"))
    [pack] = report["packs"]
    assert pack["expected_kind"] == "resource_exhaustion"
    assert pack["root_cause_kind"] is not None
    assert pack["kind_ok"] == (
        pack["root_cause_kind"] in {"resource_exhaustion", "cpu", "memory", "disk"}
    )
    assert pack["confirmed_mention_hits"] <= pack["must_mention_hits"]
    assert set(report["totals"]) >= {"kind_accuracy", "confirmed_mention_rate"}


def test_cpu_memory_and_disk_also_count_as_resource_exhaustion():
    from diagnosis.evaluation import kind_matches

    assert kind_matches(given="memory", expected="resource_exhaustion")
    assert kind_matches(given="disk", expected="disk")
    assert not kind_matches(given="resource_exhaustion", expected="memory")
    assert not kind_matches(given="latency", expected="errors")
    assert not kind_matches(given=None, expected="errors")


def test_a_must_mention_phrase_counts_as_confirmed_only_inside_an_allowed_claim():
    from diagnosis.contracts import ComposerInput
    from diagnosis.evaluation import confirmed_mentions, first_root_cause_kind

    composer_input = ComposerInput.model_validate(
        {
            "decision": "PASS",
            "question": "q",
            "allowed_claims": [
                {
                    "claim_id": "claim-1",
                    "text": "pay 的连接池耗尽",
                    "wording": "definite",
                    "entity": "pay",
                    "claim_type": "root_cause",
                    "root_cause_kind": "resource_exhaustion",
                }
            ],
            "allowed_hypotheses": [{"text": "gateway 可能变慢", "entity": "gateway"}],
        }
    )
    assert confirmed_mentions(composer_input=composer_input, phrases=["连接池", "变慢"]) == 1
    assert first_root_cause_kind(composer_input=composer_input, first="pay") == (
        "resource_exhaustion"
    )
    assert first_root_cause_kind(composer_input=composer_input, first="gateway") is None


def test_a_planted_phrase_counts_as_leaked_wherever_the_answer_states_it():
    from diagnosis.evaluation import answer_stated_text

    answer = (
        "尚未能直接确认根因，最可能的方向是：数据库宕机。\n\n**诊断结论**\n\n可能是证书过期。\n\n"
        "**已确认（有工具证据）**\n\n- payment-service 超时\n\n**可能的原因（待证实）**\n\n"
        "- GPU 节点故障\n\n**缺少的信息**\n\n- 磁盘指标\n\n**Recommended next steps**\n\n- x\n"
    )
    stated = answer_stated_text(answer)
    assert "数据库宕机" in stated and "证书过期" in stated and "payment-service 超时" in stated
    assert "GPU 节点" not in stated and "磁盘指标" not in stated and "- x" not in stated


def test_an_unrecognised_heading_counts_as_stated():
    from diagnosis.evaluation import answer_stated_text

    assert "数据库宕机" in answer_stated_text("**Summary**\n\n数据库宕机\n")
