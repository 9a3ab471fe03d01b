"""The true-claim corpus: realistic tool outputs, and claims built only from their own facts.

Each entry is output written the way the tool named in it writes it (the source
is noted per entry: tool and format). Property: any claim built only from facts
of the quoted excerpt (as the excerpt writes them, or as people restate them:
``42 次`` for ``(x42 over 12m)``, ``2026-05-04 09:12`` for a timestamp) is
accepted. Adversarial twins (one digit changed, a date shifted, a pod name the
filter did not name) are still refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnosis.facts import FactKind, facts_extract
from diagnosis.flow.gatekeeper import InvocationRecord, gatekeeper_check
from diagnosis.flow.parsing import executor_output_parse

SESSION = 30
SERVICES = ["payment-service", "checkout", "frontend", "order-service", "cart"]


@dataclass(frozen=True)
class Entry:
    source: str  # tool and format the output is written in
    tool: str
    output: str
    excerpt: str
    arguments: dict = field(default_factory=dict)
    restated: tuple[str, ...] = ()  # the excerpt's facts as people restate them


CORPUS = [
    Entry(
        "kubectl get events (query_logs over the event stream)",
        "query_logs",
        "LAST SEEN   TYPE      REASON    OBJECT                          MESSAGE\n"
        "2m          Warning   BackOff   pod/checkout-5c9d7b-qx2lp       Back-off restarting "
        "failed container checkout in pod checkout-5c9d7b-qx2lp (x42 over 12m)\n"
        "7m          Normal    Pulled    pod/checkout-5c9d7b-qx2lp       Container image "
        '"registry.local/checkout:v2.13.9" already present on machine\n',
        "Back-off restarting failed container checkout in pod checkout-5c9d7b-qx2lp (x42 over 12m)",
        {"service": "checkout", "query": "BackOff"},
        ("42 次", "42 times", "12m"),
    ),
    Entry(
        "kubectl describe node: Allocated resources",
        "query_logs",
        "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n"
        "  Resource           Requests      Limits\n  --------           --------      ------\n"
        "  cpu                1850m (92%)   3200m (160%)\n"
        "  memory             2174Mi (57%)  4096Mi (108%)\n",
        "memory             2174Mi (57%)  4096Mi (108%)",
        {"query": "node-pool-b-7"},
        ("2174Mi", "57%", "108%", "node-pool-b-7"),
    ),
    Entry(
        "kubectl describe pod: Last State and Events",
        "query_logs",
        "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
        "      Started:      Mon, 04 May 2026 09:10:02 +0000\n"
        "      Finished:     Mon, 04 May 2026 09:12:41 +0000\n    Restart Count:  9\n",
        "Reason:       OOMKilled\n      Exit Code:    137\n      Started:      "
        "Mon, 04 May 2026 09:10:02 +0000",
        {"service": "cart", "query": "cart-6f8b9-zz4k1"},
        ("2026-05-04", "09:10", "09:10:02", "cart-6f8b9-zz4k1", "cart"),
    ),
    Entry(
        "JVM logback log line (Spring Boot, HikariCP)",
        "query_logs",
        "2026-05-04 09:12:41.207 WARN 1 --- [nio-8080-exec-7] com.zaxxer.hikari.pool.HikariPool : "
        "HikariPool-1 - Connection is not available, request timed out after 30000ms.\n"
        "2026-05-04 09:12:43.911 ERROR 1 --- [nio-8080-exec-2] o.h.e.j.s.SqlExceptionHelper"
        " : ORA-00060: deadlock detected while waiting for resource\n",
        "2026-05-04 09:12:41.207 WARN 1 --- [nio-8080-exec-7] com.zaxxer.hikari.pool.HikariPool : "
        "HikariPool-1 - Connection is not available, request timed out after 30000ms",
        {"service": "payment-service", "level": "WARN"},
        ("2026-05-04 09:12", "09:12:41", "2026年5月4日", "payment-service"),
    ),
    Entry(
        "JVM log4j line with comma milliseconds",
        "query_logs",
        "2026-05-04 09:13:05,118 ERROR [grpc-default-executor-3] OrderClient - "
        "UNAVAILABLE: io exception calling order-service after 3 attempts\n",
        "2026-05-04 09:13:05,118 ERROR [grpc-default-executor-3] OrderClient - "
        "UNAVAILABLE: io exception calling order-service after 3 attempts",
        {"service": "checkout"},
        ("09:13", "09:13:05", "2026-05-04", "checkout"),
    ),
    Entry(
        "Go logfmt line (Loki, label set in front)",
        "query_logs",
        '{app="frontend",pod="frontend-7d9f8-x2k"} ts=2026-05-04T09:14:22.031Z level=error '
        'msg="upstream request failed" upstream=cart status=504 latency_ms=2981\n',
        'ts=2026-05-04T09:14:22.031Z level=error msg="upstream request failed" '
        "upstream=cart status=504 latency_ms=2981",
        {"service": "frontend", "query": "frontend-7d9f8-x2k"},
        ("09:14", "09:14:22", "2026-05-04", "frontend-7d9f8-x2k", "504", "frontend"),
    ),
    Entry(
        "Go standard log (net/http)",
        "query_logs",
        "2026/05/04 09:15:00 http: TLS handshake error from 10.42.3.17:51234: EOF\n",
        "2026/05/04 09:15:00 http: TLS handshake error from 10.42.3.17:51234: EOF",
        {"service": "frontend"},
        ("2026-05-04 09:15", "frontend"),
    ),
    Entry(
        "nginx access log (combined format)",
        "query_logs",
        '10.42.0.9 - - [04/May/2026:09:16:31 +0000] "POST /api/checkout HTTP/1.1" 502 157 '
        '"-" "k6/0.49.0" rt=3.004\n',
        '10.42.0.9 - - [04/May/2026:09:16:31 +0000] "POST /api/checkout HTTP/1.1" 502 157',
        {"service": "frontend"},
        ("2026-05-04", "09:16", "09:16:31", "502"),
    ),
    Entry(
        "Prometheus instant vector (query_metrics text)",
        "query_metrics",
        'http_server_requests_seconds:p99{service="checkout",route="/pay"} 2.481 @ '
        "2026-05-04T09:15:00Z\n"
        'http_server_requests_seconds:p99{service="checkout",route="/cart"} 0.212 @ '
        "2026-05-04T09:15:00Z\n",
        'http_server_requests_seconds:p99{service="checkout",route="/pay"} 2.481 @ '
        "2026-05-04T09:15:00Z",
        {"service": "checkout", "metric": "http_server_requests_seconds:p99"},
        ("2.481", "09:15", "2026-05-04", "checkout", "p99"),
    ),
    Entry(
        "query_metrics series summary (window against baseline)",
        "query_metrics",
        "series container_memory_working_set_bytes{pod=cart-6f8b9-zz4k1}: baseline 412.5 MiB, "
        "window max 1,023.9 MiB at 09:12, 3 of 3 replicas above limit\n",
        "container_memory_working_set_bytes{pod=cart-6f8b9-zz4k1}: baseline 412.5 MiB, "
        "window max 1,023.9 MiB at 09:12, 3 of 3 replicas above limit",
        {"service": "cart", "metric": "container_memory_working_set_bytes"},
        ("412.5", "1023.9", "1,023.9", "09:12", "3 of 3", "cart"),
    ),
    Entry(
        "query_metrics fact line (this product's tool: a shift after an earlier spike)",
        "query_metrics",
        "cart worker_queue_depth: up since 2026-03-02T10:12:00Z until 2026-03-02T10:27:00Z, "
        "level 4.15 over 16 window points vs baseline median 1, ratio 4.15x, anomaly score "
        "21.25; window max 9 at 2026-03-02T10:01:00Z, window min 1, max since the change 4.5 "
        "at 2026-03-02T10:14:00Z, window mean 2.97, baseline mean 1 over 30 points\n",
        "level 4.15 over 16 window points vs baseline median 1, ratio 4.15x, anomaly score "
        "21.25; window max 9 at 2026-03-02T10:01:00Z, window min 1, max since the change 4.5 "
        "at 2026-03-02T10:14:00Z",
        {"service": "cart", "metric": "worker_queue_depth"},
        ("4.15 倍", "4.5（10:14）", "变化后最大值 4.5", "10:01", "2026-03-02 10:14", "cart"),
    ),
    Entry(
        "trace span tree (query_traces, one trace)",
        "query_logs",
        "trace 4bf92f3577b34da6a3ce929d0e0e4736\n"
        "  frontend GET /checkout 3021.4ms status=error\n"
        "    checkout POST /pay 2990.2ms status=error\n"
        "      payment-service Charge 2987.9ms status=error error=DEADLINE_EXCEEDED\n",
        "checkout POST /pay 2990.2ms status=error\n"
        "      payment-service Charge 2987.9ms status=error error=DEADLINE_EXCEEDED",
        {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
        ("2990.2ms", "2987.9ms", "4bf92f3577b34da6a3ce929d0e0e4736", "payment-service"),
    ),
]


def _records() -> list[InvocationRecord]:
    return [
        InvocationRecord(n + 1, SESSION, f"trace-{n + 1}", e.tool, "ok", e.output, {}, e.arguments)
        for n, e in enumerate(CORPUS)
    ]


def _judge(entry_index: int, text: str):
    entry = CORPUS[entry_index]
    raw = json.dumps(
        {
            "answer_version": "executor_evidence_v2",
            "claims": [
                {
                    "claim_id": "claim-1",
                    "claim_type": "symptom",
                    "claim_text": text,
                    "support_level": "direct",
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": f"trace-{entry_index + 1}",
                            "tool_name": entry.tool,
                            "evidence_excerpt": entry.excerpt,
                        }
                    ],
                }
            ],
        },
        ensure_ascii=False,
    )
    report = gatekeeper_check(
        parsed=executor_output_parse(raw),
        invocations=_records(),
        session_id=SESSION,
        services=SERVICES,
    )
    [result] = report.claims
    return result


def _own_facts(entry: Entry) -> list[str]:
    written = [f.text for f in facts_extract(entry.excerpt, services=SERVICES)]
    return list(dict.fromkeys([*written, *entry.restated]))


FILLER = st.sampled_from([" ", "、", "； ", ", ", " and ", " 和 ", "： ", " at ", " 在 "])


@st.composite
def true_claims(draw):
    index = draw(st.integers(0, len(CORPUS) - 1))
    facts = _own_facts(CORPUS[index])
    chosen = draw(st.lists(st.sampled_from(facts), min_size=1, max_size=5))
    lead = draw(st.sampled_from(["", "观察到 ", "The output shows ", "日志显示："]))
    parts = [lead]
    for fact in chosen:
        parts.extend([fact, draw(FILLER)])
    return index, "".join(parts).strip()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(true_claims())
def test_every_claim_built_only_from_its_excerpts_own_facts_is_accepted(case):
    index, text = case
    result = _judge(index, text)
    assert result.verdict == "accepted", (CORPUS[index].source, text, result.findings)


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=[e.source for e in CORPUS])
def test_each_entry_states_every_one_of_its_facts_at_once(index):
    text = "；".join(_own_facts(CORPUS[index]))
    assert _judge(index, text).verdict == "accepted", text


def _digit_changed(fact: str) -> str:
    match = re.search(r"\d(?=\D*$)", fact)
    if match is None:
        return fact
    digit = str((int(match.group(0)) + 1) % 10)
    return fact[: match.start()] + digit + fact[match.end() :]


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=[e.source for e in CORPUS])
def test_a_twin_with_one_digit_changed_is_refused(index):
    for fact in facts_extract(CORPUS[index].excerpt, services=SERVICES):
        if fact.kind in (FactKind.SERVICE,) or not re.search(r"\d", fact.text):
            continue
        twin = _digit_changed(fact.text)
        if any(twin == f.text for f in facts_extract(CORPUS[index].excerpt)):
            continue
        result = _judge(index, f"观察到 {twin}")
        assert result.verdict == "demoted", (CORPUS[index].source, fact.text, twin)
        assert {f.code for f in result.findings} == {"claim_fact_unbound"}


@pytest.mark.parametrize(
    "index", [i for i, e in enumerate(CORPUS) if "2026" in e.excerpt or "May" in e.excerpt]
)
def test_a_twin_with_the_date_shifted_is_refused(index):
    for shifted in ("2026-05-03", "2026-05-05", "2026年5月5日", "2025-05-04"):
        assert _judge(index, f"{shifted} 开始报错").verdict == "demoted", shifted


@pytest.mark.parametrize("index", [2, 5], ids=["describe pod", "logfmt"])
def test_a_twin_naming_a_pod_the_filter_did_not_name_is_refused(index):
    named = CORPUS[index].arguments["query"]
    for twin in (named[:-1] + ("a" if named[-1] != "a" else "b"), named + "-2", "x" + named):
        result = _judge(index, f"{twin} 报错")
        assert result.verdict == "demoted", twin
        assert [f.fact for f in result.findings] == [twin]
