"""Fleet-wide query_logs: every service ranked together, with one totals line.

The same generated fleet is read from a pack file and served by a loopback Loki (its
documented ``streams`` format, honouring the stream selector and the line limit), and both
must rank the same templates first.
"""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from diagnosis.evidence.common import Deadline, QueryWindow, ToolFailure
from diagnosis.evidence.tools.query_logs.files import logs_from_files
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.loki import logql_build, logs_from_loki
from diagnosis.evidence.tools.query_logs.render import template_surging

WINDOW_START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
WINDOW_END = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
WINDOW = QueryWindow.around(start=WINDOW_START, end=WINDOW_END)
SERVICES = [f"svc-{i:02d}" for i in range(30)]
BROKEN = "svc-17"  # a new ERROR template from 10:19
SURGING = "svc-04"  # its steady WARN ten times as often in the window


def _fleet_entries() -> list[tuple[datetime, str, str, str]]:
    """(time, service, level, message), every stamp distinct, oldest first."""
    out = []
    start = WINDOW_START - timedelta(hours=2)
    for minute in range(160):
        at = start + timedelta(minutes=minute)
        in_window = at >= WINDOW_START
        for i, service in enumerate(SERVICES):
            ts = at + timedelta(milliseconds=10 * i)
            out.append((ts, service, "INFO", f"GET /api/items 200 {minute % 17 + 3}ms"))
            warn_every = 1 if service == SURGING and in_window else 10
            if minute % warn_every == 0:
                out.append(
                    (
                        ts + timedelta(milliseconds=1),
                        service,
                        "WARN",
                        f"cache refill took {400 + minute}ms",
                    )
                )
            if service == BROKEN and at >= WINDOW_START + timedelta(minutes=19):
                out.append(
                    (
                        ts + timedelta(milliseconds=2),
                        service,
                        "ERROR",
                        f"Connection refused to ledger-db:5432 after {minute % 5 + 1} retries",
                    )
                )
    return out


def _stamp(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


@pytest.fixture
def fleet_file(tmp_path) -> Path:
    path = tmp_path / "fleet.jsonl"
    with path.open("w") as handle:
        for ts, service, level, message in _fleet_entries():
            record = {"ts": _stamp(ts), "service": service, "level": level, "message": message}
            handle.write(json.dumps(record) + "\n")
    return path


def _from_files(path: Path, **arguments) -> dict:
    result = logs_from_files(
        files=[path],
        log_filter=LogFilter.build(
            service=arguments.get("service"), query=arguments.get("query"), level=None
        ),
        window=WINDOW,
        limit=1,
        deadline=Deadline.after(60),
    )
    return {"status": result.status, "output": result.output, **result.summary}


_SELECTOR = re.compile(r'^\{service(=~|=)("(?:[^"\\]|\\.)*")\}')


class FleetLoki(BaseHTTPRequestHandler):
    """``query_range`` over the fleet entries: the selector's services, newest first."""

    requests: list[dict] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).requests.append(params)
        if url.path != "/loki/api/v1/query_range":
            self.send_response(404)
            self.end_headers()
            return
        match = _SELECTOR.match(params["query"])
        assert match is not None, params["query"]
        op, value = match.group(1), json.loads(match.group(2))
        start, end, limit = int(params["start"]), int(params["end"]), int(params["limit"])
        kept = []
        for ts, service, level, message in _fleet_entries():
            ns = int(ts.timestamp() * 1000) * 1_000_000
            wanted = re.fullmatch(value, service) if op == "=~" else service == value
            if wanted and start <= ns < end:
                kept.append((ns, service, json.dumps({"level": level, "message": message})))
        kept = sorted(kept, key=lambda e: -e[0])[:limit]
        streams: dict[str, dict] = {}
        for ns, service, line in kept:
            stream = streams.setdefault(service, {"stream": {"service": service}, "values": []})
            stream["values"].append([str(ns), line])
        body = {
            "status": "success",
            "data": {"resultType": "streams", "result": list(streams.values())},
        }
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def fleet_loki():
    FleetLoki.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FleetLoki)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _from_loki(url: str, **arguments) -> dict:
    result = logs_from_loki(
        base_url=url,
        token_env="",
        tenant="",
        log_filter=LogFilter.build(service=arguments.get("service"), query=None, level=None),
        window=WINDOW,
        limit=1,
        deadline=Deadline.after(60),
    )
    return {"status": result.status, "output": result.output, **result.summary}


