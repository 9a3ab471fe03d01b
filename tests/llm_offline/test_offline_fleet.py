"""The offline engine on whole fleets: every service examined, localisation along the calls."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("seed", "kind"), [(1, "errors"), (2, "cpu"), (4, "latency")])
def test_the_root_cause_ranks_first_when_it_is_the_deepest_anomalous_callee(tmp_path, seed, kind):
    pack = fleet_pack_write(out=tmp_path / "fleet", services=30, seed=seed, kind=kind, depth=2)
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.status == "completed"
    assert result.root_cause_candidates[:1] == [pack.root]
    assert result.kind_ok, (result.root_cause_kind, result.expected_kind)


def test_a_caller_that_only_inherits_latency_is_not_the_root_cause(tmp_path):
    pack = fleet_pack_write(out=tmp_path / "fleet", services=30, seed=4, kind="latency", depth=2)
    callers = {a for a, b in pack.calls if b == pack.root}
    result = pack_evaluate(path=pack.path, provider="offline")
    assert callers, "the generated root has a caller"
    assert result.root_cause_candidates[0] not in callers
    assert pack.entry != result.root_cause_candidates[0]


def test_a_root_cause_that_sorts_last_of_46_services_is_still_found(tmp_path):
    # the names sort the root last: an alphabetical cap would never look at it
    pack = fleet_pack_write(out=tmp_path / "fleet", services=46, seed=7, kind="errors", depth=1)
    renamed = tmp_path / "renamed"
    _rename(pack.path, renamed, {pack.root: "zz-last-service"})
    result = pack_evaluate(path=renamed, provider="offline")
    assert result.root_cause_candidates[:1] == ["zz-last-service"]


def _rename(source: Path, target: Path, names: dict[str, str]) -> None:
    for path in source.rglob("*"):
        if path.is_dir():
            continue
        relative = path.relative_to(source)
        for old, new in names.items():
            relative = Path(str(relative).replace(old, new))
        text = path.read_text(encoding="utf-8")
        for old, new in names.items():
            text = text.replace(old, new)
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(text, encoding="utf-8")
