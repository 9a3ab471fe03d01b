"""A service's failing network path is a harmful shift of its own, dated like any other.

Definitional: every retransmit, drop or reset counts a failure of the service's network path
(``MetricSignal.harm_direction``), so a rise of such a series is a shift that hurts, as a
latency or an error count rising is, and a service's own mechanism, as a saturated resource
is (``localise._symptom_kind``): it dates when the service went wrong, and it explains the
latency and failures of the services that call it. Properties over random call trees.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from diagnosis.offline.gather import suspects_localise

from .fakes import (
    WINDOW_END,
    at_minute,
    call_tree,
    metrics_evidence,
    summary_series,
    window_request,
)

NOW = WINDOW_END
RETRANSMITS = (
    "tcp_retrans_segments_rate",
    "node_netstat_Tcp_RetransSegs",
    "container_network_transmit_packets_dropped_total",
)


def _system(seed: int) -> tuple[str, list[str], list[tuple[str, str]], list[dict[str, Any]]]:
    """A root whose network path fails at 10:18 and whose own latency shows it only at 10:30
    (coarsely sampled or slow to cross its noise); its callers slow from 10:21 on."""
    rng = random.Random(seed)
    _names, edges, root, callers = call_tree(rng)
    series = [
        summary_series(
            root, rng.choice(RETRANSMITS), base=1.0, level=rng.uniform(20, 60),
            change=at_minute(18), score=rng.uniform(60, 300), now=NOW,
        ),
        summary_series(
            root, "http_server_latency_seconds", base=0.05, level=0.05 * rng.uniform(4, 9),
            change=at_minute(30), score=rng.uniform(8, 20), now=NOW,
        ),
    ]  # fmt: skip
    for depth, caller in enumerate(callers):  # its direct caller first, the entry last
        series.append(
            summary_series(
                caller, "http_server_latency_seconds", base=0.08, level=0.08 * rng.uniform(3, 6),
                change=at_minute(21 + depth), score=rng.uniform(15, 40), now=NOW,
            )
        )  # fmt: skip
    return root, callers, edges, series


@pytest.mark.parametrize("seed", range(10))
def test_a_root_whose_network_path_failed_first_leads_its_callers(seed):
    root, callers, edges, series = _system(seed)
    services = sorted({s["service"] for s in series})
    ranked = suspects_localise(
        window_request(services, callers[-1], trouble="变慢"),
        metrics_evidence(series, edges),
        [callers[-1]],
    )
    assert ranked[0].service == root
    leading = {s.service: s for s in ranked}
    assert leading[root].fault_kind == "network"
    # its direct caller is its effect: its slowdown is explained along the call
    assert callers[0] in leading[root].explains


@pytest.mark.parametrize("seed", range(4))
def test_fewer_retransmits_are_no_fault(seed):
    root, callers, edges, series = _system(seed)
    for item in series:
        if item["service"] == root and item["metric"] in RETRANSMITS:
            item.update(direction="down", window_level=0.1, window_mean=0.1, window_min=0.1)
    services = sorted({s["service"] for s in series})
    ranked = suspects_localise(
        window_request(services, callers[-1], trouble="变慢"),
        metrics_evidence(series, edges),
        [callers[-1]],
    )
    root_entry = next(s for s in ranked if s.service == root)
    assert root_entry.fault_kind != "network"
    assert all(m.metric not in RETRANSMITS for m in root_entry.own_metrics)
