"""The fault kind under real metric names and a fault's physical spill-over.

Real systems name their series by cAdvisor, node exporter, JVM/Micrometer, OpenTelemetry
and the Go and Python client defaults (``REAL_SCHEMES`` of scenarios/_generator/fleet.py),
and a fault moves more than its own family (``--spill``): a CPU hog queues requests and
holds more memory, a leak makes the collector burn CPU, a slow dependency holds requests
in flight. Each name is read for what it measures; on any random system under any scheme,
renamed services or not, the root keeps the kind of its fault.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pytest

from diagnosis.evaluation import PackResult, pack_evaluate
from diagnosis.evidence import vocab
from tests.support.pack_transforms import services_rename

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import REAL_SCHEMES, fleet_pack_write

# What each quantity of a real scheme is, as the vocabulary must read it.
_READS = {
    "cpu_seconds": ("resource", "cpu"),
    "idle_seconds": ("resource", "cpu"),
    "cpu_share": ("resource", "cpu"),
    "throttled": ("resource", "cpu"),
    "cpu_limit": ("resource", "cpu"),
    "memory": ("resource", "memory"),
    "memory_free": ("resource", "memory"),
    "memory_limit": ("resource", "memory"),
    "gc": ("resource", "memory"),
    "latency": ("latency", ""),
    "latency_hist": ("latency", ""),
    "errors": ("errors", ""),
}
_SPECS = sorted(
    {(family, tuple(labels.items()), quantity) for specs in REAL_SCHEMES.values()
     for family, labels, _type, quantity in specs if quantity in _READS}
)  # fmt: skip


@pytest.mark.parametrize(("family", "labels", "quantity"), _SPECS)
def test_every_real_series_name_is_read_as_what_it_measures(family, labels, quantity):
    # a latency histogram's _sum is its latency (its _count and _bucket are traffic:
    # test_offline_histograms.py)
    names = [family] if quantity != "latency_hist" else [f"{family}_sum"]
    for name in names:
        assert vocab.metric_kind(name, dict(labels)) == _READS[quantity], name
        assert vocab.is_limit_metric(name) == quantity.endswith("_limit") or "limits" in name
        free = vocab.is_free_metric(name, dict(labels))
        assert free == (quantity in {"idle_seconds", "memory_free"}), name


@pytest.mark.parametrize(
    ("name", "ratio"),
    [
        ("process_cpu_usage", True),  # Micrometer: a share in [0, 1] with no unit word
        ("system_cpu_usage", True),
        ("process_cpu_utilization_ratio", True),
        ("cpu_usage_percent", True),
        ("http_server_request_duration_seconds_bucket", False),  # du-ratio-n
        ("rpc_server_duration_seconds", False),
        ("container_cpu_usage_seconds_total", False),
    ],
)
def test_a_share_is_told_by_its_unit_word_not_by_a_fragment_of_another(name, ratio):
    assert vocab.is_ratio_metric(name) is ratio


def test_the_cpu_schedulers_throttling_is_cpu_and_a_filesystem_is_disk():
    assert vocab.metric_kind("container_cpu_cfs_throttled_periods_total") == ("resource", "cpu")
    assert vocab.metric_kind("container_fs_usage_bytes") == ("resource", "disk")
    assert vocab.metric_kind("fs_used_bytes") == ("resource", "disk")


pytestmark_db = pytest.mark.django_db
SERVICES = 30
NAMINGS = sorted(REAL_SCHEMES)


def _evaluated(path: Path) -> PackResult:
    result = pack_evaluate(path=path, provider="offline")
    assert result.status == "completed", result.error
    return result


@pytestmark_db
@pytest.mark.parametrize("naming", NAMINGS)
@pytest.mark.parametrize("kind", ["cpu", "memory"])
def test_a_spilling_resource_fault_keeps_its_kind_under_any_real_naming(tmp_path, naming, kind):
    seed = 3 + NAMINGS.index(naming)  # another graph, root, depth and heap for every scheme
    pack = fleet_pack_write(
        out=tmp_path / "p", services=SERVICES, seed=seed, kind=kind, spill=True, naming=naming
    )
    renamed = tmp_path / "renamed"
    shutil.copytree(pack.path, renamed)
    services_rename(pack=renamed, rng=random.Random(seed))
    for path in (pack.path, renamed):
        result = _evaluated(path)
        assert result.hit_at_1, (naming, kind, result.root_cause_candidates[:3])
        assert result.root_cause_kind == kind, (naming, result.root_cause_kind)


@pytestmark_db
@pytest.mark.parametrize("naming", ["cadvisor", "node"])
@pytest.mark.parametrize("kind", ["latency", "network"])
def test_a_small_heap_holding_requests_in_flight_is_no_memory_fault(tmp_path, naming, kind):
    """Seeds that are multiples of three give the root a heap at 3-8 % of its limit, so the
    requests a slowdown holds in flight move it by a third — far from its limit."""
    seed = 3 * (1 + NAMINGS.index(naming))
    pack = fleet_pack_write(
        out=tmp_path / "p", services=SERVICES, seed=seed, kind=kind, spill=True, naming=naming
    )
    result = _evaluated(pack.path)
    assert result.hit_at_1, result.root_cause_candidates[:3]
    assert result.root_cause_kind in {"latency", "network"}, result.root_cause_kind
