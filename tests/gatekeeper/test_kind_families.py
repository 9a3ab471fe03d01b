"""A kind is shown by a statement of its family, read by the engine's own rule.

An adversarial Executor can quote a line that shares a word with the kind it claims but is
of another family ("_seconds" in a CPU counter, "connection" in a call refused by someone
else), a series of the kind that held its baseline, or only a line's first words. The
check reads every series and template statement the excerpt touches with the rule the
engine reads kinds by (``families.series_family``/``template_family``), whatever the
services are called.
"""

from __future__ import annotations

import random

import pytest
from django.utils import timezone

from diagnosis.evidence import vocab
from diagnosis.evidence.families import (
    KIND_FAMILIES,
    kind_evidenced,
    series_family,
    statements_read,
)
from diagnosis.facts import text_normalize, text_normalize_cased
from diagnosis.flow.parsing import executor_output_parse
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.support.gatekeeper import gatekeeper_run

from .conftest import binding, claim, executor_json

SHIFT = "up since 2026-03-02T10:04:00Z, level 88 over 20 window points vs baseline median 5"
FLAT = "no sustained shift, level 5 vs baseline median 5, ratio 1x, anomaly score 0.2"


def _names(seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def one() -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) + rng.choice(
            ("", "-svc", "-7f3a", "_api")
        )

    first = one()
    second = one()
    while second == first or second in first or first in second:
        second = one()
    return first, second


def _shows(kind: str, output: str, quoted: str, services: tuple[str, ...] = ()) -> bool:
    """As the Gatekeeper reads it: the statements from the output with its capitals kept, at
    the normalised text's positions (``ClaimChecker.statements``)."""
    text = text_normalize(output)
    region = text_normalize(quoted)
    start = text.index(region)
    cased = text_normalize_cased(output)
    statements = statements_read(cased, services=tuple(text_normalize(s) for s in services))
    return kind_evidenced(kind, text, (start, start + len(region)), statements)


# series of every family the engine reads, with the kind each shows
SERIES = [
    ("process_cpu_seconds_total", "cpu"),
    ("container_cpu_usage_percent", "cpu"),
    ("container_memory_working_set_bytes", "memory"),
    ("jvm_gc_pause_seconds", "memory"),
    ("node_filesystem_avail_bytes", "disk"),
    ("node_netstat_tcp_retranssegs_total", "network"),
    ("hikaricp_connections_pending", "resource_exhaustion"),
    ("http_server_requests_errors_total", "errors"),
    ("http_request_duration_seconds", "latency"),
    ("app_build_info", "configuration"),
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("metric", "family_kind"), SERIES)
def test_a_shifted_series_shows_its_familys_kind_and_no_other(seed, metric, family_kind):
    service, _ = _names(seed)
    for rate in ("", " per-second rate"):  # a counter's identity ends with how it is read
        output = (
            f"query_metrics service={service}\n"
            f'{service} {metric}{{pod="p-0"}}{rate}: {SHIFT}\n'
            f'{service} widget_items{{pod="p-0"}}: {SHIFT}\n'
        )
        shown = {k for k in KIND_FAMILIES if _shows(k, output, f"{service} {metric}")}
        assert shown == {family_kind}, rate
        # a line quoted from its middle is read as its own statement, not as the next one
        shown = {k for k in KIND_FAMILIES if _shows(k, output, "level 88 over 20 window")}
        assert shown == {family_kind}, rate


@pytest.mark.parametrize(("metric", "family_kind"), SERIES)
def test_a_series_that_held_its_baseline_shows_no_kind(metric, family_kind):
    output = f"svc-a {metric}: {FLAT}\nsvc-a {metric} trend, mean per 5m from x: 5 | 5 | 5\n"
    assert not _shows(family_kind, output, f"svc-a {metric}: no sustained shift")
    # its trend line alone dates nothing either
    assert not _shows(family_kind, output, f"svc-a {metric} trend")


def test_a_cpu_counter_in_seconds_is_no_latency_evidence():
    output = f"svc-a process_cpu_seconds_total: {SHIFT}\n"
    assert not _shows("latency", output, "process_cpu_seconds_total")
    assert _shows("cpu", output, "process_cpu_seconds_total")
    # quoting the statement's figures reads the whole statement
    assert _shows("cpu", output, "level 88 over 20 window points")


