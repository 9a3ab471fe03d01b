"""The offline engine with traces: the spans' fleet view first (and no trace call at all
without traces), the leaders drilled into, the call graph from the spans, claims that
quote the tool's lines."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.models import DiagnosisSession, ToolInvocation

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

pytestmark = pytest.mark.django_db
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _calls(result):
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    return list(ToolInvocation.objects.filter(session=session).order_by("sequence"))


def test_without_traces_the_engine_never_calls_query_traces():
    result = pack_evaluate(path=SCENARIOS / "checkout-bad-deploy", provider="offline")
    assert result.status == "completed"
    assert not [c for c in _calls(result) if c.tool_name == "query_traces"]


def test_with_traces_the_fleet_view_comes_first_then_the_leader(tmp_path):
    pack = shutil.copytree(SCENARIOS / "payment-pool-saturation", tmp_path / "p")
    result = pack_evaluate(path=pack, provider="offline")
    calls = _calls(result)
    assert (calls[0].tool_name, calls[0].arguments, calls[0].status) == ("query_traces", {}, "ok")
    traces = [c.arguments for c in calls if c.tool_name == "query_traces"]
    assert {"service": "payment-service"} in traces
    assert any("trace_id" in a for a in traces)
    assert result.root_cause_candidates[:1] == ["payment-service"]


def test_a_claim_quotes_the_fleet_view_line_of_the_suspect(tmp_path):
    pack = shutil.copytree(SCENARIOS / "inventory-slow-dependency", tmp_path / "p")
    result = pack_evaluate(path=pack, provider="offline")
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    fleet = next(c for c in _calls(result) if c.tool_name == "query_traces")
    allowed = {c["claim_id"] for c in session.self_evaluation["composer_input"]["allowed_claims"]}
    quoting = [
        c
        for c in session.executor_structured_output["claims"]
        for b in c["evidence_bindings"]
        if b["source_id"] == fleet.trace_ref and b["evidence_excerpt"] in fleet.output
    ]
    assert quoting and quoting[0]["entity"] == "pricing-service"
    assert quoting[0]["claim_id"] in allowed  # the Gatekeeper and the Verifier let it stand


@pytest.mark.parametrize(("seed", "kind"), [(1, "errors"), (2, "cpu"), (12, "latency")])
def test_on_a_fleet_without_call_metrics_the_spans_find_the_root(tmp_path, seed, kind):
    pack = fleet_pack_write(
        out=tmp_path / "fleet", services=46, seed=seed, kind=kind, traces=True, topology=False
    )
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.status == "completed"
    assert result.root_cause_candidates[:1] == [pack.root]
    callers = {a for a, b in pack.calls if b == pack.root}
    assert not callers & set(result.root_cause_candidates[:1])
