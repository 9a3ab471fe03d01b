"""A metric's family is read from its words, whatever convention joins them.

A metric name is words joined by separators: Prometheus joins them with ``_``,
OpenTelemetry with ``.``, JMX and node exporter's meminfo fields by capitals, others with
``-``. The family (``families.series_family``) is read from the words, so the same words
give the same family under every separator, and a short abbreviation (``mem``, ``ram``,
``rt``, ``io``, ``fd``, ``gc``) counts only as a whole word, never inside a longer one.
"""

from __future__ import annotations

import re

import pytest

from diagnosis.evidence import vocab
from diagnosis.evidence.families import series_family
from diagnosis.offline.analysis import Call, MetricSignal
from diagnosis.offline.kinds import cpu_saturated

# Real names, from the exporters and conventions that use them, with the family each
# measures. Those marked ``# was: ...`` were misread before the family was read from words.
NAMES = [
    # cAdvisor
    ("container_cpu_cfs_throttled_seconds_total", "cpu"),
    ("container_memory_working_set_bytes", "memory"),
    ("container_fs_usage_bytes", "disk"),
    ("container_network_receive_errors_total", "network"),
    ("container_network_receive_bytes_total", ""),
    ("container_pressure_io_stalled_seconds_total", "disk"),  # was: latency
    ("container_blkio_device_usage_total", "disk"),  # was: "" (traffic)
    # node exporter
    ("node_cpu_seconds_total", "cpu"),
    ("node_memory_MemAvailable_bytes", "memory"),
    ("node_filesystem_avail_bytes", "disk"),
    ("node_netstat_Tcp_RetransSegs", "network"),
    ("node_load1", "cpu"),
    ("node_pressure_io_stalled_seconds_total", "disk"),  # was: latency
    ("node_filefd_allocated", "resource_exhaustion"),  # was: ""
    ("node_filefd_maximum", "resource_exhaustion"),  # was: ""
    ("node_vmstat_oom_kill", "memory"),
    # kube-state-metrics
    ("kube_deployment_status_replicas_unavailable", "errors"),  # was: change
    ("kube_deployment_status_replicas_available", "errors"),  # was: change
    # Prometheus client defaults, Go, JVM (client_java, Micrometer), Node.js, Python
    ("process_open_fds", "resource_exhaustion"),
    ("process_resident_memory_bytes", "memory"),
    ("go_gc_duration_seconds", "memory"),
    ("go_goroutines", "resource_exhaustion"),
    ("jvm_gc_pause_seconds", "memory"),
    ("jvm_memory_pool_bytes_used", "memory"),  # was: resource_exhaustion (a pool)
    ("jvm_buffer_pool_used_bytes", "memory"),  # was: resource_exhaustion (a pool)
    ("hikaricp_connections_pending", "resource_exhaustion"),
    ("http_server_requests_seconds_max", "latency"),
    ("nodejs_heap_size_used_bytes", "memory"),
    ("python_gc_collections_total", "memory"),
    # OpenTelemetry semantic conventions, dotted and as Prometheus spells them
    ("system.cpu.utilization", "cpu"),
    ("process.runtime.jvm.memory.usage", "memory"),
    ("jvm.gc.duration", "memory"),  # was: latency
    ("process.runtime.dotnet.gc.collections.count", "memory"),  # was: ""
    ("db.client.connections.usage", "resource_exhaustion"),  # was: ""
    ("db_client_connections_usage", "resource_exhaustion"),  # was: ""
    ("db_client_connections_max", "resource_exhaustion"),  # was: ""
    ("db.client.connection.count", "resource_exhaustion"),  # was: ""
    ("http.server.request.duration", "latency"),
    ("system.disk.io", "disk"),
    ("system.network.io", ""),  # bytes a network interface moved: load, no disk's IO
    ("process.open_file_descriptor.count", "resource_exhaustion"),
    # databases, proxies, DNS, probes
    ("mysql_global_status_threads_connected", "resource_exhaustion"),
    ("redis_memory_used_bytes", "memory"),
    ("envoy_cluster_upstream_rq_timeout", "errors"),
    ("coredns_forward_request_duration_seconds", "latency"),
    ("probe_success", "errors"),
    # the short words of hand-named and agent metrics
    ("mem_usage_percent", "memory"),  # was: ""
    ("mem_used_bytes", "memory"),  # was: ""
    ("mem_free", "memory"),  # was: ""
    ("ram_usage", "memory"),  # was: ""
    ("gc_time_ms", "memory"),
    ("iops", "disk"),  # was: ""
    ("io_wait", "disk"),  # was: ""
    ("cpu_iowait", "cpu"),  # the CPU's time by mode, as node exporter counts it
    ("load_avg", "cpu"),  # was: ""
    ("loadavg", "cpu"),  # was: ""
    ("avg_rt", "latency"),  # was: ""
    ("rt_ms", "latency"),
    ("fs_used_percent", "disk"),
    ("error_rate", "errors"),
    ("qps", ""),
]

