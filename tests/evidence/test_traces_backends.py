"""query_traces against Jaeger (v1 JSON and v2 OTLP/JSON) and Tempo.

Neither Jaeger nor Tempo can be installed here, so these are protocol tests: a loopback
server answers in the shapes their API documentation gives (Jaeger's ``{"data": [...]}``
traces with ``processes`` and ``references``, v2's ``{"result": {"resourceSpans"}}``,
Tempo's search ``{"traces": [{"traceID"}]}`` and trace ``{"batches"}`` with base64 ids),
serving the same spans the files tests use; each honours ``limit`` as the real ones do.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_traces import live
from diagnosis.evidence.tools.query_traces.live import traceql
from diagnosis.evidence.tools.query_traces.scan import TraceFilter
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.evidence.tracebuilder import chain_lines

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
END = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
CHANGE = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
SERVICES = ["front", "mid", "back"]


def _traces() -> dict[str, list[tuple[str, dict]]]:
    """trace id -> [(service, OTLP span)] of the chain where ``back`` turns slow."""
    out: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for line in chain_lines(
        SERVICES, start=START, end=END, change_at=CHANGE, slow="back", every_s=30
    ):
        for resource in json.loads(line)["resourceSpans"]:
            service = resource["resource"]["attributes"][0]["value"]["stringValue"]
            for span in resource["scopeSpans"][0]["spans"]:
                out[span["traceId"]].append((service, span))
    return out


TRACES = _traces()


def _start_us(spans) -> int:
    return min(int(s["startTimeUnixNano"]) for _, s in spans) // 1000


def _jaeger(trace_id: str, spans) -> dict:
    processes = {f"p{i}": {"serviceName": name} for i, name in enumerate(SERVICES)}
    return {
        "traceID": trace_id,
        "processes": processes,
        "spans": [
            {
                "traceID": trace_id,
                "spanID": s["spanId"],
                "operationName": s["name"],
                "references": [
                    {"refType": "CHILD_OF", "traceID": trace_id, "spanID": s["parentSpanId"]}
                ]
                if s.get("parentSpanId")
                else [],
                "startTime": int(s["startTimeUnixNano"]) // 1000,
                "duration": (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) // 1000,
                "tags": [{"key": "span.kind", "type": "string", "value": "server"}],
                "processID": f"p{SERVICES.index(service)}",
            }
            for service, s in spans
        ],
    }


def _otlp(spans, *, b64: bool = False) -> list[dict]:
    by_service = defaultdict(list)
    for service, span in spans:
        span = dict(span)
        if b64:
            for key in ("traceId", "spanId", "parentSpanId"):
                if span.get(key):
                    span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        by_service[service].append(span)
    return [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": name}}]},
            "scopeSpans": [{"spans": spans}],
        }
        for name, spans in by_service.items()
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        url = urlparse(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.requests.append((url.path, params))
        if self.server.delay:
            time.sleep(self.server.delay)
        if self.server.status != 200:
            return self._send(self.server.status, {"errors": [{"msg": "backend broke"}]})
        body = self.server.answer(url.path, params)
        if body is None:
            return self._send(404, {"error": "not found"})
        self._send(200, body)

    def _send(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict]] = []
        self.status = 200
        self.delay = 0.0

    def _in(self, start_us: int, end_us: int, service: str, limit: int) -> list[str]:
        ids = [
            t
            for t, spans in TRACES.items()
            if start_us <= _start_us(spans) < end_us
            and (not service or any(name == service for name, _ in spans))
        ]
        ids.sort(key=lambda t: -_start_us(TRACES[t]))  # newest first, as the stores answer
        return ids[:limit]

    def answer(self, path: str, q: dict):
        if path == "/api/services":
            return {"data": SERVICES, "total": 3}
        if path == "/api/v3/services":
            return {"services": SERVICES}
        if path == "/api/dependencies":
            return {"data": [{"parent": "front", "child": "mid", "callCount": 9}]}
        if path == "/api/traces" and "service" in q:
            ids = self._in(int(q["start"]), int(q["end"]), q["service"], int(q["limit"]))
            return {"data": [_jaeger(t, TRACES[t]) for t in ids]}
        if path == "/api/v3/traces":
            start = int(datetime.fromisoformat(q["query.start_time_min"]).timestamp() * 1e6)
            end = int(datetime.fromisoformat(q["query.start_time_max"]).timestamp() * 1e6)
            ids = self._in(start, end, q["query.service_name"], int(q["query.num_traces"]))
            return {"result": {"resourceSpans": [r for t in ids for r in _otlp(TRACES[t])]}}
        if path == "/api/search":
            ids = self._in(int(q["start"]) * 10**6, int(q["end"]) * 10**6, "", int(q["limit"]))
            return {"traces": [{"traceID": t, "rootServiceName": "front"} for t in ids]}
        trace_id = path.rsplit("/", 1)[-1]
        if path.startswith("/api/v3/traces/") and trace_id in TRACES:
            return {"result": {"resourceSpans": _otlp(TRACES[trace_id])}}
        if path.startswith("/api/traces/") and trace_id in TRACES:
            if self.kind == "tempo":
                return {"batches": _otlp(TRACES[trace_id], b64=True)}
            return {"data": [_jaeger(trace_id, TRACES[trace_id])]}
        return None


@pytest.fixture
def server():
    running = _Server()
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    yield running
    running.shutdown()
    running.server_close()


def _session(owner, server, kind, **extra):
    server.kind = kind
    environment = Environment.objects.create(
        slug=f"live-{kind}",
        name=kind,
        kind=Environment.Kind.LIVE,
        services=SERVICES,
        traces_url=f"http://127.0.0.1:{server.server_address[1]}",
        traces_kind=kind,
        **extra,
    )
    return DiagnosisSession.objects.create(
        owner=owner,
        environment=environment,
        original_query="back 为什么慢",
        context={
            "now": "2026-03-02T10:40:00Z",
            "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
        },
    )


def _call(session, **arguments):
    result = tool_invoke(session=session, attempt=1, tool_name="query_traces", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


@pytest.mark.parametrize("kind", ["jaeger", "jaeger_v2", "tempo"])
def test_the_fleet_view_from_each_backend_ranks_the_slow_callee_first(
    db, owner, server, kind, monkeypatch
):
    # Tempo's traces are read one by one, at most TEMPO_FETCH_MAX a period: a sample of 40
    # newest traces a period leaves a 4-point baseline the statistic damps (see the next test)
    monkeypatch.setattr(live, "TEMPO_FETCH_MAX", 100)
    row = _call(_session(owner, server, kind))
    assert row.status == "ok", row.output
    assert row.summary["services"][0]["service"] == "back"
    assert {s["service"]: s["waiting"] for s in row.summary["services"]} == {
        "back": False,
        "mid": True,
        "front": True,
    }
    assert "window and baseline asked separately" in row.output


def test_a_thin_sample_is_said_and_ranks_no_one(db, owner, server):
    row = _call(_session(owner, server, "tempo"))
    assert "sampled from Tempo: 80 traces fetched" in row.output
    assert all(s["score"] == 0 for s in row.summary["services"])


def test_jaeger_is_asked_per_service_and_period_with_a_limit(db, owner, server):
    _call(_session(owner, server, "jaeger"))
    searches = [q for path, q in server.requests if path == "/api/traces"]
    assert sorted({q["service"] for q in searches}) == sorted(SERVICES)
    assert len(searches) == 6  # 3 services x (baseline, window)
    assert {q["limit"] for q in searches} == {"100"}
    window = [
        q
        for q in searches
        if q["start"] == str(int(datetime(2026, 3, 2, 10, tzinfo=UTC).timestamp() * 1e6))
    ]
    assert len(window) == 3
    assert (
        "/api/dependencies",
        {"endTs": "1772448000000", "lookback": "9600000"},
    ) in server.requests


def test_jaeger_dependencies_join_the_call_graph(db, owner, server):
    row = _call(_session(owner, server, "jaeger"))
    graph = {(g["caller"], c) for g in row.summary["graph"] for c in g["callees"]}
    assert ("front", "mid") in graph and ("mid", "back") in graph


def test_the_baseline_is_a_sample_when_the_store_caps_it(db, owner, server):
    row = _call(_session(owner, server, "jaeger"))
    front = next(s for s in row.summary["services"] if s["service"] == "front")
    assert front["requests_baseline"] == 100  # 240 baseline traces, 100 per query
    assert front["requests_window"] == 80


@pytest.mark.parametrize("kind", ["jaeger", "jaeger_v2", "tempo"])
def test_a_trace_by_id_is_its_span_tree(db, owner, server, kind):
    trace_id = sorted(TRACES)[-1]
    row = _call(_session(owner, server, kind), trace_id=trace_id)
    assert row.status == "ok", row.output
    assert f"trace {trace_id}: 3 spans, 3 services" in row.output


def test_tempo_is_searched_with_traceql_and_its_base64_ids_read(db, owner, server):
    row = _call(_session(owner, server, "tempo"), service="mid")
    assert row.status == "ok", row.output
    searches = [q for path, q in server.requests if path == "/api/search"]
    assert searches and all(q["q"] == '{ resource.service.name = "mid" }' for q in searches)
    assert len([p for p, _ in server.requests if p.startswith("/api/traces/")]) <= 80


def test_traceql_quotes_what_it_is_given():
    shown = TraceFilter(service='a"b', operation="GET /x")
    assert traceql(shown, 'a"b') == '{ resource.service.name = "a\\"b" && name = "GET /x" }'
    assert traceql(TraceFilter(), "") == "{ }"


def test_a_backend_error_is_an_error_row_naming_it(db, owner, server):
    server.status = 500
    row = _call(_session(owner, server, "jaeger_v2"))
    assert row.status == "error"
    assert "Jaeger v2" in row.error and "HTTP 500" in row.error


def test_a_slow_backend_is_a_timeout_row(db, owner, server):
    server.delay = 1.0
    row = _call(_session(owner, server, "tempo", traces_timeout_seconds=0.3))
    assert row.status == "timeout"


def test_the_token_is_sent_from_the_environment_variable(db, owner, server, monkeypatch):
    seen = []
    original = _Handler.do_GET

    def spy(handler):
        seen.append(handler.headers.get("Authorization"))
        original(handler)

    monkeypatch.setattr(_Handler, "do_GET", spy)
    monkeypatch.setenv("TRACES_TOKEN", "s3cret")
    _call(
        _session(owner, server, "jaeger", traces_token_env="TRACES_TOKEN"),
        trace_id=sorted(TRACES)[0],
    )
    assert seen and set(seen) == {"Bearer s3cret"}


def test_a_live_environment_without_a_trace_backend_is_a_gap(db, owner):
    environment = Environment.objects.create(slug="bare", name="bare", kind=Environment.Kind.LIVE)
    session = DiagnosisSession.objects.create(
        owner=owner, environment=environment, original_query="?"
    )
    row = _call(session)
    assert row.status == "no_data" and row.summary["missing_source"] == "traces"


def test_jaeger_asks_the_services_nobody_calls_first():
    calls = {("gw", "a"), ("a", "b"), ("zz-entry", "b")}
    assert live._entries_first(["a", "b", "gw", "zz-entry"], calls) == ["gw", "zz-entry", "a", "b"]
