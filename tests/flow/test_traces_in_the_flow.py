"""query_traces through the whole flow with scripted agents: its invocation row, the
Gatekeeper accepting an excerpt of it, the facts the Verifier sees, replay of a recording."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from chat.models import Conversation
from diagnosis.flow.trace_summary import invocation_facts
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.evidence.packbuilder import pack_write
from tests.evidence.tracebuilder import chain_lines, traces_write
from tests.flow.conftest import composer_json, executor_json, verifier_json

SERVICES = ["gateway", "pay", "db"]
QUERY_TRACES = {"tool_calls": [{"name": "query_traces", "arguments": {}}]}
EXCERPT = "pay: 360 requests"


@pytest.fixture
def trace_pack(tmp_path):
    pack = pack_write(tmp_path / "packs" / "fixture-traces", pack_id="fixture-traces")
    lines = chain_lines(
        SERVICES,
        start=datetime(2026, 3, 2, 8, 0, tzinfo=UTC),
        end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC),
        change_at=datetime(2026, 3, 2, 10, 19, tzinfo=UTC),
        slow="pay",
    )
    traces_write(pack / "traces", lines, gz=True)
    return pack


@pytest.fixture
def mini_env(db, trace_pack):
    return Environment.objects.create(
        slug="fixture-traces",
        name="traces",
        kind=Environment.Kind.SCENARIO,
        pack_path=str(trace_pack),
        services=SERVICES,
    )


def _trace_claim(excerpt=EXCERPT):
    return {
        "claim_id": "claim-1",
        "claim_type": "symptom",
        "claim_text": "pay 的链路数据显示其自身耗时上升",
        "entity": "pay",
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": "trace-1",
                "tool_name": "query_traces",
                "evidence_excerpt": excerpt,
            }
        ],
    }


def _run(run_scripted, claim):
    return run_scripted(
        {
            "executor": [QUERY_TRACES, executor_json(claim)],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json("**结论**\n\npay 自身耗时上升。\n")],
        },
        question="pay 从 10:20 开始变慢",
    )


def test_an_excerpt_of_the_fleet_view_confirms_a_direct_claim(run_scripted):
    session = _run(run_scripted, _trace_claim())
    assert session.status == DiagnosisSession.Status.COMPLETED
    [row] = ToolInvocation.objects.filter(session=session, tool_name="query_traces")
    assert row.status == "ok" and row.trace_ref == "trace-1"
    assert EXCERPT in row.output
    evaluation = session.self_evaluation
    assert evaluation["gatekeeper"]["counts"]["accepted"] == 1
    pay_line = next(s["line"] for s in row.summary["services"] if s["service"] == "pay")
    assert pay_line in invocation_facts(row)  # what the Verifier is shown of the call


def test_an_excerpt_the_output_does_not_hold_is_demoted(run_scripted):
    session = _run(run_scripted, _trace_claim("pay: 999 requests"))
    assert session.self_evaluation["gatekeeper"]["counts"]["demoted"] == 1


def test_a_recorded_invocation_is_replayed_instead_of_read(run_scripted, trace_pack):
    (trace_pack / "recorded").mkdir()
    recorded = {
        "tool_name": "query_traces",
        "arguments": {},
        "status": "ok",
        "output": f"query_traces fleet view\n{EXCERPT} (recorded)",
    }
    (trace_pack / "recorded" / "invocations.jsonl").write_text(json.dumps(recorded) + "\n")
    session = _run(run_scripted, _trace_claim())
    [row] = ToolInvocation.objects.filter(session=session, tool_name="query_traces")
    assert row.output == recorded["output"]
    assert row.summary["recorded"] is True
    assert session.self_evaluation["gatekeeper"]["counts"]["accepted"] == 1


def test_the_pages_draw_the_waterfall_and_the_edge_table_with_the_quote_marked(
    run_scripted, owner, client, reviewer
):
    trace_id = f"{1:032x}"
    calls = {
        "tool_calls": [
            {"name": "query_traces", "arguments": {}},
            {"name": "query_traces", "arguments": {"trace_id": trace_id}},
        ]
    }
    claim = _trace_claim("edge gateway -> pay: 360 calls")
    claim["evidence_bindings"].append(
        {
            "source_type": "tool_trace",
            "source_id": "trace-2",
            "tool_name": "query_traces",
            "evidence_excerpt": "pay pay handle [server]",
        }
    )
    session = run_scripted(
        {
            "executor": [calls, executor_json(claim)],
            "verifier": [verifier_json("PASS", **{"claim-1": "direct_observation"})],
            "composer": [composer_json("**结论**\n\npay 自身耗时上升。\n")],
        },
        question="pay 从 10:20 开始变慢",
    )
    assert session.self_evaluation["gatekeeper"]["counts"]["accepted"] == 1
    session.conversation = Conversation.objects.create(owner=owner, environment=session.environment)
    session.save()
    client.force_login(owner)
    chat = client.get(reverse("chat:conversation_detail", args=[session.conversation.pk]))
    client.force_login(reviewer)
    audit = client.get(reverse("audit:session_read", args=[session.public_id]))
    for page in (chat.content.decode(), audit.content.decode()):
        assert 'class="trace-waterfall"' in page and 'class="trace-edges"' in page
        assert '<tr class="te-marked"><td><code>gateway</code></td><td><code>pay</code>' in page
        marked = page[page.index("tw-marked") : page.index("tw-marked") + 400]
        assert "pay pay handle" in marked
        assert (
            page.count("tw-marked") == 1
            and 'style="' not in page.split("trace-waterfall")[1][:4000]
        )
