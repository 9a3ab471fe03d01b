"""The scenario pack loader reports every problem with file and line."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import PackError, pack_call_edges, pack_discover
from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.models import Environment, KnowledgeDocument
from tests.evidence.packbuilder import pack_write


def test_a_valid_pack_loads_with_its_fields(pack_dir):
    pack = pack_load(pack_dir)
    assert pack.id == "fixture-pool"
    assert pack.now.isoformat() == "2026-03-02T10:40:00+00:00"
    assert pack.window is not None
    assert pack.services == ("pay", "gateway")
    assert pack.expected["root_cause_service"] == "pay"
    assert [p.name for p in pack.paths.logs] == ["app.jsonl", "gateway.log"]


def test_a_broken_pack_lists_every_problem_with_file_and_line(tmp_path):
    pack = pack_write(tmp_path / "broken")
    (pack / "scenario.yaml").write_text(
        "id: Bad_ID\ntitle: t\nnow: yesterday\nexpected:\n  root_cause_kind: gremlins\n"
        "  abstain: maybe\n",
        encoding="utf-8",
    )
    om = pack / "metrics" / "app.om"
    lines = om.read_text().splitlines()
    lines[3] = 'pool_active{service="pay" 5 1772445600'
    lines[4] = 'pool_active{service="pay"} five 1772445600'
    om.write_text("\n".join(lines[:-1]) + "\n")  # also drop the # EOF
    jsonl = pack / "logs" / "app.jsonl"
    lines = jsonl.read_text().splitlines()
    lines[1] = '{"ts": "2026-03-02T10:00:00Z", "level": "INFO", "message": "no service"}'
    lines[2] = "{not json"
    jsonl.write_text("\n".join(lines) + "\n")
    with pytest.raises(PackError) as caught:
        pack_load(pack)
    text = str(caught.value)
    assert "scenario.yaml:1: id 'Bad_ID' must use only a-z, 0-9 and '-'" in text
    assert "scenario.yaml: 'question' is required" in text
    assert "scenario.yaml:3: now: 'yesterday' is not an RFC 3339 time" in text
    assert "scenario.yaml:4: expected.root_cause_kind 'gremlins' must be one of" in text
    assert "expected.abstain must be true or false" in text
    assert "metrics/app.om:4: malformed OpenMetrics sample" in text
    assert "metrics/app.om:5: malformed OpenMetrics sample: value 'five' is not a number" in text
    assert "metrics/app.om: missing the final '# EOF' line" in text
    assert "logs/app.jsonl:2: missing 'service'" in text
    assert "logs/app.jsonl:3: not valid JSON" in text


def test_invalid_yaml_is_reported_with_its_line(tmp_path):
    pack = tmp_path / "bad-yaml"
    pack.mkdir()
    (pack / "scenario.yaml").write_text("id: x\ntitle: [unclosed\nnow: 1\n", encoding="utf-8")
    with pytest.raises(PackError) as caught:
        pack_load(pack)
    assert "scenario.yaml:3: invalid YAML" in str(caught.value)


def test_plain_log_lines_without_a_timestamp_and_bad_recordings_are_reported(tmp_path):
    pack = pack_write(tmp_path / "p")
    with (pack / "logs" / "gateway.log").open("a") as handle:
        handle.write("no timestamp here\n")
    (pack / "recorded").mkdir()
    (pack / "recorded" / "invocations.jsonl").write_text('{"tool_name": "query_spans"}\n')
    with pytest.raises(PackError) as caught:
        pack_load(pack)
    text = str(caught.value)
    assert "logs/gateway.log:172: a plain log line must start with an RFC 3339 timestamp" in text
    assert "recorded/invocations.jsonl:1: tool_name must be one of" in text
    assert "recorded/invocations.jsonl:1: output must be a string" in text


def test_pack_discover_finds_packs_in_a_folder_and_packs_named_directly(tmp_path):
    a = pack_write(tmp_path / "all" / "a", pack_id="a")
    b = pack_write(tmp_path / "all" / "b", pack_id="b")
    (tmp_path / "all" / "not-a-pack").mkdir()
    lone = pack_write(tmp_path / "lone", pack_id="lone")
    assert pack_discover([tmp_path / "all", lone]) == [a, b, lone]


def test_sync_creates_one_environment_per_pack_with_its_knowledge(db, tmp_path):
    pack_write(tmp_path / "packs" / "a", pack_id="a")
    pack_write(tmp_path / "packs" / "b", pack_id="b", knowledge=False)
    environments = environments_sync_from_packs(dirs=[tmp_path / "packs"])
    assert [e.slug for e in environments] == ["a", "b"]
    a = Environment.objects.get(slug="a")
    assert a.kind == "scenario"
    assert a.name == "支付连接池测试"
    assert a.services == ["pay", "gateway"]
    assert a.pack_path == str((tmp_path / "packs" / "a").resolve())
    assert KnowledgeDocument.objects.filter(environment=a).count() == 2
    assert not KnowledgeDocument.objects.filter(environment__slug="b").exists()
    # Running it again changes nothing; removing a runbook removes its document.
    (tmp_path / "packs" / "a" / "knowledge" / "deploy-rollback.md").unlink()
    environments_sync_from_packs(dirs=[tmp_path / "packs"])
    assert Environment.objects.count() == 2
    assert KnowledgeDocument.objects.filter(environment=a).count() == 1


def test_sync_refuses_a_broken_pack_before_writing_anything(db, tmp_path):
    pack_write(tmp_path / "packs" / "good", pack_id="good")
    broken = pack_write(tmp_path / "packs" / "broken", pack_id="broken")
    (broken / "scenario.yaml").write_text("id: broken\n", encoding="utf-8")
    with pytest.raises(PackError) as caught:
        environments_sync_from_packs(dirs=[tmp_path / "packs"])
    assert "broken/scenario.yaml" in str(caught.value)
    assert not Environment.objects.exists()
    with pytest.raises(CommandError):
        call_command("sync_environments", str(tmp_path / "packs"))
    call_command("sync_environments", str(tmp_path / "packs"), "--skip-broken")
    assert list(Environment.objects.values_list("slug", flat=True)) == ["good"]


def test_a_topology_file_gives_the_packs_call_edges(pack_dir):
    (pack_dir / "topology.json").write_text(
        '{"calls": [\n  {"caller": "gateway", "callee": "pay"}\n]}\n', encoding="utf-8"
    )
    pack_load(pack_dir)
    assert pack_call_edges(pack_dir) == (("gateway", "pay"),)


def test_a_broken_topology_file_is_reported_with_its_lines(pack_dir):
    (pack_dir / "topology.json").write_text(
        '{"calls": [\n'
        '  {"caller": "gateway", "callee": "pay"},\n'
        '  {"caller": "gateway", "callee": "nowhere"},\n'
        '  {"caller": "pay"}\n'
        "]}\n",
        encoding="utf-8",
    )
    with pytest.raises(PackError) as raised:
        pack_load(pack_dir)
    problems = [str(p) for p in raised.value.problems]
    assert any(p.startswith("topology.json:3:") and "'nowhere'" in p for p in problems)
    assert any(p.startswith("topology.json:4:") and "caller and callee" in p for p in problems)
    # a diagnosis goes on with the edges that are sound
    assert pack_call_edges(pack_dir) == (("gateway", "pay"),)


def test_a_topology_file_that_is_not_json_is_a_problem_not_a_crash(pack_dir):
    (pack_dir / "topology.json").write_text("calls: gateway -> pay\n", encoding="utf-8")
    with pytest.raises(PackError) as raised:
        pack_load(pack_dir)
    assert any("topology.json:1: not valid JSON" in str(p) for p in raised.value.problems)


def test_a_pack_without_topology_has_no_call_edges(pack_dir):
    assert pack_call_edges(pack_dir) == ()
