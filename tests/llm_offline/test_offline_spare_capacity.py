"""A resource use that rose but stayed short of its capacity is load, not a fault.

Physical and causal: a CPU queues requests, memory fails allocations and a disk fails writes
only near their capacity (``capacity.SATURATED``), and a rise that left the service's own
requests as fast and as good as before did nothing through them to anyone. A batch job that
takes more CPU and memory than usual, far from its limits, with its own requests unharmed,
is no candidate for a root cause, whenever it began and however significant its rise; at
its limit it is one, where its own requests slowed the rise counts, and where no capacity is
observed it counts as before (an unknown capacity proves nothing).
Properties over random systems, with and without a call graph, and on generated fleets
whose unrelated services change on their own (``fleet_pack_write(distractors=...)``).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.offline.analysis import Suspect
from diagnosis.offline.gather import suspects_localise

from .fakes import WINDOW_END, at_minute, metrics_evidence, summary_series, window_request

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

NOW = WINDOW_END
WORDS = ("pay", "cart", "auth", "geo", "feed", "bill", "ship", "tax", "mail", "rank")
ROLES = ("api", "svc", "db", "cache", "worker", "gateway")


def _series(service: str, metric: str, **kwargs: Any) -> dict[str, Any]:
    return summary_series(service, metric, now=NOW, **kwargs)


def _root(service: str, kind: str, minute: int) -> list[dict[str, Any]]:
    """A root whose requests slowed or failed at ``minute``."""
    if kind == "latency":
        return [
            _series(
                service, "http_server_latency_seconds", base=0.05, level=0.9,
                change=at_minute(minute), score=60,
            )
        ]  # fmt: skip
    return [
        _series(
            service, "http_server_error_ratio", base=0.002, level=0.2,
            change=at_minute(minute), score=60,
        )
    ]  # fmt: skip


def _batch(service: str, rng: random.Random, *, share: float, form: str) -> list[dict[str, Any]]:
    """A service whose CPU use rose to ``share`` of its capacity (and memory by a fifth, far
    from its limit) minutes before the root, its requests as fast and as good as ever.
    ``form``: the capacity as a limit series (cores), as a ratio (0..1) or not observed."""
    minute = rng.randint(14, 18)
    limit = float(rng.choice((1, 2, 4)))
    base = limit * rng.uniform(0.1, 0.3)
    score = rng.uniform(50, 400)  # as significant as the root's, or far more
    memory_limit = 2.0 * 1024**3
    series = [
        _series(
            service, "container_memory_working_set_bytes", base=0.4 * memory_limit,
            level=0.48 * memory_limit, change=at_minute(minute), score=score,
        ),
        _series(
            service, "container_spec_memory_limit_bytes", base=memory_limit,
            level=memory_limit, change=None, score=0,
        ),
        _series(
            service, "http_server_latency_seconds", base=0.08, level=0.08, change=None, score=0
        ),
    ]  # fmt: skip
    if form == "ratio":
        series.append(
            _series(
                service, "process_cpu_usage_ratio", base=base / limit, level=share,
                change=at_minute(minute), score=score,
            )
        )  # fmt: skip
        return series
    series.append(
        _series(
            service, "process_cpu_usage_cores", base=base, level=share * limit,
            change=at_minute(minute), score=score,
        )
    )  # fmt: skip
    if form == "limit":
        series.append(
            _series(
                service, "container_cpu_limit_cores", base=limit, level=limit,
                change=None, score=0,
            )
        )  # fmt: skip
    return series


def _ranked(series: list[dict[str, Any]], named: str) -> list[Suspect]:
    services = sorted({s["service"] for s in series})
    ranked = suspects_localise(window_request(services, named), metrics_evidence(series), [named])
    return [s for s in ranked if s.score > 0 or s.graph_score > 0]


def _system(seed: int, *, share: float, form: str) -> tuple[str, str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < 2:
        name = f"{rng.choice(WORDS)}-{rng.choice(ROLES)}-{rng.randrange(1000):03d}"
        if name not in names:
            names.append(name)
    root, batch = names
    series = _root(root, rng.choice(["latency", "errors"]), 20)
    series += _batch(batch, rng, share=share, form=form)
    rng.shuffle(series)
    return root, batch, series


@pytest.mark.parametrize("form", ["limit", "ratio"])
@pytest.mark.parametrize("seed", range(8))
def test_a_batch_job_short_of_its_capacity_is_no_candidate_whenever_it_began(seed, form):
    share = random.Random(seed).uniform(0.45, 0.75)
    root, batch, series = _system(seed, share=share, form=form)
    ranked = _ranked(series, named=root)
    assert ranked[0].service == root
    assert batch not in {s.service for s in ranked}


@pytest.mark.parametrize("seed", range(4))
def test_the_same_rise_to_its_capacity_is_a_candidate_with_a_cpu_fault(seed):
    root, batch, series = _system(seed, share=random.Random(seed).uniform(0.9, 1.0), form="limit")
    ranked = _ranked(series, named=root)
    found = {s.service: s for s in ranked}
    assert batch in found
    assert found[batch].root_kind == "cpu"


@pytest.mark.parametrize("seed", range(4))
def test_a_rise_short_of_capacity_counts_where_the_services_own_requests_slowed(seed):
    # the wait for a CPU grows smoothly with its use: with its own requests slower, the
    # rise may be their mechanism
    root, batch, series = _system(seed, share=0.6, form="limit")
    for item in series:
        if item["service"] == batch and item["metric"] == "http_server_latency_seconds":
            item.update(summary_series(
                batch, item["metric"], base=0.08, level=0.4, change=at_minute(17), score=80, now=NOW
            ))  # fmt: skip
    ranked = _ranked(series, named=root)
    found = {s.service: s for s in ranked}
    assert batch in found
    assert any(m.metric == "process_cpu_usage_cores" for m in found[batch].own_metrics)


@pytest.mark.parametrize("seed", range(4))
def test_a_rise_whose_capacity_is_not_observed_still_counts(seed):
    root, batch, series = _system(seed, share=0.6, form="none")
    ranked = _ranked(series, named=root)
    assert batch in {s.service for s in ranked}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("seed", "kind", "topology"),
    [(1, "errors", False), (14, "network", False), (18, "latency", False), (9, "latency", True)],
)
def test_a_generated_system_whose_unrelated_services_change_puts_its_root_first(
    tmp_path, seed, kind, topology
):
    # three services outside the fault's path: a batch job's CPU and memory rising a few
    # minutes before the onset, a service whose latency bursts all along, a redeploy
    pack = fleet_pack_write(
        out=tmp_path / "distracted",
        services=46 if not topology else 30,
        seed=seed,
        kind=kind,
        depth=1 + seed % 3,
        lag=seed % 2,
        topology=topology,
        distractors=3,
    )
    result = pack_evaluate(path=pack.path, provider="offline")
    assert result.status == "completed", result.error
    assert result.root_cause_candidates[:1] == [pack.root]
