"""A latency histogram read as what its series measure.

A Prometheus/OpenTelemetry histogram is three counters: ``_bucket{le}`` (requests that
took at most ``le``), ``_count`` (every request) and ``_sum`` (their total duration). Their
rates are requests per second, requests per second and seconds of work per second: the
mean latency is ``_sum`` / ``_count``, and no bucket on its own is a latency. On any
generated system whose latency is a histogram, under every real naming scheme, a root
whose latency rises is found first with its kind, renamed services or not; a surge of
traffic at an unchanged latency is no latency symptom.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import PackResult, pack_evaluate
from diagnosis.evidence import vocab
from diagnosis.offline.analysis import metric_signals
from diagnosis.offline.localise import harmful
from tests.support.pack_transforms import services_rename

from .fakes import metrics_call

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import REAL_SCHEMES, fleet_pack_write

HISTOGRAM_FAMILIES = sorted(
    {f for specs in REAL_SCHEMES.values() for f, _l, _t, q in specs if q == "latency_hist"}
)
HISTOGRAM_NAMINGS = sorted(
    name
    for name, specs in REAL_SCHEMES.items()
    if any(quantity == "latency_hist" for *_rest, quantity in specs)
)


@pytest.mark.parametrize("family", [*HISTOGRAM_FAMILIES, "rpc_client_latency_milliseconds"])
def test_a_latency_histograms_count_and_buckets_are_traffic_and_its_sum_is_latency(family):
    assert vocab.metric_kind(f"{family}_count") == ("traffic", vocab.HISTOGRAM_COUNT)
    assert vocab.metric_kind(f"{family}_bucket", {"le": "0.1"}) == (
        "traffic",
        vocab.HISTOGRAM_BUCKET,
    )
    assert vocab.metric_kind(f"{family}_sum")[0] == "latency"


def test_a_histogram_of_something_else_keeps_its_own_reading():
    # the collector's pauses are memory evidence, a size histogram is no latency
    assert vocab.metric_kind("jvm_gc_pause_seconds_count") == ("resource", "memory")
    assert vocab.metric_kind("http_response_size_bytes_bucket")[0] != "traffic"


def _item(metric: str, base: float, level: float, anomaly: float, **labels: str) -> dict:
    direction = "up" if level > base else "down" if level < base else "flat"
    line = f"svc-a {metric} per-second rate: {direction}, level {level:g} vs {base:g}"
    return {
        "service": "svc-a",
        "metric": metric,
        "labels": {"service": "svc-a", **labels},
        "rate": True,
        "baseline_mean": base,
        "baseline_median": base,
        "window_mean": (base + level) / 2,
        "window_level": level,
        "window_max": level * 1.05,
        "window_min": base * 0.95,
        "ratio": level / base,
        "change_point": "2026-03-02T10:22:00Z",
        "sustained_points": 18,
        "direction": direction if anomaly >= 3 else "flat",
        "anomaly_score": anomaly,
        "line": line,
    }


def _signals(family: str, *, rps: tuple[float, float], latency: tuple[float, float]) -> dict:
    """The reading of one service's histogram whose request rate and mean latency move from
    their first value to their second (scores as a robust test of such shifts gives)."""
    (r0, r1), (l0, l1) = rps, latency
    count_score = 0.0 if r0 == r1 else 60.0
    sum_score = 0.0 if r0 * l0 == r1 * l1 else 80.0
    items = [
        _item(f"{family}_sum", r0 * l0, r1 * l1, sum_score),
        _item(f"{family}_count", r0, r1, count_score),
        _item(f"{family}_bucket", r0 * 0.9, r1 * 0.9, count_score, le="0.5"),
    ]
    call = metrics_call(items, arguments={"service": "svc-a"})
    return {s.metric.rsplit("_", 1)[1]: s for s in metric_signals(call)}


@pytest.mark.parametrize("family", HISTOGRAM_FAMILIES)
def test_a_histograms_sum_over_its_count_is_the_mean_latency_in_seconds(family):
    read = _signals(family, rps=(20.0, 20.0), latency=(0.05, 0.4))
    mean = read["sum"]
    assert mean.kind == "latency" and harmful(mean)
    assert mean.baseline_median == pytest.approx(0.05)
    assert mean.window_level == pytest.approx(0.4)
    assert mean.ratio == pytest.approx(8.0)
    assert read["count"].kind == read["bucket"].kind == "traffic"


@pytest.mark.parametrize("surge", [2.0, 5.0])
@pytest.mark.parametrize("family", HISTOGRAM_FAMILIES)
def test_a_surge_of_traffic_at_an_unchanged_latency_is_no_latency_symptom(family, surge):
    read = _signals(family, rps=(20.0, 20.0 * surge), latency=(0.1, 0.1))
    assert not harmful(read["sum"])
    assert not any(harmful(s) for s in read.values())


@pytest.mark.parametrize("family", HISTOGRAM_FAMILIES)
def test_a_latency_rise_under_a_traffic_surge_is_the_latency_share_of_the_sums_shift(family):
    read = _signals(family, rps=(20.0, 40.0), latency=(0.1, 0.4))
    mean = read["sum"]
    assert harmful(mean)
    assert mean.ratio == pytest.approx(4.0)
    assert mean.anomaly < 80.0  # the traffic's part of the _sum's shift is not latency


def test_the_buckets_rates_fall_in_a_slowdown_and_that_is_no_latency_of_their_own():
    read = _signals("http_server_request_duration_seconds", rps=(20.0, 20.0), latency=(0.05, 0.4))
    assert read["bucket"].kind == "traffic"
    assert not harmful(read["bucket"])


# --- generated systems -------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db
SERVICES = 30
SEED = 4  # a graph whose root has a caller and a callee at depth 2


def _evaluated(path: Path) -> PackResult:
    result = pack_evaluate(path=path, provider="offline")
    assert result.status == "completed", result.error
    return result


@pytestmark_db
@pytest.mark.parametrize("naming", HISTOGRAM_NAMINGS)
def test_a_root_whose_histogram_latency_rises_is_ranked_first_and_named_latency(tmp_path, naming):
    pack = fleet_pack_write(
        out=tmp_path / "p", services=SERVICES, seed=SEED, kind="latency", spill=True, naming=naming
    )
    renamed = tmp_path / "renamed"
    shutil.copytree(pack.path, renamed)
    services_rename(pack=renamed, rng=random.Random(SEED))
    for path in (pack.path, renamed):
        result = _evaluated(path)
        assert result.hit_at_1, (naming, result.root_cause_candidates[:3])
        assert result.root_cause_kind in {"latency", "network"}, (naming, result.root_cause_kind)


@pytestmark_db
@pytest.mark.parametrize("naming", HISTOGRAM_NAMINGS)
def test_a_cpu_root_beside_histogram_latency_is_ranked_first_and_named_cpu(tmp_path, naming):
    pack = fleet_pack_write(
        out=tmp_path / "p", services=SERVICES, seed=SEED, kind="cpu", spill=True, naming=naming
    )
    result = _evaluated(pack.path)
    assert result.hit_at_1, (naming, result.root_cause_candidates[:3])
    assert result.root_cause_kind == "cpu", (naming, result.root_cause_kind)
