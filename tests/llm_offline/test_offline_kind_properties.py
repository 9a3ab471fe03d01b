"""Properties of the fault kind on generated systems (scenarios/_generator/fleet.py).

Any random call graph, any of the naming schemes: the root of an injected fault is found
and given the kind of that fault, whatever the services are called and whatever the
question's words say about the symptom.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import PackResult, pack_evaluate
from diagnosis.models import DiagnosisSession
from tests.support.pack_transforms import services_rename

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import KINDS, fleet_pack_write

pytestmark = pytest.mark.django_db
SERVICES = 30


def _evaluated(path: Path) -> PackResult:
    result = pack_evaluate(path=path, provider="offline")
    assert result.status == "completed", result.error
    return result


def _kind_findings(result: PackResult) -> list[str]:
    return [f for f in result.coherence_findings if f.startswith("kind_without_evidence")]


@pytest.mark.parametrize("kind", KINDS)
def test_the_root_of_a_generated_fault_is_found_with_the_kind_of_that_fault(tmp_path, kind):
    seed = KINDS.index(kind) + 1  # another graph, naming scheme and root for every kind
    pack = fleet_pack_write(out=tmp_path / kind, services=SERVICES, seed=seed, kind=kind)
    result = _evaluated(pack.path)
    assert result.root_cause_candidates[:1] == [pack.root]
    assert result.root_cause_kind == kind
    assert not _kind_findings(result)
    # the engine names the kind its excerpts about the root show: the Gatekeeper agrees
    session = DiagnosisSession.objects.order_by("-id").first()
    assert [a["attempt"] for a in session.self_evaluation["attempts"]] == [1]
    codes = {
        f["code"] for c in session.self_evaluation["gatekeeper"]["claims"] for f in c["findings"]
    }
    assert "kind_unbound" not in codes


def _question_set(pack: Path, question: str) -> None:
    scenario = pack / "scenario.yaml"
    header = json.loads(scenario.read_text(encoding="utf-8"))
    header["question"] = question
    scenario.write_text(json.dumps(header, ensure_ascii=False), encoding="utf-8")


@pytest.mark.parametrize(("kind", "seed"), [("cpu", 5), ("errors", 6), ("code", 7)])
def test_the_kind_never_follows_the_questions_wording(tmp_path, kind, seed):
    pack = fleet_pack_write(out=tmp_path / "a", services=SERVICES, seed=seed, kind=kind)
    other = tmp_path / "b"
    shutil.copytree(pack.path, other)
    _question_set(pack.path, f"{pack.entry} 从 10:22 开始延迟升高，帮我定位根因服务")
    _question_set(other, f"{pack.entry} 从 10:22 开始错误率升高、大量失败，帮我定位根因服务")
    slow, failing = _evaluated(pack.path), _evaluated(other)
    assert slow.root_cause_kind == failing.root_cause_kind == kind
    assert slow.root_cause_candidates[:1] == failing.root_cause_candidates[:1] == [pack.root]


@pytest.mark.parametrize(("kind", "seed"), [("memory", 8), ("network", 9), ("configuration", 10)])
def test_renaming_every_service_changes_neither_the_root_nor_its_kind(tmp_path, kind, seed):
    pack = fleet_pack_write(out=tmp_path / "a", services=SERVICES, seed=seed, kind=kind)
    renamed = tmp_path / "renamed"
    shutil.copytree(pack.path, renamed)
    services_rename(pack=renamed, rng=random.Random(seed))
    before, after = _evaluated(pack.path), _evaluated(renamed)
    assert before.hit_at_1 and after.hit_at_1
    assert after.expected_root_cause != before.expected_root_cause  # really renamed
    assert before.root_cause_kind == after.root_cause_kind == kind
