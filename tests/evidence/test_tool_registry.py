"""A tool registered here, and nowhere else, is usable by the whole flow.

``query_events`` (deploy and config events) exists only in this file: registered with
``tool_registered``, it is offered to the model, called by the Executor through
``tool_invoke``, accepted by the Gatekeeper as evidence, summarised into the Verifier's
trace summary by its own ``facts``, listed in the Planner's prompt, and a pack may record
calls of it that replay. No other file names it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evidence.common import BackendOutput
from diagnosis.evidence.invoke import tool_invoke, tool_specs
from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import PackError
from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.evidence.tools import (
    evidence_tool_names,
    recordable_tool_names,
    tool_definition,
    tool_register,
    tool_registered,
)
from diagnosis.evidence.tools.base import Arg, ToolCall, ToolDefinition
from diagnosis.flow import selection
from diagnosis.flow.planner import planner_messages
from diagnosis.flow.trace_summary import trace_summary_build
from diagnosis.llm.base import Role
from diagnosis.llm.scripted import ScriptedProvider
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from diagnosis.selectors import session_self_evaluation
from diagnosis.services import diagnosis_submit
from tests.evidence.packbuilder import recorded_write
from tests.llm.requests import planner_request

MINI_PACK = Path(__file__).resolve().parents[1] / "flow" / "fixtures" / "mini-pool"
EVENT = "payment-service deploy v2.3.1 rolled out at 2026-03-02T10:18:00Z, max_pool_size 10 -> 4"


def _run(call: ToolCall) -> BackendOutput:
    service = call.args["service"]
    line = EVENT if service == "payment-service" else f"{service}: no events"
    return BackendOutput(
        status="ok",
        output=f"query_events service={service}\n{line}",
        summary={"events": [{"line": line}]},
    )


def _facts(summary: dict[str, Any]) -> list[str]:
    return [f"event: {e['line']}" for e in summary.get("events", [])]


QUERY_EVENTS = ToolDefinition(
    name="query_events",
    purpose="deploys and config changes of a service",
    description="Deploys and configuration changes of a service in the window.",
    args=(Arg("service", "string", "Service name, e.g. payment-service.", required=True),),
    run=_run,
    empty_summary=lambda: {"events": []},
    kind="evidence",
    facts=_facts,
)


@pytest.fixture
def query_events():
    with tool_registered(QUERY_EVENTS) as definition:
        yield definition


def _content(body: dict[str, Any]) -> dict[str, str]:
    return {"content": json.dumps(body, ensure_ascii=False)}


def _script() -> dict[str, list[dict[str, Any]]]:
    claim = {
        "claim_id": "claim-1",
        "claim_type": "configuration",
        "claim_text": "payment-service 发布后连接池上限被调小",
        "entity": "payment-service",
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": "trace-1",
                "tool_name": "query_events",
                "evidence_excerpt": "deploy v2.3.1 rolled out",
            }
        ],
    }
    return {
        "planner": [
            _content(
                {
                    "plan_version": "planner_v1",
                    "services": ["payment-service"],
                    "window": {"start": "2026-03-02T10:10:00Z", "end": "2026-03-02T10:40:00Z"},
                    "symptoms": ["timeout"],
                    "tools": ["query_events"],
                }
            )
        ],
        "executor": [
            {"tool_calls": [{"name": "query_events", "arguments": {"service": "payment-service"}}]},
            _content(
                {
                    "answer_version": "executor_evidence_v2",
                    "claims": [claim],
                    "hypotheses": [],
                    "recommended_actions": [],
                    "missing_info": [],
                }
            ),
        ],
        "verifier": [
            _content(
                {
                    "verifier_version": "verifier_v2",
                    "decision": "PASS",
                    "claim_checks": [
                        {"claim_id": "claim-1", "classification": "direct_observation"}
                    ],
                    "summary": "ok",
                }
            )
        ],
        "composer": [
            _content({"answer_version": "composer_v1", "final_answer": "发布后连接池上限被调小。"})
        ],
    }


def test_the_registry_knows_a_registered_tool_only_while_it_is_registered():
    assert tool_definition("query_events") is None
    with tool_registered(QUERY_EVENTS):
        assert tool_definition("query_events") is QUERY_EVENTS
        assert "query_events" in evidence_tool_names()
        assert "query_events" in recordable_tool_names()
        assert "query_events" in [s["function"]["name"] for s in tool_specs()]
        with pytest.raises(ValueError, match="already registered"):
            tool_register(QUERY_EVENTS)
    assert tool_definition("query_events") is None
    assert "query_events" not in evidence_tool_names()


def test_the_planner_prompt_lists_a_registered_tool(query_events):
    system = planner_messages(planner_request())[0]["content"]

    assert (
        "- `query_events`: deploys and config changes of a service (arguments: service)" in system
    )
    assert '"query_events"' in system


def test_the_executor_gatekeeper_and_trace_summary_use_a_registered_tool(
    query_events, owner, monkeypatch, django_capture_on_commit_callbacks
):
    environment = Environment.objects.create(
        slug="mini-pool",
        name="mini",
        kind=Environment.Kind.SCENARIO,
        pack_path=str(MINI_PACK),
        services=["payment-service", "order-service", "mysql"],
    )
    provider = ScriptedProvider(_script())
    monkeypatch.setattr(
        selection, "agents_for_session", lambda **kwargs: dict.fromkeys(Role, provider)
    )
    with django_capture_on_commit_callbacks(execute=True):
        submitted = diagnosis_submit(
            question="payment-service 从 10:20 开始大量超时", environment=environment, owner=owner
        )
    session = DiagnosisSession.objects.get(pk=submitted.pk)

    # The Executor called it through tool_invoke: one persisted invocation.
    (invocation,) = ToolInvocation.objects.filter(session=session)
    assert (invocation.tool_name, invocation.status) == ("query_events", "ok")
    assert EVENT in invocation.output
    # The Gatekeeper accepted the direct claim bound to its output as evidence.
    report = session_self_evaluation(session).gatekeeper
    assert report is not None
    assert report.verdict_for("claim-1") == "accepted"
    assert report.counts.accepted == 1
    # The trace summary carries the tool's own facts.
    (entry,) = trace_summary_build(session=session)
    assert entry["tool_name"] == "query_events"
    assert f"event: {EVENT}" in entry["summary"]
    assert session.status == DiagnosisSession.Status.COMPLETED


def _replay_pack(root: Path) -> Path:
    pack = root / "events-replay"
    pack.mkdir(parents=True)
    (pack / "scenario.yaml").write_text(
        "id: events-replay\ntitle: Replay\nquestion: why\nnow: 2026-03-02T10:40:00Z\n",
        encoding="utf-8",
    )
    recorded_write(
        pack,
        [
            {
                "tool_name": "query_events",
                "arguments": {"service": "pay"},
                "status": "ok",
                "output": "query_events service=pay\npay deploy v9 (recorded)",
                "summary": {"events": [{"line": "pay deploy v9 (recorded)"}]},
            }
        ],
    )
    return pack


def _not_run(call: ToolCall) -> BackendOutput:
    raise AssertionError("a recorded call is replayed, not run")


def test_a_recorded_call_of_a_registered_tool_replays(tmp_path, owner):
    pack = _replay_pack(tmp_path)
    with tool_registered(dataclasses.replace(QUERY_EVENTS, run=_not_run)):
        (environment,) = environments_sync_from_packs(dirs=[pack])
        session = DiagnosisSession.objects.create(
            owner=owner, environment=environment, original_query="为什么失败"
        )
        result = tool_invoke(
            session=session, attempt=1, tool_name="query_events", arguments={"service": "pay"}
        )
        (entry,) = trace_summary_build(session=session)

    assert result.status == "ok"
    assert result.output == "query_events service=pay\npay deploy v9 (recorded)"
    assert result.summary["recorded"] is True
    assert "event: pay deploy v9 (recorded)" in entry["summary"]


def test_a_pack_may_record_a_tool_only_while_it_is_registered(tmp_path):
    pack = _replay_pack(tmp_path)
    with pytest.raises(PackError, match="tool_name must be one of"):
        pack_load(pack)
    with tool_registered(QUERY_EVENTS):
        assert pack_load(pack).id == "events-replay"
