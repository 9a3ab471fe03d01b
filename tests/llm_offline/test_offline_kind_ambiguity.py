"""Where the evidence cannot tell two kinds apart, the answer says which two (issue 26).

Properties on generated systems (scenarios/_generator/fleet.py), in both answer languages:
a network root on a system that exports no network counter shows only as latency, so the
answer is "latency or network" in its conclusion, with network as a hypothesis of its own on
the same evidence; where a counter shows it, or the fault is a saturated CPU, one kind
alone. A caller's client wait that rose over a flat callee is the way between them: a cause
claim bound to both series.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import PackResult, pack_evaluate
from diagnosis.models import DiagnosisSession
from diagnosis.selectors import session_self_evaluation
from tests.support.pack_transforms import services_rename

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

pytestmark = pytest.mark.django_db
SERVICES = 30
# the conclusion's words for "X or Y, which the evidence here cannot tell apart"
CANNOT_TELL = {"zh-CN": "现有证据无法区分两者", "en": "the evidence here cannot tell them apart"}
KIND = {
    "zh-CN": {"latency": "延迟", "network": "网络", "cpu": "CPU"},
    "en": {"latency": "latency", "network": "network", "cpu": "CPU"},
}


def _language_set(pack: Path, language: str) -> None:
    scenario = pack / "scenario.yaml"
    header = json.loads(scenario.read_text(encoding="utf-8"))
    header["language"] = language
    scenario.write_text(json.dumps(header, ensure_ascii=False), encoding="utf-8")


def _run(pack: Path, language: str = "zh-CN") -> tuple[PackResult, DiagnosisSession]:
    _language_set(pack, language)
    result = pack_evaluate(path=pack, provider="offline")
    assert result.status == "completed", result.error
    return result, DiagnosisSession.objects.get(public_id=result.session_id)


def _conclusion(answer: str) -> str:
    """The answer's first section: the text between its first two section titles."""
    parts = re.split(r"^\*\*[^*\n]+\*\*\s*$", answer, flags=re.MULTILINE)
    return parts[1].strip() if len(parts) > 1 else answer


@pytest.mark.parametrize("language", ["zh-CN", "en"])
@pytest.mark.parametrize("seed", [1, 3])
def test_a_network_root_with_no_network_counter_is_latency_or_network(tmp_path, seed, language):
    pack = fleet_pack_write(out=tmp_path / "p", services=SERVICES, seed=seed, kind="network",
                            network_counters=False)  # fmt: skip
    result, session = _run(pack.path, language)
    assert result.root_cause_candidates[:1] == [pack.root]
    assert (result.root_cause_kind, result.root_cause_kind_alternative) == ("latency", "network")
    assert result.kind_ok and not result.kind_strict_ok
    conclusion = _conclusion(session.final_answer)
    words = KIND[language]
    assert CANNOT_TELL[language] in conclusion
    assert words["latency"] in conclusion and words["network"] in conclusion
    # the other kind is a hypothesis of its own about the root, on the same evidence
    hypotheses = session_self_evaluation(session).composer_input.allowed_hypotheses
    lead = next(h for h in hypotheses if h.entity == pack.root and h.root_cause_kind == "latency")
    other = next(h for h in hypotheses if h.entity == pack.root and h.root_cause_kind == "network")
    cited = re.findall(r"[a-z_]+_seconds", lead.basis)
    assert cited and all(series in other.basis for series in cited)
    assert result.coherence_findings == []


@pytest.mark.parametrize(("kind", "seed"), [("cpu", 2), ("cpu", 4), ("network", 5)])
def test_a_kind_its_own_series_shows_is_named_alone(tmp_path, kind, seed):
    """A saturated CPU, or a network fault its retransmits show: one kind, no "or"."""
    pack = fleet_pack_write(out=tmp_path / "p", services=SERVICES, seed=seed, kind=kind)
    for language in ("zh-CN", "en"):
        result, session = _run(pack.path, language)
        assert result.root_cause_candidates[:1] == [pack.root]
        assert (result.root_cause_kind, result.root_cause_kind_alternative) == (kind, None)
        assert CANNOT_TELL[language] not in session.final_answer
        assert result.coherence_findings == []


@pytest.mark.parametrize("seed", [1, 2])
def test_a_client_wait_over_a_flat_callee_is_a_cause_bound_to_both_series(tmp_path, seed):
    pack = fleet_pack_write(out=tmp_path / "p", services=SERVICES, seed=seed, kind="network",
                            depth=2, client_latency=True, network_counters=False)  # fmt: skip
    callee = min(b for a, b in pack.calls if a == pack.root)
    result, session = _run(pack.path)
    assert result.root_cause_candidates[:1] == [pack.root]
    assert result.root_cause_kind == "network"
    allowed = session_self_evaluation(session).composer_input.allowed_claims
    [cause] = [c for c in allowed if c.claim_type == "root_cause"]
    assert cause.entity == pack.root and callee in cause.text
    claims = {c["claim_id"]: c for c in session.executor_structured_output["claims"]}
    excerpts = [b["evidence_excerpt"] for b in claims[cause.claim_id]["evidence_bindings"]]
    # the caller's client series on that callee, and the callee's own (flat) latency series
    assert any(pack.root in e and callee in e for e in excerpts)
    assert any(callee in e and pack.root not in e for e in excerpts)
    assert result.coherence_findings == []


@pytest.mark.parametrize(("seed", "options"), [(2, {}), (3, {"client_latency": True})])
def test_renaming_every_service_keeps_the_pair(tmp_path, seed, options):
    pack = fleet_pack_write(out=tmp_path / "a", services=SERVICES, seed=seed, kind="network",
                            network_counters=False, **options)  # fmt: skip
    renamed = tmp_path / "renamed"
    shutil.copytree(pack.path, renamed)
    services_rename(pack=renamed, rng=random.Random(seed))
    before, _ = _run(pack.path)
    after, _ = _run(renamed)
    assert after.expected_root_cause != before.expected_root_cause  # really renamed
    assert before.hit_at_1 and after.hit_at_1
    pair = (before.root_cause_kind, before.root_cause_kind_alternative)
    assert pair == (after.root_cause_kind, after.root_cause_kind_alternative)
