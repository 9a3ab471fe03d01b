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
