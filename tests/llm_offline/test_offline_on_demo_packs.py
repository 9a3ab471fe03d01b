"""The offline Executor on each demo pack, with the real evidence tools and Gatekeeper.

These are the packs the engine was developed on: the AC@1/AC@3 they give is a
regression floor, not a measure of how well it generalises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from diagnosis.contracts import GatekeeperReport
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import ScenarioPack
from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.flow.parsing import executor_output_parse
from diagnosis.llm.base import ExecutorRequest, PlannerRequest, Role
from diagnosis.models import DiagnosisSession
from diagnosis.offline import OfflineEngine
from tests.support.agents import agent_answer
from tests.support.gatekeeper import gatekeeper_run

PACKS_ROOT = Path(__file__).resolve().parents[2] / "scenarios"
PACKS = sorted(
    p.name
    for p in PACKS_ROOT.glob("*/scenario.yaml") and PACKS_ROOT.iterdir()
    if (p / "scenario.yaml").is_file()
)


def _run_pack(pack_id: str) -> tuple[ScenarioPack, dict, dict, GatekeeperReport, DiagnosisSession]:
    pack = pack_load(PACKS_ROOT / pack_id)
    environment = next(
        e for e in environments_sync_from_packs(dirs=[PACKS_ROOT / pack_id]) if e.slug == pack.id
    )
    calls: list[dict] = []

    def recorder(**kwargs: Any) -> None:
        calls.append(kwargs)

    provider = OfflineEngine()
    now = pack.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    hint = (
        {
            "start": pack.window.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": pack.window.end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if pack.window
        else None
    )
    plan = json.loads(
        agent_answer(
            provider,
            Role.PLANNER,
            PlannerRequest(
                question=pack.question,
                language=pack.language or "zh-CN",
                now=now,
                window=hint,
                services=list(pack.services),
            ),
            recorder=recorder,
        )
    )
    session = DiagnosisSession.objects.create(
        environment=environment,
        original_query=pack.question,
        language=pack.language or "zh-CN",
        context={"now": now, "window": plan["window"]},
        plan=plan,
    )

    def tools(name: str, arguments: Any) -> Any:
        return tool_invoke(session=session, attempt=1, tool_name=name, arguments=arguments)

    raw = agent_answer(
        provider,
        Role.EXECUTOR,
        ExecutorRequest(
            question=pack.question,
            language=pack.language or "zh-CN",
            now=now,
            window=plan["window"],
            plan=plan,
            services=list(pack.services),
            attempt=1,
        ),
        tools=tools,
        tool_specs=[],
        recorder=recorder,
    )
    parsed = executor_output_parse(raw)
    report = gatekeeper_run(session=session, parsed=parsed)
    return pack, plan, json.loads(raw), report, session


def _candidates(output: dict) -> list[str]:
    ranked: list[str] = []
    for claim in output["claims"]:
        if claim["claim_type"] == "root_cause" and claim.get("entity") not in ranked:
            ranked.append(claim["entity"])
    for hypothesis in output["hypotheses"]:
        if hypothesis.get("entity") and hypothesis["entity"] not in ranked:
            ranked.append(hypothesis["entity"])
    return ranked


@pytest.mark.django_db
@pytest.mark.parametrize("pack_id", PACKS)
def test_every_offline_claim_on_a_demo_pack_passes_the_gatekeeper_and_names_the_cause(pack_id):
    pack, plan, output, report, session = _run_pack(pack_id)
    if os.environ.get("OFFLINE_DEBUG"):  # a folder to dump what the engine saw and wrote
        dump = {
            "plan": plan,
            "invocations": [
                {
                    "trace_ref": i.trace_ref,
                    "tool": i.tool_name,
                    "arguments": i.arguments,
                    "status": i.status,
                    "output": i.output,
                    "summary": i.summary,
                }
                for i in session.invocations.all()
            ],
            "output": output,
            "gatekeeper": report.model_dump(mode="json"),
        }
        target = Path(os.environ["OFFLINE_DEBUG"]) / f"{pack_id}.json"
        target.write_text(json.dumps(dump, ensure_ascii=False, indent=1), encoding="utf-8")
    assert output["claims"], "the engine found nothing to claim"
    demoted = [c for c in report.claims if c.verdict != "accepted"]
    assert not demoted, demoted
    expected = (pack.expected or {}).get("root_cause_service")
    if expected:
        assert _candidates(output)[:1] == [expected], _candidates(output)
