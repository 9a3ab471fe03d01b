"""The offline diagnosis of an incident does not depend on how the incident is written.

The same pack with its services renamed to neutral tokens, its times shifted by days
and hours, or its metrics named in another scheme must give the same root cause (under
its new name) and the same kind. bench/robustness.py measures every transform on every
pack; these pin the ones the engine holds on one demo pack and one real incident.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate
from tests.support.pack_transforms import pack_transform

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
DEMO = SCENARIOS / "payment-pool-saturation"
PETSHOP = SCENARIOS / "public" / "petshop-train" / "petshop-high-train-0"

pytestmark = pytest.mark.django_db


def _diagnosed(pack: Path, transform: str, tmp_path: Path) -> tuple[bool | None, bool | None]:
    copy = tmp_path / pack.name
    shutil.copytree(pack, copy)
    pack_transform(pack=copy, transform=transform, seed=7)
    assert _contents(copy) != _contents(pack)  # the rewrite did rewrite something
    result = pack_evaluate(path=copy, provider="offline")
    assert result.status == "completed", result.error
    assert result.leaked == 0
    return result.hit_at_1, result.kind_ok


def _contents(pack: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(pack)): p.read_bytes() for p in sorted(pack.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("pack", [DEMO, PETSHOP], ids=["demo", "petshop"])
def test_renamed_services_leave_the_root_cause_and_its_kind_as_they_were(pack, tmp_path):
    assert _diagnosed(pack, "services", tmp_path) == (True, True)


@pytest.mark.parametrize("pack", [DEMO, PETSHOP], ids=["demo", "petshop"])
def test_an_incident_shifted_by_days_and_hours_is_diagnosed_the_same(pack, tmp_path):
    assert _diagnosed(pack, "time", tmp_path) == (True, True)


def test_metrics_in_another_naming_scheme_give_the_same_diagnosis(tmp_path):
    assert _diagnosed(DEMO, "metrics", tmp_path) == (True, True)


def test_a_request_gauge_named_like_a_count_is_read_as_the_gauge_it_is(tmp_path):
    assert _diagnosed(PETSHOP, "metrics", tmp_path) == (True, True)
    om = "".join(p.read_text() for p in (tmp_path / PETSHOP.name / "metrics").glob("*.om"))
    assert "# TYPE service_request_count gauge" in om  # the renamed gauge, declared a gauge