def test_a_fleet_views_top_series_shows_its_family():
    output = (
        "service svc-a: 3 of 5 series anomalous, "
        "top container_cpu_usage_percent up anomaly score 41.2\n"
    )
    assert _shows("cpu", output, "top container_cpu_usage_percent up")
    assert not _shows("memory", output, "top container_cpu_usage_percent up")


@pytest.mark.parametrize("seed", range(3))
def test_a_refused_call_to_another_service_is_no_exhausted_pool(seed):
    own, other = _names(seed)
    refused = (
        f'{own} ERROR template "Call to {other} failed: connection refused": 120 in window, '
        "0 in baseline, NEW (absent from the baseline)\n"
    )
    assert not _shows("resource_exhaustion", refused, "connection refused", (own, other))
    pool = (
        f'{own} ERROR template "HikariPool-<NUM> - Connection is not available, request timed '
        'out after <NUM>ms": 829 in window, 0 in baseline, NEW (absent from the baseline)\n'
        f"  sample: 2026-03-02T10:16:53Z {own} ERROR HikariPool-1 - Connection is not available\n"
    )
    assert _shows("resource_exhaustion", pool, "Connection is not available", (own, other))
    # a sample line belongs to its template
    assert _shows("resource_exhaustion", pool, f"{own} ERROR HikariPool-1", (own, other))


def test_an_exception_template_shows_code_and_an_error_line_errors():
    output = (
        'svc-a ERROR template "NullPointerException at OrderMapper.map(OrderMapper.java:<NUM>)": '
        "40 in window, 0 in baseline, NEW\n"
        'svc-a ERROR template "request failed with status <NUM>": 30 in window, 1 in baseline\n'
    )
    assert _shows("code", output, "NullPointerException")
    assert not _shows("code", output, "request failed with status")
    assert _shows("errors", output, "request failed with status")


def test_a_client_wait_on_a_peer_shows_network_and_a_plain_latency_does_not():
    peer = f'svc-a http_client_duration_seconds{{peer_service="svc-b"}}: {SHIFT}\n'
    plain = f"svc-a http_server_duration_seconds: {SHIFT}\n"
    assert _shows("network", peer, "http_client_duration_seconds")
    assert not _shows("network", plain, "http_server_duration_seconds")
    assert _shows("latency", plain, "http_server_duration_seconds")


def test_a_latency_histograms_bucket_shows_latency():
    output = f'svc-a http_request_duration_seconds_bucket{{le="0.5"}}: {SHIFT}\n'
    assert _shows("latency", output, "http_request_duration_seconds_bucket")


def test_text_with_no_statement_is_read_by_its_words():
    spans = (
        "svc-a: 159 requests (5.3/min; baseline 651), errors 38.99% (baseline 0%), "
        "latency p95 2.1 s\n"
    )
    assert _shows("latency", spans, "latency p95 2.1 s")
    assert not _shows("memory", spans, "latency p95 2.1 s")


def test_the_engine_and_the_check_read_a_series_family_alike():
    # every metric-name fragment and whole word of the vocabulary's resource families, as a
    # series name
    entries = [*vocab.RESOURCE_METRIC.items(), *vocab.RESOURCE_WORDS.items()]
    for subkind, words in entries:
        for word in words:
            metric = f"app_{word.strip('_')}_total"
            family = series_family(metric)
            output = f"svc-a {metric}: {SHIFT}\n"
            shown = {k for k in KIND_FAMILIES if _shows(k, output, f"svc-a {metric}")}
            expected = {k for k, fams in KIND_FAMILIES.items() if family in fams}
            assert shown == expected, (subkind, metric, family)


# names whose only family word shows through their capitals, and the kind the engine reads
CAMEL = [
    ("memUsedPercent", "memory"),
    ("avgRt", "latency"),
    ("cpuLoadAvg", "cpu"),
    ("fsUsedBytes", "disk"),
    ("openFd", "resource_exhaustion"),
]


@pytest.mark.parametrize(("metric", "family_kind"), CAMEL)
def test_a_camel_case_series_shows_the_family_the_engine_reads_in_it(metric, family_kind):
    assert series_family(metric) in KIND_FAMILIES[family_kind]
    output = f'svc-a {metric}{{pod="p-0"}}: {SHIFT}\nsvc-a widget_items: {SHIFT}\n'
    shown = {k for k in KIND_FAMILIES if _shows(k, output, f"svc-a {metric}")}
    assert shown == {family_kind}
    # held at its baseline, it shows nothing
    assert not _shows(family_kind, f"svc-a {metric}: {FLAT}\n", f"svc-a {metric}")


