"""A change that is no harm: a success share that rises, a service that starts serving.

Properties over generated systems (scenarios/_generator/fleet.py, any fault kind, random
names), with one bystander (neither the root nor one of its callers) given a success share
that changes at the fault's onset:

- its share rises (40 % of its requests succeed, then 98 %), or it starts serving (0 % in the
  baseline, no traffic, to 100 % in the window);
- either way the bystander is never a root-cause candidate, no hypothesis names it, and no
  kind is given to it; the root still leads.

And a service suspected for other evidence (its own new warnings) whose success share rose:
the basis of its hypothesis never cites that share as evidence.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.models import DiagnosisSession
from diagnosis.offline.analysis import suspects_rank
from diagnosis.offline.hypotheses import hypothesis_build
from tests.support.pack_transforms import services_rename

from .fakes import logs_call, metrics_call, summary_series, template

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import BASELINE_S, NOW, ONSET_S, STEP, WINDOW_S, FleetPack, fleet_pack_write

# (metric, baseline level, window level, spread of the baseline): a share that rises (40 % of
# the requests succeeding, then 98 %), and one from no traffic at all (the exporter writes
# 0 %) to serving every request
CHANGES = {
    "rises": ("checkout_request_success_ratio", 0.4, 0.98, 0.02),
    "starts_serving": ("availability_percent", 0.0, 100.0, 0.0),
}


def _bystander(pack: FleetPack, rng: random.Random) -> str:
    """A service the fault does not reach: neither the root nor any of its callers."""
    reached, grown = {pack.root}, True
    while grown:
        callers = {a for a, b in pack.calls if b in reached} - reached
        reached |= callers
        grown = bool(callers)
    return rng.choice(sorted(set(pack.services) - reached))


def _share_write(pack: FleetPack, service: str, change: str, rng: random.Random) -> None:
    metric, base, level, spread = CHANGES[change]
    end = int(NOW.timestamp())
    onset = end - WINDOW_S + ONSET_S
    lines = [f"# TYPE {metric} gauge"]
    for t in range(end - WINDOW_S - BASELINE_S, end, STEP):
        value = level if t >= onset else base + rng.uniform(-spread, spread)
        lines.append(f'{metric}{{service="{service}"}} {value:.6g} {t}')
    path = pack.path / "metrics" / f"{service}.om"
    text = path.read_text(encoding="utf-8").removesuffix("# EOF\n")
    path.write_text(text + "\n".join(lines) + "\n# EOF\n", encoding="utf-8")


@pytest.mark.django_db
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize(
    ("seed", "kind", "renamed"),
    [(1, "latency", False), (2, "cpu", False), (3, "errors", True), (5, "memory", False)],
)
def test_a_share_that_rises_or_starts_serving_is_never_a_cause(
    tmp_path, seed, kind, renamed, change
):
    pack = fleet_pack_write(
        out=tmp_path / "pack", services=12, seed=seed, kind=kind, depth=1 + seed % 3
    )
    rng = random.Random(f"{seed}:{change}")
    _share_write(pack, _bystander(pack, rng), change, rng)
    if renamed:
        services_rename(pack=pack.path, rng=random.Random(seed))
    scenario = json.loads((pack.path / "scenario.yaml").read_text(encoding="utf-8"))
    root = scenario["expected"]["root_cause_service"]
    metric = CHANGES[change][0]
    (eased,) = [p.stem for p in pack.path.glob("metrics/*.om") if metric in p.read_text("utf-8")]
    result = pack_evaluate(path=pack.path, provider="offline")
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    hypotheses = (session.executor_structured_output or {}).get("hypotheses") or []
    claims = (session.executor_structured_output or {}).get("claims") or []
    assert eased not in result.root_cause_candidates
    assert eased not in {h.get("entity") for h in hypotheses}
    assert not [c for c in claims if c.get("entity") == eased and c.get("root_cause_kind")]
    assert result.root_cause_candidates[:1] == [root]


@pytest.mark.parametrize("metric", ["request_success_ratio", "availability_percent"])
@pytest.mark.parametrize("seed", range(3))
def test_a_rising_success_share_is_never_the_basis_of_a_hypothesis(seed, metric):
    rng = random.Random(seed)
    service = f"svc-{rng.randrange(100, 999)}"
    scale = 100.0 if metric.endswith("_percent") else 1.0
    base = rng.uniform(0.3, 0.6) * scale
    share = summary_series(
        service, metric, base=base, level=0.99 * scale, change="2026-03-02T10:22:00Z", score=40
    )
    warning = template(
        service, "WARN", "Slow handler <*> took <NUM> ms", rng.randrange(50, 500), 0,
        "2026-03-02T10:21:40Z", ["Slow handler /items took 900 ms"],
    )  # fmt: skip
    (entry,) = suspects_rank([metrics_call([share]), logs_call([warning])], [service])
    for lang in ("zh", "en"):
        assert metric not in hypothesis_build(entry, lang, None).basis


@pytest.mark.parametrize("seed", range(3))
def test_the_runbook_search_never_asks_for_a_series_that_eased(seed):
    from diagnosis.offline.knowledge import knowledge_query

    rng = random.Random(seed)
    service = f"svc-{rng.randrange(100, 999)}"
    eased = summary_series(
        service, "request_success_ratio", base=rng.uniform(0.3, 0.6), level=0.99,
        change="2026-03-02T10:22:00Z", score=60,
    )  # fmt: skip
    harm = summary_series(
        service, "process_cpu_usage_percent", base=rng.uniform(10, 20), level=95.0,
        change="2026-03-02T10:22:00Z", score=30,
    )  # fmt: skip
    (entry,) = suspects_rank([metrics_call([eased, harm])], [service])
    query = knowledge_query(entry, [entry], {})
    assert "process_cpu_usage_percent" in query
    assert "request_success_ratio" not in query
