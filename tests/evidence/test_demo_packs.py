"""The demo packs in scenarios/ load cleanly and every tool reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import pack_discover
from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.models import DiagnosisSession, ToolInvocation

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
PACKS = pack_discover([SCENARIOS])


def test_there_are_at_least_four_demo_packs():
    assert len(PACKS) >= 4


@pytest.mark.parametrize("pack_path", PACKS, ids=[p.name for p in PACKS])
def test_each_demo_pack_passes_the_loader(pack_path):
    pack = pack_load(pack_path)
    assert pack.paths.metrics and pack.paths.logs and pack.paths.knowledge


@pytest.mark.django_db
@pytest.mark.parametrize("pack_path", PACKS, ids=[p.name for p in PACKS])
def test_every_tool_answers_on_each_demo_pack_with_quotable_lines(pack_path, owner):
    pack = pack_load(pack_path)
    environments = {e.slug: e for e in environments_sync_from_packs(dirs=[pack_path])}
    window = pack.window
    context = {"now": pack.now.isoformat()}
    if window:
        context["window"] = {"start": window.start.isoformat(), "end": window.end.isoformat()}
    session = DiagnosisSession.objects.create(
        owner=owner,
        environment=environments[pack.id],
        original_query=pack.question,
        context=context,
    )
    service = pack.expected.get("root_cause_service") or pack.services[0]
    calls = [
        ("query_metrics", {"service": service}),
        ("query_logs", {"service": service}),
        ("query_logs", {"level": "ERROR"}),
        ("lookup_knowledge", {"query": pack.question}),
    ]
    for tool_name, arguments in calls:
        result = tool_invoke(session=session, attempt=1, tool_name=tool_name, arguments=arguments)
        row = ToolInvocation.objects.get(pk=result.invocation_id)
        assert row.status == "ok", row.output
        for entry in row.summary.get("series", []) + row.summary.get("templates", []):
            assert entry["line"] in row.output
            assert all(sample in row.output for sample in entry.get("samples", []))
        for chunk in row.summary.get("chunks", []):
            assert chunk["text"] in row.output