def test_the_cased_text_keeps_the_normalised_positions():
    for output in ("Svc  memUsedPercent:\t up ", "服务 A  memUsed ’x’ ", "Straße memUsed: up"):
        folded, cased = text_normalize(output), text_normalize_cased(output)
        assert len(cased) == len(folded)
        assert cased.casefold() == folded or cased == folded
    # the capitals survive in text that is not ASCII, and the caller's folded text is reused
    assert text_normalize_cased("服务 A  memUsed ’x’ ") == '服务A memUsed "x"'
    assert text_normalize_cased("Svc memUsed", "svc memused") == "Svc memUsed"


# -- through the Gatekeeper ------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(3))
def test_a_claim_whose_kind_only_shares_a_word_with_its_series_is_demoted(owner, seed):
    service, other = _names(seed)
    env = Environment.objects.create(slug=f"fam-{seed}", name="fam", services=[service, other])
    session = DiagnosisSession.objects.create(
        owner=owner, environment=env, original_query=f"{service} 变慢了"
    )
    output = (
        "query_metrics (every service)\n"
        f"{service} process_cpu_seconds_total: {SHIFT}, ratio 17.6x, anomaly score 41.2\n"
        f"{service} container_memory_working_set_bytes: {FLAT}\n"
    )
    ToolInvocation.objects.create(
        session=session,
        sequence=1,
        trace_ref="trace-1",
        tool_name="query_metrics",
        status=ToolInvocation.Status.OK,
        arguments={},
        output=output,
        output_size=len(output),
        started_at=timezone.now(),
    )

    def verdict(kind: str, quoted: str) -> tuple[str, list[str]]:
        raw = executor_json(
            claim(
                "c-1",
                [binding("trace-1", quoted)],
                claim_type="root_cause",
                claim_text=f"{service} 是根因",
                entity=service,
                root_cause_kind=kind,
            )
        )
        result = gatekeeper_run(session=session, parsed=executor_output_parse(raw)).claims[0]
        return result.verdict.value, [f.code for f in result.findings]

    assert verdict("cpu", f"{service} process_cpu_seconds_total") == ("accepted", [])
    assert verdict("latency", f"{service} process_cpu_seconds_total") == (
        "demoted",
        ["kind_unbound"],
    )
    # a memory series that held its baseline is evidence against memory, not for it
    assert verdict("memory", f"{service} container_memory_working_set_bytes")[1] == ["kind_unbound"]


# -- a hypothesis's kind: no bindings, but the session's outputs must show it ------------


def _hypothesis_session(owner, seed):
    service, other = _names(seed)
    env = Environment.objects.create(slug=f"hyp-{seed}", name="hyp", services=[service, other])
    session = DiagnosisSession.objects.create(
        owner=owner, environment=env, original_query=f"{service} 变慢了"
    )
    outputs = [
        (
            "query_metrics",
            {},
            "query_metrics (every service)\n"
            f"{service} container_cpu_usage_percent: {SHIFT}, ratio 17.6x, anomaly score 41.2\n"
            f"{other} container_memory_working_set_bytes: {SHIFT}, ratio 2.1x, anomaly score 30\n",
        ),
        (
            "query_metrics",
            {"service": service},
            f"query_metrics service={service}\n"
            f"{service} container_memory_working_set_bytes: {FLAT}\n",
        ),
    ]
    for sequence, (tool, arguments, output) in enumerate(outputs, start=1):
        ToolInvocation.objects.create(
            session=session,
            sequence=sequence,
            trace_ref=f"trace-{sequence}",
            tool_name=tool,
            status=ToolInvocation.Status.OK,
            arguments=arguments,
            output=output,
            output_size=len(output),
            started_at=timezone.now(),
        )
    return session, service


def _composed(session, parsed, report, service):
    """The Composer input of a LOW_CONFID run over ``parsed`` and its Gatekeeper ``report``."""
    from diagnosis.contracts import Decision
    from diagnosis.flow.composer_filter import composer_input_build

    return composer_input_build(
        question=session.original_query,
        language="zh-CN",
        decision=Decision.LOW_CONFID,
        executor_output=parsed.output,
        gatekeeper=report,
        verifier=None,
        services=[service],
    ).composer_input


def _hypothesis(service, kind):
    return {
        "hypothesis_text": f"{service} 可能是根因（类型：{kind}）",
        "entity": service,
        "root_cause_kind": kind,
        "basis": f"{service} 的 {kind} 指标升高（CPU、内存、磁盘都升高）",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(3))
