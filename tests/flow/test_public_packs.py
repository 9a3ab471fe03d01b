"""Real incidents in the repository: the PetShop train packs hold an evaluation floor.

The bound is what the offline engine measured on them, minus a margin of two packs: a
range, not a ratchet. All 20 packs share one root cause, so a high score here proves
little on its own, and a general rule may cost a pack or two here while it holds on the
generated fleets and the robustness bench (bench/robustness.py); a fall below the bound
is a regression of the method.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnosis.evaluation import EvaluationReport, pack_evaluate
from diagnosis.evidence.packs import pack_discover

PACKS = Path(__file__).resolve().parents[2] / "scenarios" / "public" / "petshop-train"
AC1_FLOOR = 0.75  # measured 0.85 (a callee explains a caller only if it shifted no later)
AC3_FLOOR = 0.85  # measured 0.95
KIND_FLOOR = 0.85  # measured 0.95

pytestmark = pytest.mark.django_db


def test_the_petshop_train_incidents_hold_the_evaluation_floor() -> None:
    results = [pack_evaluate(path=path, provider="offline") for path in pack_discover([PACKS])]
    assert len(results) == 20
    assert all(r.status == "completed" for r in results)
    totals = EvaluationReport(packs=results).totals
    assert totals["ac_at_1"] >= AC1_FLOOR
    assert totals["ac_at_3"] >= AC3_FLOOR
    assert totals["kind_accuracy"] >= KIND_FLOOR
    assert totals["unsupported_in_answer"] == 0
