"""The requests arriving are an input, and a histogram's tail is a latency.

Demand: how many requests reach a service is its callers' doing. A service whose request
rate rose or fell while its latency, errors and resources held scores nothing of its own
and dates no onset, so on any random system it never outranks a service with a real
latency or error shift, whatever the names, sizes and onsets.

Tails: a latency histogram exported without its ``_sum`` still says how slow requests are:
``1 - bucket(le) / count`` is the share slower than ``le``. A slowdown raises it, a surge
of traffic at the same latency leaves it where it was; on generated systems under every
real histogram scheme, with every ``_sum`` removed, a latency root is found first and
named ``latency``.
"""

from __future__ import annotations

import math
import random
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evaluation import pack_evaluate
from diagnosis.llm.base import ExecutorRequest
from diagnosis.offline.analysis import TAIL_QUANTILE, suspects_rank
from diagnosis.offline.gather import NO_BUCKETS_SELECTOR, Evidence, _retry_queries
from diagnosis.offline.localise import harmful
from tests.support.pack_transforms import services_rename

from .fakes import FakeTools, metrics_call, summary_series

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import REAL_SCHEMES, fleet_pack_write

NOW = "2026-03-02T10:40:00Z"
WORDS = ("pay", "cart", "auth", "geo", "feed", "bill", "ship", "tax", "mail", "rank")


def _at(minute: int) -> str:
    return f"2026-03-02T10:{minute:02d}:00Z"


def _names(rng: random.Random, count: int) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = f"{rng.choice(WORDS)}-svc-{rng.randrange(1000):03d}"
        if name not in names:
            names.append(name)
    return names


# --- demand ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_a_request_rate_that_moved_alone_never_outranks_a_latency_or_error_shift(seed):
    rng = random.Random(seed)
    surged, root = _names(rng, 2)
    factor = rng.choice([0.2, 0.4, 2.5, 6.0])  # a surge or a drop
    rate = summary_series(
        surged,
        rng.choice(["http_requests_per_second", "requests_total", "petshop_requests"]),
        base=100.0,
        level=100.0 * factor,
        change=_at(rng.randrange(10, 18)),  # often earlier than the root
        score=rng.uniform(20, 200),
        now=NOW,
    )
    kind = rng.choice(["latency", "errors"])
    metric = "http_server_latency_seconds" if kind == "latency" else "http_server_error_ratio"
    base = 0.05 if kind == "latency" else 0.002
    shift = summary_series(
        root,
        metric,
        base=base,
        level=base * rng.uniform(1.6, 8.0),
        change=_at(rng.randrange(18, 30)),
        score=rng.uniform(4, 40),
        now=NOW,
    )
    ranked = suspects_rank([metrics_call([rate, shift])], [surged, root])
    by_name = {s.service: s for s in ranked}
    assert ranked[0].service == root, [(s.service, s.score) for s in ranked]
    assert by_name[surged].score == 0.0
    assert by_name[surged].onset is None


# --- tails -------------------------------------------------------------------------------

BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
FAMILY = "http_server_request_duration_seconds"


def _rate(service: str, metric: str, base: float, level: float, **labels: str) -> dict:
    """A counter's rate as query_metrics summarises it, scored as a robust test would."""
    moved = abs(level - base) > 1e-9 * max(base, 1.0)
    row = summary_series(
        service,
        metric,
        base=base,
        level=level,
        change=_at(22) if moved else None,
        score=60.0 if moved else 0.0,
        labels=labels or None,
        now=NOW,
    )
    return {**row, "rate": True}


def _histogram(
    service: str, *, rps: tuple[float, float], latency: tuple[float, float], total: bool
) -> list[dict[str, Any]]:
    """A histogram of exponential durations (the generator's scheme): its buckets and count,
    and its ``_sum`` if ``total``."""
    (r0, r1), (l0, l1) = rps, latency
    rows = [_rate(service, f"{FAMILY}_count", r0, r1)]
    for le in BOUNDS:
        rows.append(
            _rate(
                service,
                f"{FAMILY}_bucket",
                r0 * (1 - math.exp(-le / l0)),
                r1 * (1 - math.exp(-le / l1)),
                le=f"{le:g}",
            )
        )
    if total:
        rows.append(_rate(service, f"{FAMILY}_sum", r0 * l0, r1 * l1))
    return rows