def test_a_hypothesis_keeps_only_a_kind_the_sessions_outputs_show_about_its_service(owner, seed):
    session, service = _hypothesis_session(owner, seed)
    # cpu: its own series rose; memory: its own held its baseline and only the other's rose;
    # disk: nothing anywhere (the basis's words show nothing by themselves)
    raw = executor_json(
        hypotheses=[_hypothesis(service, k) for k in ("cpu", "memory", "disk")],
    )
    parsed = executor_output_parse(raw)
    report = gatekeeper_run(session=session, parsed=parsed)
    flagged = [
        (f.detail_params["hypothesis"], f.detail_params["kind"])
        for f in report.findings
        if f.code == "hypothesis_kind_unshown"
    ]
    assert flagged == [(1, "memory"), (2, "disk")]
    composed = _composed(session, parsed, report, service)
    kinds = [h.root_cause_kind for h in composed.allowed_hypotheses]
    assert kinds == ["cpu", None, None]
    # the hypotheses stay, without the kind they wrote
    assert all("类型" not in h.text for h in composed.allowed_hypotheses[1:])
    assert len(composed.allowed_hypotheses) == 3


@pytest.mark.django_db
def test_a_hypothesis_giving_the_other_reading_of_shown_evidence_keeps_its_kinds(owner):
    # "network rather than cpu": the evidence shows cpu, and nothing can rule network out
    session, service = _hypothesis_session(owner, 0)
    other_reading = {**_hypothesis(service, "network"), "root_cause_kind_alternative": "cpu"}
    unshown = {**_hypothesis(service, "network"), "root_cause_kind_alternative": "disk"}
    parsed = executor_output_parse(executor_json(hypotheses=[other_reading, unshown]))
    report = gatekeeper_run(session=session, parsed=parsed)
    flagged = [f.detail_params["hypothesis"] for f in report.findings]
    assert flagged == [1]


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(3))
def test_a_hypothesis_that_invents_a_figure_is_left_out_and_an_invented_basis_withheld(owner, seed):
    session, service = _hypothesis_session(owner, seed)
    real = {"hypothesis_text": f"{service} 的 CPU 升至 88", "entity": service, "basis": "17.6x"}
    invented_text = {"hypothesis_text": f"{service} 的 CPU 升至 97", "entity": service}
    invented_basis = {
        "hypothesis_text": f"{service} 的 CPU 可能饱和",
        "entity": service,
        "basis": "始于 09:58",  # the output's shift began at 10:04
    }
    parsed = executor_output_parse(executor_json(hypotheses=[real, invented_text, invented_basis]))
    report = gatekeeper_run(session=session, parsed=parsed)
    flagged = [
        (f.detail_params["hypothesis"], f.detail_params["part"], f.detail_params["fact"])
        for f in report.findings
    ]
    assert flagged == [(1, "text", "97"), (2, "basis", "09:58")]
    kept = _composed(session, parsed, report, service).allowed_hypotheses
    assert [(h.text, h.basis) for h in kept] == [
        (f"{service} 的 CPU 升至 88", "17.6x"),
        (f"{service} 的 CPU 可能饱和", ""),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(3))
def test_a_hypothesis_in_english_prose_keeps_its_compounds_but_not_an_invented_identifier(
    owner, seed
):
    """Letters joined by hyphens are how English writes a compound ("a knock-on effect",
    "round-trip time"): prose, not a fact; an identifier prose never writes is still one."""
    session, service = _hypothesis_session(owner, seed)
    prose = {
        "hypothesis_text": f"{service}'s callers slowed as a knock-on effect of its CPU",
        "entity": service,
        "basis": "no round-trip time, TCP-level or client-side latency was exported; ratio 17.6x",
    }
    invented = {"hypothesis_text": f"{service} exhausted HikariPool-7", "entity": service}
    camel = {"hypothesis_text": f"{service} exhausted HikariPool-Main", "entity": service}
    parsed = executor_output_parse(executor_json(hypotheses=[prose, invented, camel]))
    report = gatekeeper_run(session=session, parsed=parsed)
    flagged = [
        (f.detail_params["hypothesis"], f.detail_params["part"], f.detail_params["fact"])
        for f in report.findings
        if f.code == "hypothesis_fact_unbound"
    ]
    assert flagged == [(1, "text", "HikariPool-7"), (2, "text", "HikariPool-Main")]
