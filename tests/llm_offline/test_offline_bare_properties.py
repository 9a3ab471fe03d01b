"""Localisation with no call graph at all: properties over random systems.

No topology, no traces, no call-edge series, no caller's log that names a callee: what
orders the candidates is their own evidence and the order of their onsets. A service whose
every shift began a full resolution after another's slowdown or failures may be its effect
and never outranks it, whatever its strength; one that began with it, or whose own resource
moved first, keeps its place; names order nothing; and the answer says the calls were
unknown instead of reasoning along them.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.offline.analysis import Suspect
from diagnosis.offline.executor import evidence_write
from diagnosis.offline.gather import Evidence, suspects_localise
from diagnosis.offline.localise import leaders_tied

from .fakes import WINDOW_END, at_minute, metrics_evidence, summary_series, window_request

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

NOW = WINDOW_END
WORDS = ("pay", "cart", "auth", "geo", "feed", "bill", "ship", "tax", "mail", "rank")
ROLES = ("api", "svc", "db", "cache", "worker", "gateway")


def _names(rng: random.Random, count: int) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = f"{rng.choice(WORDS)}-{rng.choice(ROLES)}-{rng.randrange(1000):03d}"
        if name not in names:
            names.append(name)
    return names


def _symptom(service: str, kind: str, *, change: str | None, score: float, factor: float):
    """A latency (seconds) or an error share series shifted by ``factor`` at ``change``."""
    if kind == "latency":
        metric, base = "http_server_latency_seconds", 0.05
    else:
        metric, base = "http_server_error_ratio", 0.002
    level = base * factor if change else base
    return summary_series(
        service, metric, base=base, level=level, change=change, score=score, now=NOW
    )


def _pool(service: str, *, change: str, score: float) -> dict[str, Any]:
    """Connections in use rising by half, no limit reached (work in flight)."""
    return summary_series(
        service,
        "hikaricp_connections_active",
        base=10.0,
        level=15.0,
        change=change,
        score=score,
        now=NOW,
    )


def _cpu_limited(service: str, *, change: str, score: float) -> list[dict[str, Any]]:
    """CPU use at its limit: a resource of its own."""
    use = summary_series(
        service, "process_cpu_usage_ratio", base=0.2, level=0.99, change=change, score=score
    )
    return [use]


def _evidence(series: list[dict[str, Any]]) -> Evidence:
    evidence = metrics_evidence(series)
    assert not evidence.topology.known
    return evidence


def _ranked(series: list[dict[str, Any]], named: str) -> tuple[list[Suspect], Evidence]:
    services = sorted({s["service"] for s in series})
    evidence = _evidence(series)
    ranked = suspects_localise(window_request(services, named), evidence, [named])
    return [s for s in ranked if s.score > 0 or s.graph_score > 0], evidence


def _system(seed: int) -> tuple[str, list[str], list[dict[str, Any]]]:
    """A root that slows or fails at 10:20, the strongest shift of all, and 2-6 services that
    show it three to six one-minute samples later (past both onsets' dating, 2 × 2 minutes)."""
    rng = random.Random(seed)
    root, *later = _names(rng, rng.randint(3, 7))
    series = [
        _symptom(
            root, rng.choice(["latency", "errors"]), change=at_minute(20), score=400, factor=50
        )
    ]
    for name in later:
        series.append(
            _symptom(
                name,
                rng.choice(["latency", "errors"]),
                change=at_minute(20 + rng.randint(5, 8)),
                score=rng.uniform(15, 25),
                factor=rng.uniform(2, 4),
            )
        )
    rng.shuffle(series)
    return root, later, series


@pytest.mark.parametrize("seed", range(12))
def test_services_that_began_well_after_the_leader_are_marked_as_its_possible_effects(seed):
    root, later, series = _system(seed)
    ranked, _ = _ranked(series, named=later[0])
    assert ranked[0].service == root
    assert ranked[0].follows == []
    for entry in ranked[1:]:
        assert entry.follows == [root]


@pytest.mark.parametrize("seed", range(6))
def test_renaming_every_service_changes_nothing_but_the_names(seed):
    _root, later, series = _system(seed)
    ranked, _ = _ranked(series, named=later[0])
    # new names that sort the other way round
    ordered = sorted({s["service"] for s in series})
    names = {old: f"node-{len(ordered) - i:03d}" for i, old in enumerate(ordered)}
    renamed = [
        {**s, "service": names[s["service"]], "labels": {"service": names[s["service"]]}}
        for s in series
    ]
    again, _ = _ranked(renamed, named=names[later[0]])
    assert names[ranked[0].service] == again[0].service
    # the same evidence in the same order: only candidates equal on all of it may swap
    assert [_evidence_of(s) for s in ranked] == [_evidence_of(s) for s in again]
    assert {names[s.service]: {names[f] for f in s.follows} for s in ranked} == {
        s.service: set(s.follows) for s in again
    }


def _evidence_of(entry: Suspect) -> tuple[object, ...]:
    return (round(entry.score, 6), entry.onset)


@pytest.mark.parametrize("names", [("aa-first", "zz-last"), ("zz-last", "aa-first")])
def test_two_services_that_began_together_are_a_tie_whatever_their_names(names):
    one, two = names
    series = [
        _symptom(one, "errors", change=at_minute(20), score=200, factor=10),
        _symptom(two, "errors", change=at_minute(20), score=200, factor=10),
    ]
    ranked, evidence = _ranked(series, named=one)
    assert not any(s.follows for s in ranked)
    assert {s.service for s in leaders_tied(ranked)} == {one, two}
    request = window_request([one, two], one)
    output = evidence_write(request, evidence, ranked, [])
    assert not [c for c in output.claims if c.claim_type == "root_cause"]
    assert any("根因未定" in line for line in output.missing_info)


def test_a_later_service_whose_own_resource_moved_first_is_no_effect_of_the_leader():
    # its CPU reached its limit before the leader's errors began: its own fault, maybe the
    # first one; beginning "after" the leader is not shown for every shift of its own
    series = [
        _symptom("svc-a", "errors", change=at_minute(20), score=400, factor=30),
        _symptom("svc-b", "latency", change=at_minute(27), score=20, factor=3),
        *_cpu_limited("svc-b", change=at_minute(18), score=20),
    ]
    ranked, _ = _ranked(series, named="svc-a")
    assert all(s.follows == [] for s in ranked)


def test_a_shift_dated_within_both_onsets_dating_is_no_effect_of_the_leader():
    # five-minute samples (each onset dated within 6 minutes either way): a shift dated
    # eight minutes later may have come first
    series = [
        summary_series(
            "svc-a",
            "http_server_latency_seconds",
            base=0.05,
            level=0.9,
            change=at_minute(20),
            score=90,
            samples_every=5,
            now=NOW,
        ),
        summary_series(
            "svc-b",
            "http_server_latency_seconds",
            base=0.05,
            level=0.2,
            change=at_minute(28),
            score=15,
            samples_every=5,
            now=NOW,
        ),
    ]
    ranked, _ = _ranked(series, named="svc-a")
    assert ranked[0].service == "svc-a"
    assert all(s.follows == [] for s in ranked)


def test_connections_in_use_rising_below_capacity_name_no_candidate():
    # Little's law: more connections in use at no limit is load, not the cause of the
    # errors that began later elsewhere
    series = [
        _pool("pool-holder", change=at_minute(17), score=40),
        _symptom("pool-holder", "latency", change=None, score=0, factor=1),
        _symptom("code-root", "errors", change=at_minute(20), score=30, factor=6),
    ]
    ranked, _ = _ranked(series, named="code-root")
    assert ranked[0].service == "code-root"
    assert "pool-holder" not in {s.service for s in ranked}


def test_the_answer_says_the_calls_were_unknown_and_never_reasons_along_them():
    root, later, series = _system(3)
    ranked, evidence = _ranked(series, named=later[0])
    request = window_request(sorted({s["service"] for s in series}), later[0])
    output = evidence_write(request, evidence, ranked, [])
    unknown = [line for line in output.missing_info if line.startswith("调用关系未知")]
    assert len(unknown) == 1 and root in unknown[0]
    assert all(name in unknown[0] for name in later[:4])
    texts = [c.claim_text for c in output.claims] + [h.hypothesis_text for h in output.hypotheses]
    assert not any("沿调用关系" in text for text in texts)
    for hypothesis in output.hypotheses:
        if hypothesis.entity in later:
            assert "连锁反应" in hypothesis.hypothesis_text
            assert hypothesis.root_cause_kind is None


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "kind"), [(5, "network"), (7, "code"), (2, "cpu")])
def test_a_generated_46_service_system_without_calls_puts_its_root_first(tmp_path, seed, kind):
    pack = fleet_pack_write(
        out=tmp_path / "bare",
        services=46,
        seed=seed,
        kind=kind,
        depth=1 + seed % 3,
        lag=1,
        topology=False,
    )
    assert not (pack.path / "topology.json").exists()
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.status == "completed", result.error
    assert result.root_cause_candidates[:1] == [pack.root]
    assert result.root_cause_kind == kind
