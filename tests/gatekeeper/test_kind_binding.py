"""A claim's root_cause_kind is bound like its facts: an excerpt about its service shows it.

An adversarial Executor names a kind its evidence does not show (memory over a CPU
series, a pool over a runbook's words, a kind only its own text names, another service's
series): the claim is demoted with ``kind_unbound``, whatever the service is called.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from diagnosis.evidence.vocab import KIND_WORDS, kind_shown
from diagnosis.flow.parsing import executor_output_parse
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.support.gatekeeper import gatekeeper_run

from .conftest import binding, claim, executor_json

pytestmark = pytest.mark.django_db

NAMES = ("payment-service", "svc-7f3a", "ledger_api")
OTHER = "order-service"


def _fleet_output(service: str) -> str:
    return "\n".join(
        (
            "query_metrics (every service) step=60s",
            f'{service} container_cpu_usage_percent{{pod="{service}-0"}}: up since 10:04:00Z, '
            "level 88 vs baseline median 5, ratio 17.6x, anomaly score 41.2",
            f'{service} hikaricp_connections_pending{{pool="main"}}: up since 10:05:00Z, '
            "level 40 vs baseline median 0, anomaly score 12.0",
            f"{OTHER} container_memory_working_set_bytes: up since 10:03:00Z, level 1.9 GiB "
            "vs baseline median 0.9 GiB, ratio 2.1x, anomaly score 30.4",
        )
    )


# a drill-down into the other service: its lines name no service
_OTHER_OUTPUT = (
    f"query_metrics service={OTHER}\n"
    "container_memory_working_set_bytes: up since 10:03:00Z, ratio 2.1x, anomaly score 30.4\n"
)
_RUNBOOK = (
    "=== kb-pool | 连接池耗尽 / 处置 ===\n"
    "当 HikariCP 活跃连接数达到 maximumPoolSize 时，新请求会等待 connectionTimeout 后失败。\n"
)


def _invocation(session, sequence, tool, output, arguments=None, summary=None):
    return ToolInvocation.objects.create(
        session=session,
        sequence=sequence,
        trace_ref=f"trace-{sequence}",
        tool_name=tool,
        status=ToolInvocation.Status.OK,
        arguments=arguments or {},
        output=output,
        output_size=len(output),
        summary=summary or {},
        started_at=timezone.now(),
    )


@pytest.fixture(params=NAMES)
def system(request, owner):
    service = request.param
    env = Environment.objects.create(
        slug=f"kinds-{abs(hash(service)) % 10_000}", name="kinds", services=[service, OTHER]
    )
    session = DiagnosisSession.objects.create(
        owner=owner, environment=env, original_query=f"{service} 变慢了"
    )
    _invocation(session, 1, "query_metrics", _fleet_output(service))
    _invocation(session, 2, "query_metrics", _OTHER_OUTPUT, {"service": OTHER})
    _invocation(
        session,
        3,
        "lookup_knowledge",
        _RUNBOOK,
        {"query": "连接池"},
        {"chunks": [{"chunk_id": "kb-pool", "title": "连接池耗尽", "heading": "处置"}]},
    )
    return session, service


def _cpu(service):
    return binding("trace-1", f"{service} container_cpu_usage_percent")


def _verdict(session, service, kind, bindings, text=None, **extra):
    raw = executor_json(
        claim(
            "c-1",
            bindings,
            claim_type="root_cause",
            claim_text=text or f"{service} 的 container_cpu_usage_percent 升高",
            entity=service,
            root_cause_kind=kind,
            **extra,
        )
    )
    report = gatekeeper_run(session=session, parsed=executor_output_parse(raw))
    result = report.claims[0]
    return result.verdict.value, [f.code for f in result.findings]


def test_a_kind_its_own_series_shows_is_accepted(system):
    session, service = system
    assert _verdict(session, service, "cpu", [_cpu(service)]) == ("accepted", [])


def test_a_kind_its_excerpts_do_not_show_demotes_the_claim(system):
    session, service = system
    verdict, codes = _verdict(session, service, "memory", [_cpu(service)])
    assert verdict == "demoted" and codes == ["kind_unbound"]


def test_the_kind_the_claim_names_in_its_own_words_is_no_evidence(system):
    session, service = system
    text = f"{service} 的 container_cpu_usage_percent 升高，内存耗尽（类型：内存）"
    verdict, codes = _verdict(session, service, "memory", [_cpu(service)], text=text)
    assert verdict == "demoted" and "kind_unbound" in codes


def test_a_runbook_chunk_cannot_show_what_ran_out(system):
    session, service = system
    runbook = binding(
        "kb-pool", "HikariCP 活跃连接数达到 maximumPoolSize", source_type="lookup_evidence_block"
    )
    verdict, codes = _verdict(session, service, "resource_exhaustion", [_cpu(service), runbook])
    assert verdict == "demoted" and codes == ["kind_unbound"]
    pending = binding("trace-1", f"{service} hikaricp_connections_pending")
    assert _verdict(session, service, "resource_exhaustion", [_cpu(service), pending]) == (
        "accepted",
        [],
    )


def test_another_services_series_cannot_show_the_kind(system):
    session, service = system
    # a line of the fleet view naming the other service
    theirs = binding("trace-1", f"{OTHER} container_memory_working_set_bytes")
    verdict, codes = _verdict(session, service, "memory", [_cpu(service), theirs])
    assert verdict == "demoted" and codes == ["kind_unbound"]
    # a drill-down into the other service, whose lines name no service
    drilled = binding("trace-2", "container_memory_working_set_bytes: up since 10:03:00Z")
    verdict, codes = _verdict(session, service, "memory", [_cpu(service), drilled])
    assert verdict == "demoted" and codes == ["kind_unbound"]


def test_the_second_kind_needs_no_excerpt_of_its_own(system):
    # "cpu or network": said because no series could rule network out, which nothing shows
    session, service = system
    alternative = {"root_cause_kind_alternative": "network"}
    assert _verdict(session, service, "cpu", [_cpu(service)], **alternative) == ("accepted", [])


def test_a_claim_without_a_kind_is_not_asked_for_one(system):
    session, service = system
    assert _verdict(session, service, None, [_cpu(service)]) == ("accepted", [])


@pytest.mark.parametrize("kind", sorted(KIND_WORDS))
def test_every_kind_is_unshown_by_text_of_no_family_and_shown_by_its_own_words(kind):
    assert not kind_shown(kind, "svc-1 widget_total: level 3 vs baseline median 3")
    assert kind_shown(kind, f"svc-1 {KIND_WORDS[kind][0]}: level 3")
    # its naming of itself is removed first
    assert not kind_shown(kind, f"svc-1 level 3（类型：{KIND_WORDS[kind][0]}）")