def _latency(service: str, rows: list[dict[str, Any]]) -> list[Any]:
    ranked = suspects_rank([metrics_call(rows, arguments={"service": service})], [service])
    return [m for s in ranked for m in s.metrics if m.kind == "latency"]


@pytest.mark.parametrize("latency", [(0.05, 0.2), (0.05, 0.4), (0.1, 1.5), (0.02, 0.05)])
@pytest.mark.parametrize("rps", [(20.0, 20.0), (20.0, 40.0)])
def test_without_a_sum_the_tail_share_is_read_as_the_histograms_latency(rps, latency):
    rows = _histogram("svc-a", rps=rps, latency=latency, total=False)
    read = _latency("svc-a", rows)
    assert len(read) == 1, read
    tail = read[0]
    assert harmful(tail) and tail.ratio is not None and tail.ratio > 1
    # the bucket read is the lowest at or above the baseline's p90
    le = float(tail.labels["le"])
    assert 1 - math.exp(-le / latency[0]) >= TAIL_QUANTILE
    lower = [b for b in BOUNDS if b < le]
    assert not lower or 1 - math.exp(-max(lower) / latency[0]) < TAIL_QUANTILE
    assert tail.baseline_median == pytest.approx(math.exp(-le / latency[0]), rel=1e-6)


@pytest.mark.parametrize("surge", [2.0, 5.0])
def test_without_a_sum_a_surge_of_traffic_at_the_same_latency_is_no_latency(surge):
    rows = _histogram("svc-a", rps=(20.0, 20.0 * surge), latency=(0.1, 0.1), total=False)
    read = _latency("svc-a", rows)
    assert read and not any(harmful(m) for m in read)


def test_the_tail_pairs_a_bucket_and_a_count_read_in_different_answers():
    # the fleet view lists the buckets that moved; the service's own answer has its count
    rows = _histogram("svc-a", rps=(20.0, 20.0), latency=(0.05, 0.4), total=False)
    buckets = [r for r in rows if r["metric"].endswith("_bucket") and r["change_point"]]
    count = [r for r in rows if r["metric"].endswith("_count")]
    calls = [metrics_call(buckets), metrics_call(count, arguments={"service": "svc-a"})]
    ranked = suspects_rank(calls, ["svc-a"])
    assert any(harmful(m) and m.kind == "latency" for m in ranked[0].metrics)


HISTOGRAM_NAMINGS = sorted(
    name
    for name, specs in REAL_SCHEMES.items()
    if any(quantity == "latency_hist" for *_rest, quantity in specs)
)
_SUM = re.compile(r"^\w+_sum\{")


def _sums_strip(pack: Path) -> None:
    for path in (pack / "metrics").iterdir():
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if not _SUM.match(line)]
        path.write_text("\n".join(kept) + "\n", encoding="utf-8")


@pytest.mark.django_db
@pytest.mark.parametrize("naming", HISTOGRAM_NAMINGS)
def test_a_latency_root_of_a_histogram_without_sums_is_ranked_first_and_named_latency(
    tmp_path, naming
):
    pack = fleet_pack_write(
        out=tmp_path / "p", services=30, seed=4, kind="latency", spill=True, naming=naming
    )
    _sums_strip(pack.path)
    renamed = tmp_path / "renamed"
    shutil.copytree(pack.path, renamed)
    services_rename(pack=renamed, rng=random.Random(4))
    for path in (pack.path, renamed):
        result = pack_evaluate(path=path, provider="offline")
        assert result.status == "completed", result.error
        assert result.hit_at_1, (naming, result.root_cause_candidates[:3])
        assert result.root_cause_kind in {"latency", "network"}, (naming, result.root_cause_kind)


def test_a_retry_asks_a_service_without_buckets_once_the_environment_showed_them():
    # the same rule as a service's first round (gather._buckets_seen): buckets would take
    # a capped answer's places from the service's other families
    tools = FakeTools()
    evidence = Evidence(buckets=True)
    request = ExecutorRequest(
        question="q",
        language="zh-CN",
        now=NOW,
        window={"start": _at(0), "end": NOW},
        plan={},
        services=["pay-svc-001"],
        attempt=2,
        retry_context={"missing_evidence": ["pay-svc-001 latency metrics"]},
    )
    _retry_queries(request, tools, evidence)
    asked = [args for name, args in tools.calls if name == "query_metrics"]
    assert asked and all(args.get("metric") == NO_BUCKETS_SELECTOR for args in asked), asked
