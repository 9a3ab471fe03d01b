"""The fault kind of a root cause comes from the evidence on that service itself.

Each case is one service's own series and log templates, shaped as the tools summarise
them; the kind is what changed first and most, by what each series measures.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from diagnosis.offline.analysis import Call, Suspect, log_signals, metric_signals
from diagnosis.offline.hypotheses import hypothesis_build
from diagnosis.offline.kinds import kind_decide, kinds_decide, metric_family
from diagnosis.offline.localise import relative_change

ONSET = "2026-03-02T10:20:00Z"
LATER = "2026-03-02T10:32:00Z"
EARLIER = "2026-03-02T10:19:00Z"
SLACK_S = 60.0


def _series(metric: str, base: float, level: float, *, at: str = ONSET, score: float = 40.0,
            unit: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "service": "svc",
        "metric": metric,
        "labels": {**(labels or {}), "service": "svc"},
        "unit": unit,
        "baseline_mean": base,
        "baseline_median": base,
        "window_mean": level,
        "window_level": level,
        "window_max": max(base, level),
        "window_max_at": at,
        "window_min": min(base, level),
        "change_point": at,
        "direction": "up" if level > base else "down",
        "anomaly_score": score,
        "sustained_points": 8,
        "line": f"svc {metric} {labels or ''} level {level:g} vs {base:g} since {at}",
    }


def _flat(metric: str, value: float) -> dict[str, Any]:
    item = _series(metric, value, value, score=0.0)
    item.update(direction="flat", change_point=None, sustained_points=0)
    return item


def _template(text: str, *, level: str = "ERROR", at: str = ONSET) -> dict[str, Any]:
    sample = f"{at} svc {level} {text}"
    return {
        "template": text,
        "service": "svc",
        "level": level,
        "count_window": 40,
        "count_baseline": 0,
        "first_seen": at,
        "last_seen": "2026-03-02T10:39:00Z",
        "is_new": True,
        "surge_ratio": 1000.0,
        "line": f'svc {level} template "{text}": 40 in window, 0 in baseline',
        "samples": [sample],
    }


def _suspect(series: list[dict[str, Any]], templates: list[dict[str, Any]] = ()) -> Suspect:
    output = "\n".join(
        [s["line"] for s in series]
        + [t["line"] for t in templates]
        + [x for t in templates for x in t["samples"]]
    )

    def call(tool: str, summary: dict[str, Any]) -> Call:
        return Call(tool, {"service": "svc"}, 1, "trace-1", "ok", output, summary)

    entry = Suspect(service="svc")
    entry.metrics = metric_signals(call("query_metrics", {"series": series}))
    entry.logs = log_signals(call("query_logs", {"templates": list(templates)}), ["svc"])
    return entry


def _strength(signal) -> float:
    """As localise weighs a shift: significance (capped) times the log of the change."""
    return min(signal.anomaly, 10.0) * (1.0 + math.log2(1.0 + relative_change(signal)))


def _kind(entry: Suspect) -> tuple[str, str]:
    verdict = kind_decide(entry, strength=_strength, slack_s=SLACK_S)
    return verdict.kind, verdict.alternative


LATENCY = ("http_server_request_duration_seconds", 0.2, 2.0)


def test_a_cpu_share_that_went_from_5_to_88_percent_is_a_cpu_fault_whatever_else_moved():
    entry = _suspect([_series("cpu_usage_rate_percent", 5, 88), _series(*LATENCY, score=90)])
    assert _kind(entry) == ("cpu", "")


def test_busier_cpu_far_from_its_capacity_is_load_and_the_kind_is_latency():
    entry = _suspect(
        [
            _series("process_cpu_usage_cores", 0.3, 0.9),
            _flat("container_cpu_limit_cores", 4.0),
            _series(*LATENCY),
        ]
    )
    # no network counter here: a network delay would look the same (SHARED_KINDS)
    assert _kind(entry) == ("latency", "network")


def test_cpu_at_its_limit_series_is_a_cpu_fault():
    entry = _suspect(
        [
            _series("process_cpu_usage_cores", 0.6, 1.98),
            _flat("container_cpu_limit_cores", 2.0),
            _series(*LATENCY),
        ]
    )
    assert _kind(entry)[0] == "cpu"


@pytest.mark.parametrize(
    ("metric", "base", "level", "unit", "family"),
    [
        ("jvm_memory_used_bytes", 4e8, 9.8e8, "bytes", "memory"),
        ("container_fs_usage_bytes", 2e10, 4.9e10, "bytes", "disk"),
        ("node_network_tcp_retransmits_per_second", 1.0, 60.0, "", "network"),
        ("dns_lookup_failures", 0.1, 20.0, "", "network"),
        ("hikaricp_connections_pending", 0.0, 30.0, "", "resource_exhaustion"),
        ("executor_queued_tasks", 1.0, 500.0, "", "resource_exhaustion"),
        ("rpc_server_failure_ratio", 0.001, 0.2, "ratio", "errors"),
    ],
)
def test_the_family_of_the_series_that_changed_is_the_kind(metric, base, level, unit, family):
    entry = _suspect([_series(metric, base, level, unit=unit), _flat(LATENCY[0], 0.2)])
    assert _kind(entry)[0] == family


def test_the_family_is_read_from_the_unit_when_the_name_says_nothing():
    summary = {"series": [_series("rq", 1, 3, unit="seconds")]}
    [signal] = metric_signals(Call("query_metrics", {}, 1, "t", "ok", "x", summary))
    assert metric_family(signal) == "latency"


def test_latency_that_rose_before_a_resource_grew_is_latency():
    entry = _suspect(
        [_series(*LATENCY, at=ONSET), _series("jvm_memory_used_bytes", 4e8, 9e8, at=LATER)]
    )
    assert _kind(entry)[0] == "latency"


def test_a_resource_that_changed_with_the_latency_is_the_mechanism():
    entry = _suspect(
        [_series(*LATENCY, score=200), _series("jvm_memory_used_bytes", 4e8, 9e8, score=12)]
    )
    assert _kind(entry)[0] == "memory"


def test_new_exception_templates_with_no_resource_change_are_code_and_plain_errors_errors():
    failing = _series("rpc_server_failure_ratio", 0.001, 0.2, unit="ratio")
    npe = _template("Unhandled exception in POST /pay: java.lang.NullPointerException")
    assert _kind(_suspect([failing], [npe]))[0] == "code"
    assert _kind(_suspect([failing]))[0] == "errors"


def test_a_configuration_change_right_before_the_onset_is_configuration():
    failing = _series("rpc_server_failure_ratio", 0.001, 0.2, unit="ratio")
    change = _template("Configuration reloaded: setting max_items", level="INFO", at=EARLIER)
    assert _kind(_suspect([failing], [change]))[0] == "configuration"


def test_a_release_followed_by_new_exceptions_is_code():
    failing = _series("rpc_server_failure_ratio", 0.001, 0.2, unit="ratio")
    release = _template("Rollout svc updated to revision 42 (image svc:v2.3.1)", level="INFO",
                        at=EARLIER)  # fmt: skip
    npe = _template("Unhandled exception: java.lang.NullPointerException at Pay.confirm")
    assert _kind(_suspect([failing], [release, npe]))[0] == "code"


def test_a_resource_at_its_limit_is_the_kind_whatever_change_triggered_it():
    heap = _series("jvm_memory_used_bytes", 4e8, 1.0e9)
    limit = _flat("jvm_memory_max_bytes", 1.0e9)
    flag = _template("Configuration reloaded: feature flag cache.unbounded=true", level="INFO",
                     at=EARLIER)  # fmt: skip
    entry = _suspect([heap, limit], [flag])
    entry.metrics[0].at_limit = True
    assert _kind(entry)[0] == "memory"


def test_two_symptoms_that_began_together_with_like_strength_are_both_named():
    entry = _suspect(
        [_series(*LATENCY, score=40), _series("availability_percent", 100.0, 99.1, score=40)]
    )
    kind, other = _kind(entry)
    assert {kind, other} == {"latency", "errors"}


def test_a_much_larger_symptom_is_told_apart():
    entry = _suspect(
        [_series(*LATENCY, score=4), _series("availability_percent", 100.0, 20.0, score=90)]
    )
    # told apart from latency; not from a code fault that throws no exception
    assert _kind(entry) == ("errors", "code")


def test_a_service_with_no_shift_of_any_family_has_no_kind():
    entry = _suspect([_series("http_requests", 100, 300)])
    assert _kind(entry) == ("", "")
    assert entry.root_kind == ""


@pytest.mark.parametrize("lang", ["zh-CN", "en"])
def test_the_hypothesis_names_both_kinds_the_evidence_cannot_tell_apart(lang):
    entry = _suspect(
        [_series(*LATENCY, score=40), _series("availability_percent", 100.0, 99.1, score=40)]
    )
    entry.kind = "latency"
    kinds_decide([entry], strength=_strength, slack_s=SLACK_S)
    hypothesis = hypothesis_build(entry, lang, None)
    words = {"zh-CN": ("延迟", "错误", "无法区分"), "en": ("latency", "errors", "cannot tell")}
    assert all(w in hypothesis.hypothesis_text for w in words[lang])
    assert hypothesis.root_cause_kind == entry.fault_kind
    # the basis cites the evidence of both
    assert "http_server_request_duration_seconds" in hypothesis.basis
    assert "availability_percent" in hypothesis.basis


def test_a_failed_call_naming_no_other_service_is_worded_by_the_kind_it_shows():
    retransmits = _series("node_network_tcp_retransmits_per_second", 1.0, 60.0)
    timeout = _template("TCP retransmission timeout on connection to 10.0.4.7:5432", level="WARN")
    entry = _suspect([retransmits], [timeout])
    entry.kind = "dependency"  # the engine reads a timeout as a failed call
    kinds_decide([entry], strength=_strength, slack_s=SLACK_S)
    hypothesis = hypothesis_build(entry, "zh-CN", None)
    assert hypothesis.root_cause_kind == "network"
    assert "网络" in hypothesis.hypothesis_text.split("（类型")[0]


def test_a_collector_working_hard_is_memory():
    gc = _template("[gc] Pause Full (G1 Compaction Pause) 3900M->3800M(4096M) 812ms", level="WARN")
    failing = _series("rpc_server_failure_ratio", 0.001, 0.01, unit="ratio", at=LATER, score=5)
    assert _kind(_suspect([failing], [gc]))[0] == "memory"


def test_latency_with_a_flat_network_counter_is_latency_alone():
    """A network series of the service's own that stayed flat rules the network out; with
    none, a network delay would look the same and both are named."""
    slow = _series(*LATENCY)
    assert _kind(_suspect([slow])) == ("latency", "network")
    flat = _flat("node_network_tcp_retransmits_per_second", 1.0)
    assert _kind(_suspect([slow, flat])) == ("latency", "")


@pytest.mark.parametrize("lang", ["zh-CN", "en"])
def test_the_shared_kind_is_a_hypothesis_of_its_own_on_the_same_evidence(lang):
    from diagnosis.offline.hypotheses import alternative_hypothesis

    entry = _suspect([_series(*LATENCY)])
    entry.kind = "latency"
    kinds_decide([entry], strength=_strength, slack_s=SLACK_S)
    primary = hypothesis_build(entry, lang, None)
    other = alternative_hypothesis(entry, lang)
    assert (primary.root_cause_kind, primary.root_cause_kind_alternative) == ("latency", "network")
    assert other is not None
    assert (other.root_cause_kind, other.root_cause_kind_alternative) == ("network", "latency")
    assert LATENCY[0] in primary.basis and LATENCY[0] in other.basis
    what = {
        "zh-CN": ("无法区分", "能区分它们的是", "重传"),
        "en": ("cannot tell", "what would", "retransmits"),
    }
    assert all(w in primary.hypothesis_text for w in what[lang])


def test_a_client_wait_over_a_flat_callee_is_network_or_the_client_pool():
    from diagnosis.offline.kinds import client_gap_decide

    wait = _series("rpc_client_duration_seconds", 0.2, 0.9, labels={"peer_service": "db"})
    entry = _suspect([wait, _series(*LATENCY)])
    kinds_decide([entry], strength=_strength, slack_s=SLACK_S)
    client_gap_decide(entry, [entry.metrics[0]])
    assert (entry.fault_kind, entry.fault_alternative) == ("network", "resource_exhaustion")
    assert entry.fault_evidence is entry.metrics[0]
    # a pool series of its own observed (flat): the pool is ruled out
    pooled = _suspect([wait, _series(*LATENCY), _flat("hikaricp_connections_active", 3)])
    kinds_decide([pooled], strength=_strength, slack_s=SLACK_S)
    client_gap_decide(pooled, [pooled.metrics[0]])
    assert (pooled.fault_kind, pooled.fault_alternative) == ("network", "")
    # a saturated CPU of its own is its own mechanism, whatever it waits on
    busy = _suspect([wait, _series("cpu_usage_rate_percent", 5, 88)])
    kinds_decide([busy], strength=_strength, slack_s=SLACK_S)
    client_gap_decide(busy, [busy.metrics[0]])
    assert busy.fault_kind == "cpu"
