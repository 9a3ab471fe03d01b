"""query_logs through the Loki HTTP API.

Loki cannot run here, so this is a protocol test: a loopback server answers
``/loki/api/v1/query_range`` in Loki's documented ``streams`` format.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from diagnosis.evidence.logs import LogFilter, logql_build
from diagnosis.evidence.registry import tool_invoke
from diagnosis.models import ToolInvocation

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


class LokiStub(BaseHTTPRequestHandler):
    requests: list[dict] = []
    delay = 0.0

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
        if url.path != "/loki/api/v1/query_range":
            self.send_response(404)
            self.end_headers()
            return
        start, end = int(params["start"]), int(params["end"])
        query = params["query"]
        streams: dict[str, dict] = {}
        for ts, labels, line in _entries():
            ns = ts * 1_000_000_000
            if not (start <= ns < end):
                continue
            if '|= "timed out"' in query and "timed out" not in line:
                continue
            key = json.dumps(labels, sort_keys=True)
            streams.setdefault(key, {"stream": labels, "values": []})["values"].append(
                [str(ns), line]
            )
        body = json.dumps(
            {
                "status": "success",
                "data": {"resultType": "streams", "result": list(streams.values()), "stats": {}},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def loki(live_environment, monkeypatch):
    LokiStub.requests = []
    LokiStub.delay = 0.0
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


def test_a_loki_that_is_down_gives_an_error_invocation(live_session, live_environment):
    live_environment.loki_url = "http://127.0.0.1:9"
    live_environment.save()
    row = _logs(live_session, service="pay")
    assert row.status == "error"
    assert "cannot reach Loki at http://127.0.0.1:9" in row.output


def test_a_slow_loki_gives_a_timeout_within_the_tool_timeout(live_session, loki, settings):
    settings.TOOL_TIMEOUT_SECONDS = 0.3
    loki.delay = 2.0
    started = time.monotonic()
    row = _logs(live_session, service="pay")
    elapsed = time.monotonic() - started
    assert row.status == "timeout"
    assert "did not answer within 0.3s" in row.output
    assert elapsed < 2.0


def test_an_environment_without_a_loki_url_says_so(live_session):
    row = _logs(live_session, service="pay")
    assert row.status == "error"
    assert "has no Loki URL configured" in row.output