_HISTOGRAM = re.compile(r"_(count|bucket|sum)$")


def _words(name: str) -> list[str]:
    # the table's own separators (a camelCase word such as "MemAvailable" stays one piece)
    return re.split(r"[._-]", name)


def _joined(words: list[str], convention: str) -> str:
    if convention == "camelCase":
        return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])
    return convention.join(words)


@pytest.mark.parametrize(("name", "family"), NAMES)
def test_a_real_metric_name_reads_as_the_family_it_measures(name, family):
    assert series_family(name) == family


# A histogram's ``_count``/``_bucket``/``_sum`` is Prometheus' own suffix, not a word
# (OpenTelemetry's ``process.open_file_descriptor.count`` counts descriptors).
@pytest.mark.parametrize("convention", ["_", ".", "-", "camelCase"])
@pytest.mark.parametrize(("name", "family"), [(n, f) for n, f in NAMES if not _HISTOGRAM.search(n)])
def test_the_same_words_under_any_separator_read_as_the_same_family(name, family, convention):
    assert series_family(_joined(_words(name), convention)) == family


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("member_count", ""),  # mem
        ("param_count", ""),  # ram
        ("frame_drops_total", ""),  # ram
        ("program_runs_total", ""),  # ram
        ("start_count", ""),  # rt
        ("alert_count", ""),  # rt
        ("port_count", ""),  # rt
        ("cart_items", ""),  # rt
        ("port_ratio", ""),  # rt, io
        ("audio_latency", "latency"),  # io
        ("version_info", "change"),  # io
        ("fdb_transactions_total", ""),  # fd
        ("gce_instance_cpu_utilization", "cpu"),  # gc
        ("param_errors", "errors"),  # ram
    ],
)
def test_a_short_abbreviation_inside_a_longer_word_is_not_that_word(name, family):
    assert series_family(name) == family


def test_a_cpu_counter_by_mode_stays_the_cpus_whatever_the_mode():
    for mode in ("iowait", "idle", "user", "system"):
        assert vocab.metric_kind("node_cpu_seconds_total", {"mode": mode}) == ("resource", "cpu")
    assert vocab.is_free_metric("node_cpu_seconds_total", {"mode": "idle"})
    assert not vocab.is_free_metric("node_cpu_seconds_total", {"mode": "iowait"})


def _mode_series(mode: str, level: float) -> MetricSignal:
    call = Call(
        tool_name="query_metrics",
        arguments={"service": "svc-a"},
        invocation_id=1,
        trace_ref="trace-1",
        status="ok",
        output="",
        summary={},
    )
    kind, subkind = vocab.metric_kind("node_cpu_seconds_total", {"mode": mode})
    return MetricSignal(
        call=call,
        service="svc-a",
        metric="node_cpu_seconds_total",
        labels={"mode": mode},
        line="",
        baseline_mean=level,
        window_max=level,
        window_max_at="",
        window_min=level,
        window_mean=level,
        change_point="",
        direction="up",
        anomaly=9.0,
        ratio=None,
        kind=kind,
        subkind=subkind,
        rate=True,
    )


@pytest.mark.parametrize(
    ("idle", "saturated"), [(0.02, True), (0.6, False)], ids=["idle-gone", "idle-left"]
)
def test_a_per_mode_cpu_counter_is_busy_by_its_modes_iowait_included(idle, saturated):
    busy = 1.0 - idle
    modes = {"user": busy * 0.8, "system": busy * 0.1, "iowait": busy * 0.1, "idle": idle}
    series = [_mode_series(mode, level) for mode, level in modes.items()]
    assert cpu_saturated(series[0], series) is saturated


def test_a_limit_series_of_several_resources_is_read_by_its_resource_label():
    for resource, subkind in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "disk")):
        labels = {"resource": resource}
        assert vocab.metric_kind("kube_pod_container_resource_limits", labels) == (
            "resource",
            subkind,
        )


def _selector_regex() -> str:
    match = re.fullmatch(r'\{__name__=~"(.*)"\}', vocab.RESOURCE_SELECTOR)
    assert match is not None
    return match.group(1)


def test_the_resource_selector_is_plain_re2_and_asks_for_every_resource_name():
    pattern = _selector_regex()
    # RE2 has no lookaround and no backreferences
    assert "(?" not in pattern and not re.search(r"\\[1-9]", pattern)
    compiled = re.compile(pattern)
    for name, _family in NAMES:
        if vocab.metric_kind(name)[0] != "resource":
            continue
        # Prometheus names join words with "_" (a UTF-8 name may keep OpenTelemetry's ".")
        for spelled in (name, "_".join(_words(name)), ".".join(_words(name))):
            assert compiled.fullmatch(spelled), spelled


def test_the_resource_selector_leaves_short_words_inside_longer_ones():
    compiled = re.compile(_selector_regex())
    for name in ("member_count", "param_count", "audio_frames", "version_info", "ratio_value"):
        assert not compiled.fullmatch(name), name