def test_without_a_service_every_service_is_ranked_with_one_totals_line(fleet_file):
    got = _from_files(fleet_file)
    fleet = got["fleet"]
    assert fleet["services"] == 30
    assert fleet["lines_window"] == got["total_window"]
    assert fleet["lines_baseline"] == got["total_baseline"]
    # The new error and the surging warning; the steady templates of 30 services are not.
    assert fleet["new_or_surging"] == 2
    assert fleet["line"] == (
        f"fleet: 30 services, {got['total_window']} lines in the window, "
        f"{got['total_baseline']} in the baseline, 2 new or surging templates"
    )
    assert fleet["line"] in got["output"].splitlines()
    assert [e["service"] for e in fleet["services_ranked"]] == [BROKEN, SURGING]
    assert (fleet["new_or_surging_services"], fleet["services_omitted"]) == (2, 0)
    assert fleet["services_ranked"][0]["line"] in got["output"]
    top = got["templates"][0]
    assert (top["service"], top["level"], top["is_new"]) == (BROKEN, "ERROR", True)
    assert top["count_window"] == 21
    second = got["templates"][1]
    assert (second["service"], second["level"], second["count_window"]) == (SURGING, "WARN", 40)


def test_a_service_selector_ranks_only_the_services_it_matches(fleet_file):
    got = _from_files(fleet_file, service="/svc-1[0-9]/")
    assert got["fleet"]["services"] == 10
    assert {t["service"] for t in got["templates"]} <= {f"svc-1{i}" for i in range(10)}
    assert got["templates"][0]["service"] == BROKEN
    assert got["output"].startswith("query_logs service=/svc-1[0-9]/")


def test_one_service_by_name_has_no_fleet_totals(fleet_file):
    got = _from_files(fleet_file, service=BROKEN)
    assert "fleet" not in got
    assert not any(line.startswith("fleet") for line in got["output"].splitlines())


def test_a_service_selector_that_is_not_a_regular_expression_is_refused():
    with pytest.raises(ToolFailure, match=r"service /svc-\(/ is not a valid regular expression"):
        LogFilter.build(service="/svc-(/", query=None, level=None)


def test_a_service_selector_becomes_one_loki_stream_selector():
    log_filter = LogFilter.build(service="/svc-1.*/", query="refused", level=None)
    assert logql_build(log_filter) == '{service=~"svc-1.*"} |= "refused"'


def test_files_and_loki_rank_the_same_templates_first_for_the_same_fleet(fleet_file, fleet_loki):
    files = _from_files(fleet_file)
    loki = _from_loki(fleet_loki)
    # One query per range for the whole fleet, not one per service.
    assert [r["query"] for r in FleetLoki.requests] == ['{service=~".+"}'] * 2

    def ranked(result: dict) -> list[tuple]:
        return [
            (
                t["service"],
                t["level"],
                t["template"],
                t["count_window"],
                t["count_baseline"],
                t["is_new"],
                t["first_seen"],
                t["last_seen"],
            )
            for t in result["templates"]
        ]

    assert ranked(loki) == ranked(files)
    assert {k: v for k, v in loki["fleet"].items()} == {k: v for k, v in files["fleet"].items()}
    assert (loki["total_window"], loki["total_baseline"]) == (
        files["total_window"],
        files["total_baseline"],
    )


def test_a_loki_service_selector_reaches_loki_and_limits_the_fleet(fleet_loki):
    got = _from_loki(fleet_loki, service="/svc-1[0-9]/")
    assert FleetLoki.requests[0]["query"] == '{service=~"svc-1[0-9]"}'
    assert got["fleet"]["services"] == 10
    assert got["templates"][0]["service"] == BROKEN


@pytest.mark.parametrize(
    ("count_window", "count_baseline", "surging"),
    [
        (40, 12, True),  # ten times the baseline rate
        (12, 36, False),  # the same rate as before
        (6, 6, False),  # three times the rate, but six lines could be chance
        (30, 30, True),  # three times the rate over sixty lines is not
        (5, 0, False),  # absent from the baseline: new, not surging
    ],
)
def test_a_template_surges_only_when_its_rate_rose_beyond_chance(
    count_window, count_baseline, surging
):
    assert (
        template_surging(
            count_window=count_window, count_baseline=count_baseline, window_share=0.25
        )
        is surging
    )


def test_services_beyond_the_ranked_ones_are_counted_and_said(tmp_path):
    path = tmp_path / "many.jsonl"
    with path.open("w") as handle:
        for minute in range(160):
            at = WINDOW_START - timedelta(hours=2) + timedelta(minutes=minute)
            for i in range(15):
                service = f"edge-{i:02d}"
                records = [("INFO", "heartbeat ok")]
                if at >= WINDOW_START + timedelta(minutes=30):
                    records.append(("ERROR", f"disk full on /data{i}"))
                for n, (level, message) in enumerate(records):
                    ts = _stamp(at + timedelta(milliseconds=100 * i + n))
                    record = {"ts": ts, "service": service, "level": level, "message": message}
                    handle.write(json.dumps(record) + "\n")
    fleet = _from_files(path)["fleet"]
    assert fleet["new_or_surging_services"] == 15
    assert len(fleet["services_ranked"]) == 10
    assert fleet["services_omitted"] == 5
    output = _from_files(path)["output"]
    assert "fleet: 5 more services with new or surging templates omitted" in output
