"""query_logs through the Loki HTTP API.

Loki cannot run here, so this is a protocol test: a loopback server answers
``/loki/api/v1/query_range`` in Loki's documented ``streams`` format (newest lines first,
at most ``limit``) and ``/loki/api/v1/query`` for ``sum(count_over_time(...))`` in the
``vector`` format, with Loki's range semantics ``(time - range, time]``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from diagnosis.evidence.common import Deadline, QueryWindow
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_logs import loki as loki_backend
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.loki import logql_build, logql_count_build, loki_count
from diagnosis.models import ToolInvocation
from tests.support.observability_stubs import observability_stub_running

BASE = 1772445600  # 2026-03-02T10:00:00Z


def _entries():
    """(unix seconds, stream labels, line): a steady INFO line and a new ERROR after 10:19."""
    out = []
    for minute in range(-120, 40):
        ts = BASE + minute * 60
        out.append((ts, {"service": "pay", "level": "info"}, f"POST /pay 200 {minute % 9 + 10}ms"))
        if minute >= 19:
            line = json.dumps(
                {
                    "level": "ERROR",
                    "message": "Connection is not available, "
                    f"request timed out after {30000 + minute}ms",
                }
            )
            out.append((ts + 5, {"service": "pay"}, line))
    return out


_FILTER = re.compile(r'(\|=|\|~) ("(?:[^"\\]|\\.)*")')
_COUNT = re.compile(r"^sum\(count_over_time\((.*) \[(\d+)(ms|s|m|h)\]\)\)$")
_UNIT_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _line_filters(logql: str) -> list[tuple[str, str]]:
    """The line filters of a LogQL log query, their strings decoded as LogQL does."""
    return [(op, json.loads(text)) for op, text in _FILTER.findall(logql)]


def _matching(logql: str):
    """(ns, labels, line) of the entries the log query's line filters keep, oldest first."""
    filters = _line_filters(logql)
    for ts, labels, line in _entries():
        if all(
            (text in line) if op == "|=" else re.search(text, line) is not None
            for op, text in filters
        ):
            yield ts * 1_000_000_000, labels, line


class LokiStub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Loki speaks
    disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall per reused call
    requests: list[dict] = []
    connections = 0
    delay = 0.0
    count_status = 200

    def setup(self):
        type(self).connections += 1  # one handler per accepted TCP connection
        super().setup()

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).requests.append(
            {"path": url.path, "params": params, "headers": dict(self.headers)}
        )
        if self.delay:
            time.sleep(self.delay)
        if url.path == "/loki/api/v1/query_range":
            body = self._streams(params)
        elif url.path == "/loki/api/v1/query":
            if self.count_status != 200:
                self._send(self.count_status, b"too many outstanding requests")
                return
            body = self._vector(params)
            if body is None:
                self._send(400, b"parse error: not a count query")
                return
        else:
            self._send(404, b"")
            return
        self._send(200, json.dumps(body).encode(), "application/json")

    def _send(self, status, payload, content_type="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    @staticmethod
    def _streams(params):
        start, end, limit = int(params["start"]), int(params["end"]), int(params["limit"])
        kept = [e for e in _matching(params["query"]) if start <= e[0] < end]
        kept = sorted(kept, key=lambda e: -e[0])[:limit]  # direction=backward
        streams: dict[str, dict] = {}
        for ns, labels, line in kept:
            key = json.dumps(labels, sort_keys=True)
            streams.setdefault(key, {"stream": labels, "values": []})["values"].append(
                [str(ns), line]
            )
        return {
            "status": "success",
            "data": {"resultType": "streams", "result": list(streams.values()), "stats": {}},
        }

    @staticmethod
    def _vector(params):
        match = _COUNT.match(params["query"])
        if match is None:
            return None
        inner, amount, unit = match.groups()
        at = int(params["time"])
        since = at - int(amount) * _UNIT_NS[unit]
        count = sum(1 for ns, _, _ in _matching(inner) if since < ns <= at)
        result = [{"metric": {}, "value": [at / 1e9, str(count)]}] if count else []
        return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.fixture
def loki(live_environment, monkeypatch):
    LokiStub.requests = []
    LokiStub.connections = 0
    LokiStub.delay = 0.0
    LokiStub.count_status = 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), LokiStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    live_environment.loki_url = f"http://127.0.0.1:{server.server_address[1]}"
    live_environment.loki_tenant = "team-a"
    live_environment.loki_token_env = "ROOTPROOF_TEST_LOKI_TOKEN"
    live_environment.save()
    monkeypatch.setenv("ROOTPROOF_TEST_LOKI_TOKEN", "s3cret")
    yield LokiStub
    server.shutdown()
    server.server_close()


