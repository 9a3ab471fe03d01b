"""Ranking properties that hold on any system: generated call graphs, renamed services, ties.

A root fault's callers show it at once or later; either way they inherit it and never
outrank it. Services' names carry no evidence: renaming every one gives the same
diagnosis, and two candidates the evidence cannot order are a tie the answer reports,
whichever name sorts first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.llm.base import ExecutorRequest
from diagnosis.offline.analysis import Suspect
from diagnosis.offline.executor import evidence_write
from diagnosis.offline.gather import Evidence, suspects_localise
from diagnosis.offline.hypotheses import hypothesis_build
from diagnosis.offline.localise import leaders_tied

from .fakes import metrics_evidence, summary_series

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

NOW = "2026-03-02T10:40:00Z"
ONSET = "2026-03-02T10:20:00Z"


def _series(
    service: str, *, base: float, level: float, change: str | None, score: float, every: int = 1
) -> dict[str, Any]:
    """A latency quantile as query_metrics summarises it; ``every`` grid points per sample."""
    return summary_series(
        service,
        "latency_seconds",
        base=base,
        level=level,
        change=change,
        score=score,
        labels={"quantile": "0.99"},
        samples_every=every,
        now=NOW,
    )


def _request(edges: list[tuple[str, str]], services: list[str]) -> ExecutorRequest:
    return ExecutorRequest(
        question="web 延迟在 2026-03-02 10:20 (UTC) 左右升高，请帮我定位根因服务。",
        language="zh-CN",
        now=NOW,
        window={"start": "2026-03-02T10:10:00Z", "end": NOW},
        plan={"services": ["web"]},
        services=services,
        attempt=1,
        call_edges=tuple(edges),
    )


def _evidence(series: list[dict[str, Any]], edges: list[tuple[str, str]], step: str) -> Evidence:
    evidence = metrics_evidence(series, edges, step)
    return evidence


def _localised(series: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Suspect]:
    services = sorted({s["service"] for s in series} | {s for e in edges for s in e})
    ranked = suspects_localise(_request(edges, services), _evidence(series, edges, "1m"), ["web"])
    return {s.service: s for s in ranked}


@pytest.mark.parametrize("every", [1, 5])
def test_a_callee_whose_shift_starts_a_full_resolution_after_its_callers_explains_nothing(every):
    # one-minute grid; samples every minute (resolution 60 s) or every 5 minutes (5 + 1)
    late = {1: "2026-03-02T10:21:00Z", 5: "2026-03-02T10:26:00Z"}[every]
    series = [
        _series("web", base=0.3, level=0.8, change=ONSET, score=30, every=every),
        _series("db", base=0.05, level=0.6, change=late, score=90, every=every),
    ]
    found = _localised(series, [("web", "db")])
    assert found["web"].inherited_from == []
    assert found["db"].explains == []


@pytest.mark.parametrize("every", [1, 5])
def test_a_callee_dated_within_the_resolution_of_its_caller_explains_it(every):
    within = {1: ONSET, 5: "2026-03-02T10:25:00Z"}[every]
    series = [
        _series("web", base=0.3, level=0.8, change=ONSET, score=30, every=every),
        _series("db", base=0.05, level=0.6, change=within, score=90, every=every),
    ]
    found = _localised(series, [("web", "db")])
    assert found["web"].inherited_from == ["db"]
    assert found["db"].explains == ["web"]


@pytest.mark.parametrize("unseen", [0.0, 300.0])
def test_a_callee_dated_late_only_by_the_samples_it_missed_still_began_with_its_caller(unseen):
    # five-minute samples: the callee's onset ten minutes after its caller's is a full
    # resolution (5 + 1 minutes) late, unless the five minutes before it had no samples:
    # then its change lies anywhere in that gap too, and it may have come first
    db = _series("db", base=0.05, level=0.6, change="2026-03-02T10:30:00Z", score=90, every=5)
    db["onset_unseen_s"] = unseen
    web = _series("web", base=0.3, level=0.8, change=ONSET, score=30, every=5)
    found = _localised([web, db], [("web", "db")])
    assert found["db"].explains == (["web"] if unseen else [])
    assert found["db"].mistimed is not bool(unseen)


def test_a_callee_that_changed_well_before_its_caller_still_explains_it():
    series = [
        _series("web", base=0.3, level=0.8, change=ONSET, score=30),
        _series("db", base=0.05, level=0.6, change="2026-03-02T10:12:00Z", score=20),
    ]
    found = _localised(series, [("web", "db")])
    assert found["web"].inherited_from == ["db"]


@pytest.mark.parametrize("names", [("aa-first", "zz-last"), ("zz-last", "aa-first")])
def test_two_candidates_no_evidence_orders_are_a_tie_the_answer_reports(names):
    one, two = names
    series = [
        _series("web", base=0.3, level=0.3, change=None, score=0),
        _series(one, base=0.05, level=0.6, change=ONSET, score=40),
        _series(two, base=0.05, level=0.6, change=ONSET, score=40),
    ]
    edges = [("web", one), ("web", two)]
    services = ["web", one, two]
    evidence = _evidence(series, edges, "1m")
    request = _request(edges, services)
    ranked = suspects_localise(request, evidence, ["web"])
    assert {s.service for s in leaders_tied(ranked)} == {one, two}
    output = evidence_write(request, evidence, ranked, [])
    assert not [c for c in output.claims if c.claim_type == "root_cause"]
    assert any("根因未定" in line and one in line and two in line for line in output.missing_info)


def test_a_stronger_candidate_is_no_tie():
    series = [
        _series("aa-weak", base=0.05, level=0.3, change=ONSET, score=8),
        _series("zz-strong", base=0.05, level=0.6, change=ONSET, score=40),
    ]
    edges = [("web", "aa-weak"), ("web", "zz-strong")]
    services = ["web", "aa-weak", "zz-strong"]
    ranked = suspects_localise(_request(edges, services), _evidence(series, edges, "1m"), ["web"])
    assert ranked[0].service == "zz-strong"
    assert leaders_tied(ranked) == []


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "kind", "depth"), [(3, "latency", 2), (5, "errors", 3)])
def test_callers_that_show_a_root_fault_later_never_outrank_it(tmp_path, seed, kind, depth):
    pack = fleet_pack_write(
        out=tmp_path / "fleet", services=30, seed=seed, kind=kind, depth=depth, lag=1
    )
    callers = {a for a, _ in pack.calls} & _ancestors(pack.calls, pack.root)
    assert callers, "the generated root has callers"
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.status == "completed", result.error
    ranked = result.root_cause_candidates
    assert pack.root in ranked
    assert not callers & set(ranked[: ranked.index(pack.root)])


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "kind"), [(6, "latency"), (9, "errors")])
def test_renaming_every_service_in_reverse_name_order_changes_nothing(tmp_path, seed, kind):
    pack = fleet_pack_write(out=tmp_path / "fleet", services=30, seed=seed, kind=kind, depth=2)
    # new names sort the other way round: a ranking that leaned on names would flip
    ordered = sorted(pack.services)
    names = {old: f"node-{len(ordered) - i:03d}" for i, old in enumerate(ordered)}
    renamed = tmp_path / "renamed"
    _rename(pack.path, renamed, names)
    before = pack_evaluate(path=pack.path, provider="offline")
    after = pack_evaluate(path=renamed, provider="offline")
    assert [names[s] for s in before.root_cause_candidates] == after.root_cause_candidates
    assert before.root_cause_kind == after.root_cause_kind


def _rename(source: Path, target: Path, names: dict[str, str]) -> None:
    longest_first = sorted(names, key=len, reverse=True)
    for path in source.rglob("*"):
        if path.is_dir():
            continue
        relative = str(path.relative_to(source))
        text = path.read_text(encoding="utf-8")
        for old in longest_first:
            relative = relative.replace(old, names[old])
            text = text.replace(old, names[old])
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(text, encoding="utf-8")


def _ancestors(calls: tuple[tuple[str, str], ...], start: str) -> set[str]:
    found: set[str] = set()
    frontier = [start]
    while frontier:
        current = frontier.pop()
        for caller, callee in calls:
            if callee == current and caller not in found:
                found.add(caller)
                frontier.append(caller)
    return found


@pytest.mark.parametrize("label", ["pod", "instance", "k8s_pod_name"])
def test_a_shift_on_one_of_three_instances_says_so_and_counts_as_one_measure(label):
    def pod(name: str, level: float, change: str | None) -> dict[str, Any]:
        item = _series("db", base=0.05, level=level, change=change, score=40 if change else 0)
        item["labels"] = {**item["labels"], label: name}
        item["line"] += f" {name}"
        return item

    one = [pod("db-a1", 0.6, ONSET), pod("db-b2", 0.05, None), pod("db-c3", 0.05, None)]
    three = [pod("db-a1", 0.6, ONSET), pod("db-b2", 0.6, ONSET), pod("db-c3", 0.6, ONSET)]
    found = {}
    for name, series in (("one", one), ("three", three)):
        ranked = suspects_localise(_request([], ["db"]), _evidence(series, [], "1m"), ["web"])
        found[name] = next(s for s in ranked if s.service == "db")
    zh, en = hypothesis_build(found["one"], "zh", None), hypothesis_build(found["one"], "en", None)
    assert "3 个实例中的 1 个（db-a1）" in zh.basis
    assert "on 1 of 3 instances only (db-a1)" in en.basis
    assert "实例" not in hypothesis_build(found["three"], "zh", None).basis
    assert found["one"].score == found["three"].score  # three pods, one piece of evidence
