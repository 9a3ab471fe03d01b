"""A callee's failures against its callers': a root seen by its logs, failures counted in requests.

Properties over random call trees (random names, sizes and shares of traffic), and over
generated systems (scenarios/_generator/fleet.py) whose root exports no error series:

- a root whose failures show only in a new exception template (its error series not
  collected) explains its callers' failure shares when the template is logged far beyond
  what its baseline rate gives (the log tool's own test, in standard deviations): it leads,
  its callers inherit; a template of two lines explains nothing;
- a caller's failed requests counted per second are a part of its requests: a callee whose
  share of the caller's traffic is at least the failed requests' share can carry them all,
  however small a part of the caller's traffic it serves; one that serves fewer requests
  than the caller's added failures cannot.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.llm.base import ExecutorRequest
from diagnosis.offline.analysis import Suspect
from diagnosis.offline.gather import Evidence, suspects_localise
from diagnosis.offline.localise import topology_build
from tests.support.pack_transforms import services_rename

from .fakes import WINDOW, call_tree, logs_call, metrics_call, summary_series, template

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

NOW = WINDOW["end"]
ONSET = "2026-03-02T10:22:00Z"
EXCEPTION = "Unhandled exception in POST /api/v1/items/<NUM>: java.lang.NullPointerException"


def _ranked(
    series: list[dict[str, Any]],
    edges: list[tuple[str, str]],
    named: str,
    templates: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> list[Suspect]:
    services = sorted({s["service"] for s in series} | {s for e in edges for s in e})
    calls = [metrics_call(series)] + ([logs_call(list(templates))] if templates else [])
    evidence = Evidence(calls=calls)
    evidence.topology = topology_build(declared=edges, calls=calls)
    request = ExecutorRequest(
        question=f"{named} 在 2026-03-02 10:22 (UTC) 左右大量失败，请帮我定位根因服务。",
        language="zh-CN",
        now=NOW,
        window=WINDOW,
        plan={"services": [named]},
        services=services,
        attempt=1,
        call_edges=tuple(edges),
    )
    return suspects_localise(request, evidence, [named])


def _series(service: str, metric: str, base: float, level: float, **more: Any) -> dict[str, Any]:
    change = ONSET if level != base else None
    item = summary_series(
        service, metric, base=base, level=level, change=change,
        score=more.pop("score", 0 if change is None else 40), labels=more.pop("labels", {}),
        baseline_points=120, now=NOW,
    )  # fmt: skip
    item.update(more)
    return item


def _failure_share(service: str, share: float) -> dict[str, Any]:
    return _series(service, "http_server_error_ratio", 0.001, 0.001 + share)


def _exception(service: str, count: int) -> dict[str, Any]:
    return template(service, "ERROR", EXCEPTION, count, 0, "2026-03-02T10:21:40Z", [])


def _logged_root(seed: int, lines: int) -> tuple[list[Suspect], str, list[str]]:
    """A random tree whose root's failures show only in ``lines`` new exception lines, its
    callers' failure shares up 2-60 points; the ranking, the root and its callers."""
    rng = random.Random(seed)
    names, edges, root, callers = call_tree(rng)
    series = [_failure_share(n, rng.uniform(0.02, 0.6)) for n in callers]
    series += [_failure_share(n, 0.0) for n in names if n not in callers]
    return _ranked(series, edges, names[0], [_exception(root, lines)]), root, callers


@pytest.mark.parametrize("seed", range(8))
def test_a_root_seen_only_by_its_exceptions_explains_its_callers_failures(seed):
    ranked, root, callers = _logged_root(seed, random.Random(seed).randrange(60, 900))
    by_name = {s.service: s for s in ranked}
    assert ranked[0].service == root
    assert ranked[0].root_kind == "code"
    assert all(by_name[name].inherited_from for name in callers)


@pytest.mark.parametrize("seed", range(4))
def test_two_new_lines_explain_no_callers_failures(seed):
    ranked, root, callers = _logged_root(seed, 2)
    by_name = {s.service: s for s in ranked}
    assert not any(root in by_name[name].inherited_from for name in callers)


def _requests(service: str, base: float, level: float, status: str) -> dict[str, Any]:
    return _series(
        service, "http_requests_total", base, level, labels={"status": status}, rate=True
    )


def _chain_traffic(rng: random.Random, names: list[str], edges: list[tuple[str, str]]):
    """Requests per second each service serves: the entry's, and each callee a random share
    of its caller's (a tenth to under half)."""
    traffic = {names[0]: rng.uniform(200, 2000)}
    for caller, callee in edges:  # callers come first (call_tree's order)
        traffic[callee] = traffic[caller] * rng.uniform(0.1, 0.45)
    return traffic


@pytest.mark.parametrize("seed", range(8))
def test_a_callee_serving_a_small_share_carries_every_failed_request_it_could(seed):
    rng = random.Random(seed)
    names, edges, root, callers = call_tree(rng)
    traffic = _chain_traffic(rng, names, edges)
    failed = traffic[root] * rng.uniform(0.3, 1.0)  # the root's failed requests per second
    series = []
    for name in names:
        added = failed if name in callers or name == root else 0.0
        series.append(_requests(name, traffic[name], traffic[name] - added, "200"))
        series.append(_requests(name, 0.05, 0.05 + added, "500"))
    ranked = _ranked(series, edges, names[0])
    by_name = {s.service: s for s in ranked}
    assert ranked[0].service == root
    assert all(by_name[name].inherited_from for name in callers)


@pytest.mark.parametrize("seed", range(4))
def test_a_callee_cannot_carry_more_failed_requests_than_it_serves(seed):
    # the root's caller's added failures are three times all the requests the root serves:
    # most of them failed elsewhere, whatever the root's own failures
    rng = random.Random(seed)
    names, edges, root, callers = call_tree(rng)
    traffic = _chain_traffic(rng, names, edges)
    added = {root: traffic[root], callers[0]: 3.0 * traffic[root]}
    series = []
    for name in names:
        more = added.get(name, 0.0)
        series.append(_requests(name, traffic[name], max(traffic[name] - more, 1.0), "200"))
        series.append(_requests(name, 0.05, 0.05 + more, "500"))
    ranked = _ranked(series, edges, names[0])
    by_name = {s.service: s for s in ranked}
    assert root not in by_name[callers[0]].inherited_from


def _errors_unexported(pack: Path, root: str) -> None:
    """The root's error series not collected: its fault shows only in its logs."""
    path = pack / "metrics" / f"{root}.om"
    lines = path.read_text(encoding="utf-8").splitlines()
    errors = {line.split()[2] for line in lines if line.startswith("# TYPE") and "_ratio" in line}
    kept = [line for line in lines if not any(name in line for name in errors)]
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")


@pytest.mark.django_db
@pytest.mark.parametrize(("seed", "renamed"), [(1, False), (2, False), (3, True), (4, False)])
def test_a_generated_code_root_without_error_series_is_found_by_its_logs(tmp_path, seed, renamed):
    pack = fleet_pack_write(
        out=tmp_path / "pack", services=12, seed=seed, kind="code", depth=1 + seed % 3
    )
    _errors_unexported(pack.path, pack.root)
    if renamed:
        services_rename(pack=pack.path, rng=random.Random(seed))
    scenario = json.loads((pack.path / "scenario.yaml").read_text(encoding="utf-8"))
    root = scenario["expected"]["root_cause_service"]
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.root_cause_candidates[:1] == [root]
    assert result.root_cause_kind == "code"