def _logs(session, **arguments):
    result = tool_invoke(session=session, attempt=1, tool_name="query_logs", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


def test_logql_is_built_from_the_arguments():
    def build(**kwargs):
        return logql_build(LogFilter.build(**kwargs))

    assert build(service="pay", query="timed out", level=None) == '{service="pay"} |= "timed out"'
    assert (
        build(service="pay", query=r"/after \d+ms/", level=None)
        == '{service="pay"} |~ "after \\\\d+ms"'
    )
    assert build(service=None, query=None, level="warning") == (
        '{service=~".+"} |~ "(?i)(warn|warning)"'
    )
    assert build(service='we"ird', query='say "hi"', level="ERROR") == (
        '{service="we\\"ird"} |= "say \\"hi\\"" |~ "(?i)(error|err)"'
    )


def test_loki_lines_are_clustered_with_window_and_baseline_counts(live_session, loki):
    row = _logs(live_session, service="pay")
    assert row.status == "ok"
    windows = [r["params"] for r in loki.requests]
    assert [w["query"] for w in windows] == ['{service="pay"}', '{service="pay"}']
    assert all(r["headers"]["X-Scope-OrgID"] == "team-a" for r in loki.requests)
    assert all(r["headers"]["Authorization"] == "Bearer s3cret" for r in loki.requests)
    assert int(windows[0]["end"]) <= int(windows[1]["start"])
    assert windows[1]["limit"] == "5000"
    top = row.summary["templates"][0]
    assert top["level"] == "ERROR"
    assert top["is_new"] is True
    assert top["count_window"] == 21
    assert top["first_seen"] == "2026-03-02T10:19:05Z"
    assert top["samples"][0] == (
        "2026-03-02T10:19:05Z pay ERROR Connection is not available, "
        "request timed out after 30019ms"
    )
    steady = row.summary["templates"][1]
    assert steady["level"] == "INFO"
    assert steady["count_window"] == 40
    assert steady["count_baseline"] == 120
    assert 'LogQL: {service="pay"}' in row.output


def test_the_query_and_level_reach_loki_and_are_checked_on_each_line(live_session, loki):
    row = _logs(live_session, service="pay", query="timed out", level="ERROR")
    assert loki.requests[0]["params"]["query"] == (
        '{service="pay"} |= "timed out" |~ "(?i)(error|err)"'
    )
    assert [t["level"] for t in row.summary["templates"]] == ["ERROR"]


def test_query_logs_calls_share_one_connection_and_send_a_rotated_token(
    live_session, loki, monkeypatch
):
    _logs(live_session, service="pay")
    monkeypatch.setenv("ROOTPROOF_TEST_LOKI_TOKEN", "rotated")
    _logs(live_session, service="pay", query="timed out")
    assert [r["headers"]["Authorization"] for r in loki.requests] == [
        "Bearer s3cret",
        "Bearer s3cret",
        "Bearer rotated",
        "Bearer rotated",
    ]
    assert loki.connections == 1


def test_a_loki_that_is_down_gives_an_error_invocation(live_session, live_environment):
    live_environment.loki_url = "http://127.0.0.1:9"
    live_environment.save()
    row = _logs(live_session, service="pay")
    assert row.status == "error"
    assert "cannot reach Loki at http://127.0.0.1:9" in row.output


def test_a_slow_loki_gives_a_timeout_within_the_tool_timeout(live_session, loki, settings):
    settings.TOOL_TIMEOUT_SECONDS = 0.3
    loki.delay = 2.0
    row = _logs(live_session, service="pay")
    assert row.status == "timeout"
    assert "did not answer within 0.3s" in row.output


def test_an_environment_without_a_loki_url_says_so(live_session):
    row = _logs(live_session, service="pay")
    assert row.status == "no_data"
    assert "no logs source configured for environment live" in row.output


def test_the_count_query_is_built_with_logql_escaping():
    logql = logql_build(LogFilter.build(service='we"ird', query='say "hi" in C:\\tmp', level=None))
    assert logql_count_build(logql, 1_800_000) == (
        'sum(count_over_time({service="we\\"ird"} |= "say \\"hi\\" in C:\\\\tmp" [30m]))'
    )
    assert logql_count_build('{service="pay"}', 7_200_000).endswith("[2h]))")
    assert logql_count_build('{service="pay"}', 2_400_001).endswith("[2400001ms]))")
    # The string filter decodes back to the text asked for, quotes and backslashes intact.
    assert _line_filters(logql) == [("|=", 'say "hi" in C:\\tmp')]


def test_a_count_query_reaches_loki_as_an_instant_metric_query(live_environment, loki):
    logql = logql_build(LogFilter.build(service="pay", query='"ERROR", "message"', level=None))
    count = loki_count(
        base_url=live_environment.loki_url,
        headers={},
        logql=logql,
        start=BASE,
        end=BASE + 40 * 60,
        deadline=Deadline.after(5),
    )
    assert count == 21  # the quoted text matches the raw JSON lines of the new error
    [request] = loki.requests
    assert request["path"] == "/loki/api/v1/query"
    assert request["params"]["query"] == (
        'sum(count_over_time({service="pay"} |= "\\"ERROR\\", \\"message\\"" [40m]))'
    )
    # Evaluated 1 ms before the end: (start - 1 ms, end - 1 ms] is [start, end).
    assert request["params"]["time"] == str((BASE + 40 * 60) * 1_000_000_000 - 1_000_000)


def test_past_the_line_limit_the_totals_are_loki_exact_counts(live_session, loki, monkeypatch):
    monkeypatch.setattr(loki_backend, "LOKI_MAX_LINES", 50)
    row = _logs(live_session, service="pay")
    assert row.status == "ok"
    counts = [r["params"] for r in loki.requests if r["path"] == "/loki/api/v1/query"]
    assert [c["query"] for c in counts] == [
        'sum(count_over_time({service="pay"} [2h]))',
        'sum(count_over_time({service="pay"} [2400001ms]))',
    ]
    assert row.summary["total_window"] == 61  # 40 INFO and 21 ERROR lines; 50 came back
    assert row.summary["total_baseline"] == 120
    assert "totals: 61 lines in the window, 120 lines in the baseline, 2 templates" in row.output
    assert "lower bounds" in row.output  # the templates' counts come from the lines returned
    assert "the window total is Loki's exact count (count_over_time)" in row.output
    assert "Loki returned 50 of the 120 matching lines for the baseline" in row.output
    top = row.summary["templates"][0]
    assert (top["level"], top["count_window"]) == ("ERROR", 21)


def test_a_failing_count_query_falls_back_to_lower_bounds(live_session, loki, monkeypatch):
    monkeypatch.setattr(loki_backend, "LOKI_MAX_LINES", 50)
    loki.count_status = 429
    row = _logs(live_session, service="pay")
    assert row.status == "ok"
    assert row.summary["total_window"] == 50
    assert row.summary["total_baseline"] == 50
    assert "totals: 50 lines in the window (INFO 29, ERROR 21), 50 lines in the baseline" in (
        row.output
    )
    assert (
        "Loki returned its limit of 50 lines for the window; counts there are lower bounds"
        in row.output
    )
    assert "the count query failed: Loki rejected the query" in row.output


def test_with_a_level_the_loki_count_is_only_an_upper_bound(live_session, loki, monkeypatch):
    monkeypatch.setattr(loki_backend, "LOKI_MAX_LINES", 10)
    row = _logs(live_session, service="pay", level="ERROR")
    assert row.summary["total_window"] == 10
    assert "counts there are lower bounds (Loki counts 21 lines matching the LogQL" in row.output


def test_below_the_line_limit_no_count_query_is_made(live_session, loki):
    row = _logs(live_session, service="pay")
    assert {r["path"] for r in loki.requests} == {"/loki/api/v1/query_range"}
    assert row.summary["total_window"] == 61
    assert "lower bounds" not in row.output


def test_the_shared_observability_stub_answers_count_queries(monkeypatch):
    monkeypatch.setattr(loki_backend, "LOKI_MAX_LINES", 20)
    end = datetime.fromtimestamp(BASE, UTC)
    window = QueryWindow.around(start=end - timedelta(minutes=40), end=end)
    with observability_stub_running() as stub:
        result = loki_backend.logs_from_loki(
            base_url=stub.url,
            token_env="",
            tenant="",
            log_filter=LogFilter.build(service=None, query=None, level=None),
            window=window,
            limit=3,
            deadline=Deadline.after(5),
        )
    assert stub.paths.count("/loki/api/v1/query") == 2
    # The stub makes lines up for the range asked: an INFO line a minute from its start
    # (41 in the window's 40 min + 1 ms, 120 in the baseline's 2 h) and an ERROR line a
    # minute in its last quarter; far more than the 20 lines query_range returned.
    assert (result.summary["total_window"], result.summary["total_baseline"]) == (51, 150)
    assert "lower bounds" in result.output
