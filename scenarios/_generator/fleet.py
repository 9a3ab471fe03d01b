#!/usr/bin/env python3
"""Synthetic fleets of any size with one injected fault on a random call graph.

    .venv/bin/python scenarios/_generator/fleet.py OUT_DIR --services 200 --seed 7 \
        [--kind latency|errors|cpu|memory|disk|network|resource_exhaustion|code|configuration] \
        [--depth 3]

writes one scenario pack to OUT_DIR (scenario.yaml, metrics/<service>.om, topology.json;
with --traces also traces/spans.jsonl.gz, OTLP/JSON; --no-topology leaves the call graph to
the spans).
Deterministic for a seed. The root cause is a service ``depth`` calls below the entry
service; every transitive caller of it inherits its latency (seconds add up along the
calls) or part of its errors, at the same moment; its own callees stay quiet. Unrelated
services carry noise and, now and then, one stray sample (a spike that is no incident).
Metric names follow one of several naming schemes, picked by the seed, so nothing that
reads these packs can depend on one scheme. The kinds past the first four (disk, network,
an exhausted connection pool, a code fault, a configuration change) also give every
service disk, network and pool series and a log file (routine lines; the root's fault
lines), so the root's families are no tell: every service has the same ones. Used by
tests and bench/fleet.py, generated into a temporary folder (a 1,000-service pack is
~64 MB), never committed.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from spans import TraceWriter  # beside this file (scripts and tests put its folder on the path)

STEP = 60
BASELINE_S = 2 * 3600
WINDOW_S = 30 * 60
ONSET_S = 12 * 60  # into the window
NOW = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
BASIC_KINDS = ("latency", "errors", "cpu", "memory")
EXTENDED_KINDS = ("disk", "network", "resource_exhaustion", "code", "configuration")
KINDS = BASIC_KINDS + EXTENDED_KINDS
# The extended families of each scheme: (disk used, disk size, network retransmits, pool in
# use, pool size).
EXTENDED_SCHEMES = (
    {
        "disk": "container_fs_usage_bytes",
        "disk_limit": "container_fs_limit_bytes",
        "network": "node_network_tcp_retransmits_per_second",
        "pool": "db_pool_active_connections",
        "pool_limit": "db_pool_max_connections",
    },
    {
        "disk": "disk_used_bytes",
        "disk_limit": "disk_total_bytes",
        "network": "net_retransmitted_segments_rate",
        "pool": "hikaricp_connections_active",
        "pool_limit": "hikaricp_connections_max",
    },
    {
        "disk": "volume_used_bytes",
        "disk_limit": "volume_capacity_bytes",
        "network": "tcp_retrans_segments_rate",
        "pool": "connection_pool_in_use",
        "pool_limit": "connection_pool_size",
    },
)
TRACES_PER_MINUTE = 8  # a sampled export: a few requests a minute of the entry's traffic
TRACE_VISIT = 0.75  # the chance a request calls each callee of a service it reaches

# (latency metric and its labels, error metric, cpu metric, cpu limit, memory, memory limit)
SCHEMES = (
    {
        "latency": ("http_server_request_duration_seconds", {"quantile": "0.99"}),
        "errors": "http_server_error_ratio",
        "cpu": "process_cpu_usage_cores",
        "cpu_limit": "container_cpu_limit_cores",
        "memory": "container_memory_working_set_bytes",
        "memory_limit": "container_spec_memory_limit_bytes",
    },
    {
        "latency": ("rpc_server_latency_seconds", {"percentile": "p95"}),
        "errors": "rpc_server_failure_ratio",
        "cpu": "cpu_usage_cores",
        "cpu_limit": "cpu_limit_cores",
        "memory": "jvm_memory_used_bytes",
        "memory_limit": "jvm_memory_max_bytes",
    },
    {
        "latency": ("service_response_time_seconds", {"stat": "p90"}),
        "errors": "service_errors_ratio",
        "cpu": "pod_cpu_cores",
        "cpu_limit": "pod_cpu_limit_cores",
        "memory": "pod_memory_rss_bytes",
        "memory_limit": "pod_memory_limit_bytes",
    },
)
WORDS = (
    "cart", "order", "pay", "ledger", "search", "price", "stock", "user", "auth", "mail",
    "ship", "quote", "promo", "review", "media", "geo", "feed", "rank", "bill", "tax",
)  # fmt: skip
SUFFIXES = ("api", "svc", "worker", "db", "cache", "gateway", "store", "engine")


@dataclass(frozen=True)
class FleetPack:
    path: Path
    services: tuple[str, ...]
    root: str
    kind: str
    depth: int
    entry: str
    calls: tuple[tuple[str, str], ...]


def _names(count: int, rng: random.Random) -> list[str]:
    names: list[str] = []
    for index in range(count):
        word = rng.choice(WORDS)
        suffix = rng.choice(SUFFIXES)
        names.append(f"{word}-{suffix}-{index:04d}")
    return names


def _graph(names: list[str], rng: random.Random) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A random layered call DAG from names[0] (the entry); a few extra edges per layer."""
    level = {names[0]: 0}
    edges: set[tuple[str, str]] = set()
    for index, name in enumerate(names[1:], start=1):
        caller = names[rng.randrange(0, index)]
        # bias towards shallow callers so the graph stays a few levels deep, as fleets are
        if rng.random() < 0.6:
            caller = names[rng.randrange(0, max(1, min(index, 1 + index // 8)))]
        edges.add((caller, name))
        level[name] = level[caller] + 1
    for _ in range(len(names) // 5):
        a, b = rng.sample(names, 2)
        if level[a] < level[b]:
            edges.add((a, b))
    return level, sorted(edges)


def _ancestors(edges: list[tuple[str, str]], start: str) -> set[str]:
    callers: dict[str, list[str]] = {}
    for a, b in edges:
        callers.setdefault(b, []).append(a)
    seen: set[str] = set()
    stack = [start]
    while stack:
        for caller in callers.get(stack.pop(), []):
            if caller not in seen:
                seen.add(caller)
                stack.append(caller)
    return seen


def _traces_write(
    out: Path,
    *,
    seed: int,
    names: list[str],
    edges: list[tuple[str, str]],
    root: str,
    kind: str,
    onset: int,
    start: int,
    end: int,
    added_latency: float,
    error_rate: float,
) -> None:
    """traces/spans.jsonl.gz: TRACES_PER_MINUTE requests from the entry down the call graph;
    the root spends ``added_latency`` more itself (latency, cpu) or fails (errors, memory)."""
    calls: dict[str, list[str]] = {}
    for a, b in edges:
        calls.setdefault(a, []).append(b)
    own_base = {n: random.Random(f"{seed}-{n}-own").uniform(0.003, 0.04) for n in names}

    # the same fault as the metrics: slower by its own doing, or failing (ramping up for
    # memory and disk, as the metrics fill)
    slower = {"latency", "cpu", "network", "resource_exhaustion"}
    failing = {"errors", "resource_exhaustion", "code", "configuration"}

    def own(service: str, t: float) -> float:
        if service == root and t >= onset and kind in slower:
            return own_base[service] + added_latency
        return own_base[service]

    def error(service: str, t: float) -> float:
        if service != root or t < onset:
            return 0.001
        if kind in failing:
            return error_rate
        ramp = error_rate * min((t - onset) / 600, 1.0)
        return ramp if kind in {"memory", "disk"} else 0.001

    writer = TraceWriter(
        f"fleet-{seed}-traces", calls=calls, own=own, error=error, visit=TRACE_VISIT,
        client_spans=False,
    )  # fmt: skip
    every = 60 / TRACES_PER_MINUTE
    t = float(start)
    while t < end:
        writer.request(names[0], t + writer.rng.uniform(0, every))
        t += every
    writer.write(out / "traces")


def _hops(edges: list[tuple[str, str]], start: str) -> dict[str, int]:
    """Each transitive caller of ``start`` with its fewest calls down to it."""
    callers: dict[str, list[str]] = {}
    for a, b in edges:
        callers.setdefault(b, []).append(a)
    found = {start: 0}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for name in frontier:
            for caller in sorted(callers.get(name, [])):
                if caller not in found:
                    found[caller] = found[name] + 1
                    following.append(caller)
        frontier = following
    return found


def fleet_pack_write(
    *,
    out: Path,
    services: int,
    seed: int,
    kind: str | None = None,
    depth: int | None = None,
    traces: bool = False,
    topology: bool = True,
    lag: int = 0,
    unobserved_root: bool = False,
    caller_logs: bool = False,
    client_latency: bool = False,
    network_counters: bool = True,
    spill: bool = False,
    naming: str = "",
    distractors: int = 0,
) -> FleetPack:
    """``lag``: samples each call hop adds before a caller shows its callee's fault (0: at
    once, as latency added to the same requests shows; queues and retries take longer).
    ``unobserved_root``: the root writes no metrics or logs (a service of the environment
    nobody instruments); the pack expects an abstention (``expected.abstain``) naming it.
    ``caller_logs``: every caller the fault reaches logs its failing calls, naming the callee
    ("upstream X timed out", "Call to X failed": logs/calls.jsonl), as clients do.
    ``client_latency``: every caller also reports its client-side latency to each callee, a
    series of its own labelled with the callee (``CLIENT_SCHEMES``): the callee's server-side
    latency plus the way there and back. A ``network`` root's way to its first callee slows
    (its client wait on it rises, that callee's own side stays flat).
    ``network_counters``: False writes no network series for any service and no network
    log lines, so a ``network`` root's delay shows only in its latency (as on a system
    that exports no retransmits or round-trip times).
    ``spill``: the root's fault also moves its other families as faults physically do
    (``_spill``): a CPU hog queues requests and holds a little more memory, a leak makes
    the collector burn CPU and slows requests later (or the container is OOM-killed and
    restarts), a code fault does less work... ``naming``: one of ``REAL_SCHEMES`` (cAdvisor,
    node exporter, JVM/Micrometer, OpenTelemetry, Go and Python client defaults: counters of
    CPU seconds, free memory, latency histograms) instead of the seed's ``SCHEMES``.
    ``distractors``: as many services outside the fault's path change on their own, as
    services of a real fleet do during any incident (``DISTRACTIONS``, in turn): a batch
    job's CPU and memory step up a few minutes before or after the onset, a service's
    latency bursts at random all along, a service is redeployed minutes before the onset.
    None of them reaches the symptom, so none may lead the ranking."""
    rng = random.Random(seed)
    names = _names(max(services, 3), rng)
    level, edges = _graph(names, rng)
    kind = kind or BASIC_KINDS[seed % len(BASIC_KINDS)]
    deepest = max(level.values())
    wanted = depth if depth is not None else rng.randint(1, max(1, min(deepest, 4)))
    at_depth = [n for n in names if level[n] == min(wanted, deepest)]
    with_callees = [n for n in at_depth if any(a == n for a, _ in edges)]
    root = rng.choice(with_callees or at_depth)
    scheme = SCHEMES[seed % len(SCHEMES)]
    affected = _ancestors(edges, root)
    hops = _hops(edges, root)
    end = int(NOW.timestamp())
    start = end - WINDOW_S - BASELINE_S
    onset = end - WINDOW_S + ONSET_S
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    latency_name, latency_labels = scheme["latency"]
    client_name, client_label = CLIENT_SCHEMES[seed % len(CLIENT_SCHEMES)]
    gap_callee = min((b for a, b in edges if a == root), default="")
    added_latency = rng.choice((0.4, 0.8, 1.5))
    error_rate = rng.choice((0.05, 0.2, 0.5))
    distracted = _distractors_pick(names, root, affected, distractors, seed)
    for name in names:
        srng = random.Random(f"{seed}-{name}")
        base_latency = srng.uniform(0.02, 0.3)
        base_errors = srng.uniform(0.0005, 0.004)
        cpu_limit = float(srng.choice((1, 2, 4)))
        base_cpu = cpu_limit * srng.uniform(0.15, 0.4)
        memory_limit = float(srng.choice((1, 2, 4)) * 1024**3)
        base_memory = memory_limit * srng.uniform(0.3, 0.5)
        spilled: dict[str, float] = {"restarts": 0.0, "gc": 0.0, "oom": float(seed % 2)}
        if spill and name == root and seed % 3 == 0:
            # a small heap in a large limit: its in-flight share moves it by a large
            # *relative* amount while it stays far from the limit
            base_memory = memory_limit * srng.uniform(0.03, 0.08)
        stray = srng.random() < 0.05  # one spike sample in an unrelated service
        stray_at = srng.randrange(end - WINDOW_S, end, STEP)
        keys = ("lat", "err", "cpu", "cpul", "mem", "meml", "cli")
        lines: dict[str, list[str]] = {k: [] for k in keys}
        for t in range(start, end, STEP):
            on = t >= onset + lag * STEP * hops.get(name, 0)
            latency = base_latency * srng.uniform(0.93, 1.07)
            errors = base_errors * srng.uniform(0.7, 1.3)
            cpu = base_cpu * srng.uniform(0.9, 1.1)
            memory = base_memory * srng.uniform(0.98, 1.02)
            if on and name == root:
                if kind == "latency":
                    latency += added_latency
                elif kind == "errors":
                    errors = error_rate
                elif kind == "cpu":
                    cpu = cpu_limit * srng.uniform(0.98, 1.0)
                    latency += added_latency
                elif kind == "memory":
                    progress = min((t - onset) / 600, 1.0)
                    memory = base_memory + (memory_limit - base_memory) * progress
                    errors = error_rate * progress
                elif kind == "network":
                    latency += added_latency
                elif kind in {"resource_exhaustion", "code", "configuration"}:
                    errors = error_rate
                    if kind == "resource_exhaustion":
                        latency += added_latency
                elif kind == "disk":
                    errors = error_rate * min((t - onset) / 600, 1.0)
            elif on and name in affected:
                if kind in {"latency", "cpu", "network"}:
                    latency += added_latency * srng.uniform(0.95, 1.05)
                else:
                    progress = 1.0 if kind == "errors" else min((t - onset) / 600, 1.0)
                    errors = base_errors + error_rate * 0.6 * progress
            if spill and on and name == root:
                latency, errors, cpu, memory = _spill(
                    kind, t - onset, (latency, errors, cpu, memory),
                    base=(base_cpu, base_memory, memory_limit),
                    added=added_latency, state=spilled,
                )  # fmt: skip
            if stray and t == stray_at:
                latency *= 4
            if name in distracted:
                latency, cpu, memory = _distract(
                    distracted[name], t - onset, (latency, cpu, memory), cpu_limit, srng
                )
            if kind in EXTENDED_KINDS:
                _extended_sample(
                    lines,
                    EXTENDED_SCHEMES[seed % 3],
                    name,
                    t,
                    srng,
                    root=on and name == root,
                    kind=kind,
                )
            labels = ",".join(
                [f'service="{name}"', *(f'{k}="{v}"' for k, v in latency_labels.items())]
            )
            if not naming:
                lines["lat"].append(f"{latency_name}{{{labels}}} {latency:.6g} {t}")
            if client_latency:
                for callee in sorted(b for a, b in edges if a == name):
                    wait = _client_wait(seed, callee, srng)
                    if kind in SLOWER_KINDS and (callee == root or callee in affected):
                        wait += added_latency if t >= onset + lag * STEP * hops.get(callee, 0) else 0.0
                    if kind == "network" and on and name == root and callee == gap_callee:
                        wait += added_latency
                    peer = f'service="{name}",{client_label}="{callee}"'
                    lines["cli"].append(f"{client_name}{{{peer}}} {wait:.6g} {t}")
            if naming:
                _real_sample(
                    lines, REAL_SCHEMES[naming], name, t,
                    values=(latency, errors, cpu, memory, cpu_limit, memory_limit),
                    state=spilled, kind=kind, root=on and name == root,
                )  # fmt: skip
                continue
            lines["err"].append(f'{scheme["errors"]}{{service="{name}"}} {errors:.6g} {t}')
            lines["cpu"].append(f'{scheme["cpu"]}{{service="{name}"}} {cpu:.6g} {t}')
            lines["cpul"].append(f'{scheme["cpu_limit"]}{{service="{name}"}} {cpu_limit:g} {t}')
            lines["mem"].append(f'{scheme["memory"]}{{service="{name}"}} {memory:.0f} {t}')
            lines["meml"].append(
                f'{scheme["memory_limit"]}{{service="{name}"}} {memory_limit:.0f} {t}'
            )
        families = [
            ("lat", latency_name),
            ("err", scheme["errors"]),
            ("cpu", scheme["cpu"]),
            ("cpul", scheme["cpu_limit"]),
            ("mem", scheme["memory"]),
            ("meml", scheme["memory_limit"]),
        ]
        if naming:
            families = [f for f in _real_families(REAL_SCHEMES[naming]) if lines.get(f[0])]
        if lines["cli"]:
            families.append(("cli", client_name))
        if kind in EXTENDED_KINDS:
            families += [
                (key, EXTENDED_SCHEMES[seed % 3][key])
                for key in _EXTENDED_KEYS
                if network_counters or key != "network"
            ]
        text = []
        for key, family in families:
            text.append(f"# TYPE {family} {_TYPES.get(key, 'gauge')}")
            text.extend(lines[key])
        text.append("# EOF")
        if not (unobserved_root and name == root):
            (out / "metrics" / f"{name}.om").write_text("\n".join(text) + "\n", encoding="utf-8")
    _deploys_write(out, [n for n, (how, _) in distracted.items() if how == "deploy"], onset)
    if kind in EXTENDED_KINDS and not unobserved_root:
        faults = network_counters or kind != "network"
        _logs_write(
            out, names, root=root, kind=kind, seed=seed, span=(start, onset, end), faults=faults
        )
    entry = names[0]
    symptom = "延迟升高" if kind in {"latency", "cpu", "network"} else "错误率升高"
    onset_text = datetime.fromtimestamp(onset, UTC).strftime("%H:%M")
    expected_kind = {k: k for k in KINDS}
    scenario = {
        "id": f"fleet-{len(names)}-{seed}",
        "title": f"{entry} {symptom}",
        "question": f"{entry} 从 {onset_text} 开始{symptom}，帮我定位根因服务",
        "now": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "window": {
            "start": datetime.fromtimestamp(end - WINDOW_S, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "language": "zh-CN",
        "services": names,
        "expected": {"root_cause_service": root, "root_cause_kind": expected_kind[kind]},
    }
    if unobserved_root:
        scenario["expected"] = {"root_cause_service": root, "abstain": True}
    (out / "scenario.yaml").write_text(json.dumps(scenario, ensure_ascii=False), encoding="utf-8")
    if topology:
        calls = [{"caller": a, "callee": b} for a, b in edges]
        (out / "topology.json").write_text(
            json.dumps({"calls": calls}, indent=0) + "\n", encoding="utf-8"
        )
    if caller_logs:
        _caller_logs_write(out, edges, affected, root=root, kind=kind, span=(onset, end))
    if traces:
        _traces_write(
            out, seed=seed, names=names, edges=edges, root=root, kind=kind, onset=onset,
            start=start, end=end, added_latency=added_latency, error_rate=error_rate,
        )  # fmt: skip
    return FleetPack(
        path=out,
        services=tuple(names),
        root=root,
        kind=kind,
        depth=level[root],
        entry=entry,
        calls=tuple(edges),
    )



# Real naming schemes: (family, labels, type, quantity) per series of every service. The
# quantities: ``cpu_seconds`` (a counter of CPU seconds: its rate is cores in use),
# ``idle_seconds`` (node exporter's idle mode: the cores not in use), ``cpu_share`` (use
# over the CPUs available, 0..1), ``throttled`` (CFS periods throttled, a counter),
# ``memory``/``memory_free`` (bytes in use / still available), ``*_limit``, ``latency``
# (a quantile, seconds), ``latency_hist`` (an OpenTelemetry/Prometheus histogram),
# ``errors`` (a share), ``gc`` (collector pause seconds: _sum and _count), ``restarts``,
# ``goroutines`` (in flight: rate × latency, Little's law), ``net_errors`` (a counter).
_KUBE_LIMITS = "kube_pod_container_resource_limits"
_HIST = ("http_server_request_duration_seconds", {}, "histogram", "latency_hist")
_ERR = ("http_server_request_error_ratio", {}, "gauge", "errors")
REAL_SCHEMES: dict[str, tuple[tuple[str, dict[str, str], str, str], ...]] = {
    "cadvisor": (
        _HIST, _ERR,
        ("container_cpu_usage_seconds_total", {}, "counter", "cpu_seconds"),
        ("container_cpu_cfs_throttled_periods_total", {}, "counter", "throttled"),
        (_KUBE_LIMITS, {"resource": "cpu", "unit": "core"}, "gauge", "cpu_limit"),
        ("container_memory_working_set_bytes", {}, "gauge", "memory"),
        (_KUBE_LIMITS, {"resource": "memory", "unit": "byte"}, "gauge", "memory_limit"),
        ("kube_pod_container_status_restarts_total", {}, "counter", "restarts"),
    ),
    "node": (
        ("http_request_duration_seconds", {"quantile": "0.99"}, "summary", "latency"), _ERR,
        ("node_cpu_seconds_total", {"mode": "user"}, "counter", "cpu_seconds"),
        ("node_cpu_seconds_total", {"mode": "idle"}, "counter", "idle_seconds"),
        ("node_memory_MemAvailable_bytes", {}, "gauge", "memory_free"),
        ("node_memory_MemTotal_bytes", {}, "gauge", "memory_limit"),
    ),
    "jvm": (
        ("http_server_requests_seconds", {}, "histogram", "latency_hist"), _ERR,
        ("process_cpu_usage", {}, "gauge", "cpu_share"),
        ("jvm_memory_used_bytes", {"area": "heap"}, "gauge", "memory"),
        ("jvm_memory_max_bytes", {"area": "heap"}, "gauge", "memory_limit"),
        ("jvm_gc_pause_seconds", {}, "summary", "gc"),
    ),
    "otel": (
        _HIST, _ERR,
        ("process_cpu_utilization_ratio", {}, "gauge", "cpu_share"),
        ("process_memory_usage_bytes", {}, "gauge", "memory"),
        ("k8s_container_memory_limit_bytes", {}, "gauge", "memory_limit"),
        ("system_network_errors_total", {}, "counter", "net_errors"),
    ),
    "go": (
        _HIST, _ERR,
        ("process_cpu_seconds_total", {}, "counter", "cpu_seconds"),
        (_KUBE_LIMITS, {"resource": "cpu", "unit": "core"}, "gauge", "cpu_limit"),
        ("go_memstats_heap_inuse_bytes", {}, "gauge", "memory"),
        (_KUBE_LIMITS, {"resource": "memory", "unit": "byte"}, "gauge", "memory_limit"),
        ("go_goroutines", {}, "gauge", "goroutines"),
    ),
    "python": (
        ("http_request_duration_seconds", {}, "histogram", "latency_hist"), _ERR,
        ("process_cpu_seconds_total", {}, "counter", "cpu_seconds"),
        (_KUBE_LIMITS, {"resource": "cpu", "unit": "core"}, "gauge", "cpu_limit"),
        ("process_resident_memory_bytes", {}, "gauge", "memory"),
        (_KUBE_LIMITS, {"resource": "memory", "unit": "byte"}, "gauge", "memory_limit"),
    ),
}  # fmt: skip
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf)
_TYPES: dict[str, str] = {}
for _specs in REAL_SCHEMES.values():
    for _family, _labels, _type, _quantity in _specs:
        _TYPES[f"real:{_family}"] = _type


_Spec = tuple[str, dict[str, str], str, str]


def _real_families(specs: tuple[_Spec, ...]) -> list[tuple[str, str]]:
    """(lines key, family name for ``# TYPE``) of a real scheme, each family once."""
    seen: dict[str, str] = {}
    for family, _labels, kind, _quantity in specs:
        stem = family
        if kind == "counter" and family.endswith("_total"):
            stem = family[: -len("_total")]
        seen.setdefault(f"real:{family}", stem)
    return list(seen.items())


def _real_sample(
    lines: dict[str, list[str]],
    specs: tuple[tuple[str, dict[str, str], str, str], ...],
    name: str,
    t: int,
    *,
    values: tuple[float, float, float, float, float, float],
    state: dict[str, float],
    kind: str,
    root: bool,
) -> None:
    """One sample of every series of a real scheme; counters accumulate in ``state``."""
    latency, errors, cpu, memory, cpu_limit, memory_limit = values
    rps = 20.0
    now = {
        "cpu_seconds": cpu * STEP, "idle_seconds": max(cpu_limit - cpu, 0.0) * STEP,
        "throttled": 10.0 * STEP * max(cpu / cpu_limit - 0.95, 0.0) * 20,
        "net_errors": STEP * (30.0 if root and kind == "network" else 0.05),
        "restarts": 0.0,
    }  # fmt: skip
    gauges = {
        "cpu_share": cpu / cpu_limit, "cpu_limit": cpu_limit, "memory": memory,
        "memory_free": memory_limit - memory, "memory_limit": memory_limit,
        "latency": latency, "errors": errors, "goroutines": 8 + rps * latency,
    }  # fmt: skip
    for family, labels, _type, quantity in specs:
        key = f"real:{family}"
        series = ",".join([f'service="{name}"', *(f'{k}="{v}"' for k, v in labels.items())])
        out = lines.setdefault(key, [])
        if quantity in gauges:
            out.append(f"{family}{{{series}}} {gauges[quantity]:.6g} {t}")
        elif quantity == "restarts":
            out.append(f"{family}{{{series}}} {state['restarts']:g} {t}")
        elif quantity in now:
            total = state[quantity] = state.get(quantity, 0.0) + now[quantity]
            out.append(f"{family}{{{series}}} {total:.6g} {t}")
        elif quantity == "gc":
            count = state["gc_count"] = state.get("gc_count", 0.0) + STEP * (0.2 + state["gc"])
            pause = state["gc_sum"] = state.get("gc_sum", 0.0) + STEP * (0.001 + state["gc"] / 4)
            out.append(f"{family}_sum{{{series}}} {pause:.6g} {t}")
            out.append(f"{family}_count{{{series}}} {count:.6g} {t}")
        elif quantity == "latency_hist":
            _histogram_sample(out, family, series, t, latency, rps, state)


def _histogram_sample(
    out: list[str], family: str, series: str, t: int, latency: float, rps: float, state: dict
) -> None:
    """Cumulative buckets of requests whose durations are exponential with mean ``latency``."""
    served = rps * STEP
    for le in _BUCKETS:
        share = 1.0 if math.isinf(le) else 1.0 - math.exp(-le / max(latency, 1e-9))
        key = f"bucket-{le}"
        total = state[key] = state.get(key, 0.0) + served * share
        bound = "+Inf" if math.isinf(le) else f"{le:g}"
        out.append(f'{family}_bucket{{{series},le="{bound}"}} {total:.6g} {t}')
    state["h_sum"] = state.get("h_sum", 0.0) + served * latency
    state["h_count"] = state.get("h_count", 0.0) + served
    out.append(f"{family}_sum{{{series}}} {state['h_sum']:.6g} {t}")
    out.append(f"{family}_count{{{series}}} {state['h_count']:.6g} {t}")


def _spill(
    kind: str,
    since: int,
    values: tuple[float, float, float, float],
    *,
    base: tuple[float, float, float],
    added: float,
    state: dict[str, float],
) -> tuple[float, float, float, float]:
    """The root's other families, moved as its fault physically moves them (``since``:
    seconds after the onset). Each spill is smaller, in its own family's terms, than the
    fault's own change: a CPU hog at its limit queues requests (the added latency, as now)
    and holds the queued requests' memory (a few percent, or +30-50 % of a small heap); a
    leak makes the collector run (CPU up by half its baseline once the heap is half full,
    pauses rising) and requests slow later; at its limit an OOM-killed container drops to
    its baseline and restarts (``state['oom']``); an exhausted pool leaves threads waiting
    (CPU a little down); a network delay holds requests in flight longer (memory up a few
    percent); a code fault or a configuration change fails requests early (less CPU, memory
    shifted); a disk fault's retried writes add latency; a slow dependency holds in-flight
    memory, and failing requests are cheaper."""
    latency, errors, cpu, memory = values
    base_cpu, base_memory, memory_limit = base
    small_heap = base_memory < 0.1 * memory_limit
    progress = min(since / 600, 1.0)
    if kind == "cpu":
        memory *= 1.4 if small_heap else 1.06
    elif kind == "memory":
        full = 0.5 <= progress
        state["gc"] = 0.3 * max(progress - 0.5, 0.0)
        cpu += base_cpu * (0.5 if full else 0.0)
        latency += added * 0.5 * max(progress - 0.7, 0.0) / 0.3
        if state["oom"] and since >= 600:
            cycle = (since - 600) % 600
            if cycle == 0:
                state["restarts"] += 1
            memory = base_memory + (memory_limit - base_memory) * cycle / 600
    elif kind == "resource_exhaustion":
        cpu *= 0.85
    elif kind in {"network", "latency"}:
        memory *= 1.35 if small_heap else 1.04
    elif kind in {"code", "configuration", "errors"}:
        cpu *= 0.7 if kind == "code" else 0.85
        memory *= 0.92
    elif kind == "disk":
        latency += added * 0.3 * progress
    return latency, errors, cpu, memory

# A caller's client-side latency to a callee, in the namings clients use: OpenTelemetry's
# http.client.request.duration with server.address, rpc.client.duration with peer.service
# (as Prometheus spells them), a proxy's upstream timer.
CLIENT_SCHEMES = (
    ("http_client_request_duration_seconds", "server_address"),
    ("rpc_client_duration_seconds", "peer_service"),
    ("proxy_upstream_response_seconds", "upstream"),
)
SLOWER_KINDS = {"latency", "cpu", "network", "resource_exhaustion"}


def _client_wait(seed: int, callee: str, rng: random.Random) -> float:
    """The callee's usual server-side latency plus a round trip, with the caller's noise."""
    base = random.Random(f"{seed}-{callee}").uniform(0.02, 0.3)
    return (base + 0.002) * rng.uniform(0.93, 1.07)


_EXTENDED_KEYS = ("disk", "disk_limit", "network", "pool", "pool_limit")


def _extended_sample(
    lines: dict[str, list[str]],
    metric_names: dict[str, str],
    name: str,
    t: int,
    srng: random.Random,
    *,
    root: bool,
    kind: str,
) -> None:
    """One sample of the disk, network and pool families of a service (the root's fault
    moves its own family; every other value is routine noise around a per-service level)."""
    levels = _service_levels(name)
    disk = levels["disk"] * srng.uniform(0.995, 1.005)
    retransmits = levels["retransmits"] * srng.uniform(0.7, 1.3)
    pool = levels["pool"] * srng.uniform(0.8, 1.2)
    if root and kind == "disk":
        disk = levels["disk_limit"] * srng.uniform(0.99, 1.0)
    elif root and kind == "network":
        retransmits = levels["retransmits"] * srng.uniform(40, 60)
    elif root and kind == "resource_exhaustion":
        pool = levels["pool_limit"]
    values = {
        "disk": f"{disk:.0f}",
        "disk_limit": f"{levels['disk_limit']:.0f}",
        "network": f"{retransmits:.6g}",
        "pool": f"{pool:.0f}",
        "pool_limit": f"{levels['pool_limit']:.0f}",
    }
    for key in _EXTENDED_KEYS:
        metric = metric_names[key]
        lines.setdefault(key, []).append(f'{metric}{{service="{name}"}} {values[key]} {t}')


def _service_levels(name: str) -> dict[str, float]:
    rng = random.Random(f"levels-{name}")
    disk_limit = float(rng.choice((20, 50, 100)) * 1024**3)
    pool_limit = float(rng.choice((10, 20, 50)))
    return {
        "disk_limit": disk_limit,
        "disk": disk_limit * rng.uniform(0.3, 0.6),
        "retransmits": rng.uniform(0.5, 3.0),
        "pool_limit": pool_limit,
        "pool": pool_limit * rng.uniform(0.1, 0.3),
    }


_FAULT_LOGS = {
    "disk": [("ERROR", "write failed: No space left on device (path=/var/lib/data/segment-{n})")],
    "network": [("WARN", "TCP retransmission timeout on connection to 10.0.{n}.7:5432")],
    "resource_exhaustion": [
        ("ERROR", "Connection is not available, request timed out after 30000ms (pool {n})")
    ],
    "code": [
        ("ERROR", "Unhandled exception in POST /api/v1/items/{n}: java.lang.NullPointerException"),
    ],
    "configuration": [("ERROR", "request rejected: limit 0 from setting max_items (item {n})")],
}


# What an unrelated service does during an incident, and when (minutes from the onset).
DISTRACTIONS = (("batch", -4), ("spiky", 0), ("deploy", -3), ("batch", 5), ("spiky", 0))


def _distractors_pick(
    names: list[str], root: str, affected: set[str], count: int, seed: int
) -> dict[str, tuple[str, int]]:
    """``count`` services outside the fault's path (not the root, not a caller it reaches,
    not the entry) -> (what they do, minutes from the onset), ``DISTRACTIONS`` in turn."""
    free = [n for n in names[1:] if n != root and n not in affected]
    picked = random.Random(f"distract-{seed}").sample(free, min(count, len(free)))
    return {n: DISTRACTIONS[i % len(DISTRACTIONS)] for i, n in enumerate(picked)}


def _distract(
    what: tuple[str, int],
    since: int,
    values: tuple[float, float, float],
    cpu_limit: float,
    srng: random.Random,
) -> tuple[float, float, float]:
    """A distractor's sample (``since``: seconds after the incident's onset): a batch job
    holds 0.7 of the CPU limit and a fifth more memory from its start; a spiky service's
    latency is 2-5 times its level in one sample in twelve, baseline and window alike; a
    redeployed service changes nothing but its log (``_deploys_write``)."""
    latency, cpu, memory = values
    how, minutes = what
    if how == "batch" and since >= minutes * STEP:
        cpu = max(cpu, 0.7 * cpu_limit * srng.uniform(0.97, 1.03))
        memory *= 1.2
    elif how == "spiky" and srng.random() < 1 / 12:
        latency *= srng.uniform(2.0, 5.0)
    return latency, cpu, memory


def _deploys_write(out: Path, services: list[str], onset: int) -> None:
    """A routine rollout of each service, three minutes before the onset."""
    if not services:
        return
    (out / "logs").mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp(onset - 3 * STEP, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with (out / "logs" / "deploys.jsonl").open("w", encoding="utf-8") as handle:
        for service in sorted(services):
            message = "Deployed version 2.14.3 (rollout complete, 3/3 replicas ready)"
            record = {"ts": stamp, "service": service, "level": "INFO", "message": message}
            handle.write(json.dumps(record) + "\n")


def _caller_logs_write(
    out: Path,
    edges: list[tuple[str, str]],
    affected: set[str],
    *,
    root: str,
    kind: str,
    span: tuple[int, int],
) -> None:
    """From the onset, each affected caller's line about its call to the affected callee."""
    onset, end = span
    text = "upstream {callee} timed out after 3000ms"
    text = text if kind in {"latency", "cpu", "network"} else "Call to {callee} failed: 503"
    reached = affected | {root}
    rows = [
        (t, caller, text.format(callee=callee))
        for caller, callee in edges
        if caller in affected and callee in reached
        for t in range(onset, end, 30)
    ]
    (out / "logs").mkdir(parents=True, exist_ok=True)
    with (out / "logs" / "calls.jsonl").open("w", encoding="utf-8") as handle:
        for t, service, message in sorted(rows):
            stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            record = {"ts": stamp, "service": service, "level": "ERROR", "message": message}
            handle.write(json.dumps(record) + "\n")


def _logs_write(
    out: Path,
    names: list[str],
    *,
    root: str,
    kind: str,
    seed: int,
    span: tuple[int, int, int],
    faults: bool = True,
) -> None:
    """Routine INFO lines for every service; the root's fault lines from the onset (for a
    configuration change, the change a minute before; none when not ``faults``)."""
    start, onset, end = span
    rng = random.Random(f"logs-{seed}")
    rows: list[tuple[int, str, str, str]] = []
    for name in names:
        for t in range(start, end, 5 * STEP):
            rows.append(
                (t + rng.randrange(0, 60), name, "INFO", f"GET /health 200 {rng.randrange(1, 9)}ms")
            )
    if kind == "configuration":
        rows.append(
            (
                onset - STEP,
                root,
                "INFO",
                "Configuration reloaded: setting max_items changed from 100 to 0",
            )
        )
    for t in range(onset, end, 20) if faults else ():
        for level, text in _FAULT_LOGS[kind]:
            rows.append(
                (t + rng.randrange(0, 20), root, level, text.format(n=rng.randrange(10, 99)))
            )
    rows.sort()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    with (out / "logs" / "services.jsonl").open("w", encoding="utf-8") as handle:
        for t, service, level, message in rows:
            stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            record = {"ts": stamp, "service": service, "level": level, "message": message}
            handle.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--services", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kind", choices=KINDS)
    parser.add_argument("--depth", type=int)
    parser.add_argument("--traces", action="store_true", help="also write traces/ (OTLP/JSON)")
    parser.add_argument(
        "--no-topology", action="store_true", help="no topology.json (the calls only in spans)"
    )
    parser.add_argument("--lag", type=int, default=0, help="samples each call hop adds")
    parser.add_argument(
        "--unobserved-root", action="store_true", help="the root writes no data: an abstention"
    )
    parser.add_argument(
        "--caller-logs", action="store_true", help="callers log failed calls naming the callee"
    )
    parser.add_argument(
        "--client-latency", action="store_true", help="callers' client latency per callee"
    )
    parser.add_argument(
        "--no-network-counters", action="store_true", help="no network series or log lines"
    )
    parser.add_argument("--spill", action="store_true", help="the fault spills into other families")
    parser.add_argument("--naming", choices=sorted(REAL_SCHEMES), default="", help="real names")
    parser.add_argument(
        "--distractors", type=int, default=0, help="services changing outside the fault's path"
    )
    args = parser.parse_args()
    pack = fleet_pack_write(
        out=args.out,
        services=args.services,
        seed=args.seed,
        kind=args.kind,
        depth=args.depth,
        traces=args.traces,
        topology=not args.no_topology,
        lag=args.lag,
        unobserved_root=args.unobserved_root,
        caller_logs=args.caller_logs,
        client_latency=args.client_latency,
        network_counters=not args.no_network_counters,
        spill=args.spill,
        naming=args.naming,
        distractors=args.distractors,
    )
    size = len(pack.services)
    print(f"{pack.path}: {size} services, root {pack.root} ({pack.kind}, depth {pack.depth})")


if __name__ == "__main__":
    main()
