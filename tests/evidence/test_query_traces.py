"""query_traces over OTLP/JSON files: parsing by the specification's rules, streaming,
self time and call edges, the fleet, service and trace views through ``tool_invoke``."""

from __future__ import annotations

import gzip
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from diagnosis.evidence.common import Deadline
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import PackError
from diagnosis.evidence.tools import tool_definition
from diagnosis.evidence.tools.query_traces import otlp
from diagnosis.evidence.tools.query_traces.otlp import ReadStats, file_spans, request_spans
from diagnosis.evidence.tools.query_traces.trees import TraceBuffer, tree_build
from diagnosis.models import ToolInvocation
from tests.evidence.tracebuilder import chain_lines, request_line, span, traces_write

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios" / "_generator"))
from fleet import fleet_pack_write

WINDOW = {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
END = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
CHANGE = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
MS = 1_000_000
T0 = int(CHANGE.timestamp() * 1e9)


def _traces(session, **arguments):
    session.context = {"now": "2026-03-02T10:40:00Z", "window": WINDOW}
    session.save()
    result = tool_invoke(session=session, attempt=1, tool_name="query_traces", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


def _spans(lines, **kwargs):
    stats = ReadStats()
    out = []
    for line in lines:
        out += list(request_spans(json.loads(line), where="x", stats=stats, **kwargs))
    return out, stats


# --- OTLP/JSON by the specification ------------------------------------------------


def test_ids_are_hex_in_any_case_and_times_decimal_strings():
    line = request_line(
        {"cart": [span("5B8EFFF798038103D269B633813FC60C", "EEE19B7EC3C1B174", None,
                       name="GetCart", start_ns=T0, end_ns=T0 + 5 * MS)]}
    )  # fmt: skip
    (got,), _ = _spans([line])
    assert got.trace_id == "5b8efff798038103d269b633813fc60c"
    assert got.span_id == "eee19b7ec3c1b174"
    assert got.parent_id == ""
    assert got.end_ns - got.start_ns == 5 * MS
    assert got.service == "cart"


def test_absent_kind_and_status_are_unknown_never_ok():
    raw = span(1, 1, None, name="x", start_ns=T0, end_ns=T0 + MS, kind=None, status=None)
    (got,), _ = _spans([request_line({"a": [raw]})])
    assert got.kind is None and got.status is None
    empty_status = {**raw, "status": {}}
    (unset,), _ = _spans([request_line({"a": [empty_status]})])
    assert unset.status == 0  # a status object without a code is OTLP's UNSET


def test_several_resource_spans_in_a_line_and_one_trace_split_over_lines():
    parent = span(9, 1, None, name="p", start_ns=T0, end_ns=T0 + 100 * MS)
    child = span(9, 2, 1, name="c", start_ns=T0 + 10 * MS, end_ns=T0 + 70 * MS)
    other = span(9, 3, 1, name="d", start_ns=T0 + 80 * MS, end_ns=T0 + 90 * MS)
    lines = [request_line({"front": [parent], "back": [child]}), request_line({"db": [other]})]
    spans, _ = _spans(lines)
    assert sorted(s.service for s in spans) == ["back", "db", "front"]
    buffer = TraceBuffer()
    for s in spans:
        assert list(buffer.add(s)) == []
    (tree,) = list(buffer.drain())
    root = tree.spans[f"{1:016x}"]
    assert tree.self_ns[root.span_id] == 30 * MS  # 100 - 60 - 10
    assert tree.orphans == 0


def test_a_bad_span_is_skipped_and_counted_not_fatal():
    good = span(1, 1, None, name="x", start_ns=T0, end_ns=T0 + MS)
    bad = {**good, "spanId": "not-hex"}
    spans, stats = _spans([request_line({"a": [good, bad]})])
    assert len(spans) == 1 and stats.bad_spans == 1
    assert "spanId must be a hex string" in stats.first_problem


# --- trees: self time, entries, edges, orphans --------------------------------------


def test_self_time_merges_overlapping_children_and_clips_async_ones():
    parent = span(1, 1, None, name="p", start_ns=0, end_ns=100 * MS)
    a = span(1, 2, 1, name="a", start_ns=0, end_ns=30 * MS)
    b = span(1, 3, 1, name="b", start_ns=20 * MS, end_ns=50 * MS)
    late = span(1, 4, 1, name="late", start_ns=90 * MS, end_ns=300 * MS)
    spans, _ = _spans([request_line({"s": [parent, a, b, late]})])
    tree = tree_build(spans[0].trace_id, spans)
    assert tree.self_ns[f"{1:016x}"] == 40 * MS  # 100 - [0, 50] - [90, 100]


def test_a_span_whose_parent_is_missing_is_kept_as_a_root_and_counted():
    root = span(1, 1, None, name="r", start_ns=0, end_ns=10 * MS)
    lost = span(1, 5, 4, name="lost", start_ns=MS, end_ns=2 * MS)
    spans, _ = _spans([request_line({"s": [root], "t": [lost]})])
    tree = tree_build(spans[0].trace_id, spans)
    assert tree.orphans == 1
    assert f"{5:016x}" in tree.roots
    assert tree.is_entry(f"{5:016x}")


def test_a_service_local_self_time_sums_its_own_spans_down_to_its_callees():
    server = span(1, 1, None, name="GET", start_ns=0, end_ns=100 * MS)
    client = span(1, 2, 1, name="call b", start_ns=10 * MS, end_ns=90 * MS, kind=3)
    remote = span(1, 3, 2, name="serve", start_ns=20 * MS, end_ns=80 * MS)
    spans, _ = _spans([request_line({"a": [server, client], "b": [remote]})])
    tree = tree_build(spans[0].trace_id, spans)
    entry = f"{1:016x}"
    assert tree.entry_of[f"{2:016x}"] == entry
    assert tree.local_self_ns[entry] == 20 * MS + 20 * MS  # server 20, client 20
    assert tree.is_entry(f"{3:016x}")


# --- files: gzip, malformed, oversized, size limit ----------------------------------


def _chain(pack_dir, *, gz=False, **kwargs):
    lines = chain_lines(["front", "mid", "back"], start=START, end=END, change_at=CHANGE, **kwargs)
    traces_write(pack_dir / "traces", lines, gz=gz)
    return lines


def test_gzip_and_plain_files_give_the_same_view(session, pack_dir):
    _chain(pack_dir, slow="back")
    plain = _traces(session)
    (pack_dir / "traces" / "spans.jsonl").unlink()
    _chain(pack_dir, slow="back", gz=True)
    packed = _traces(session)
    assert plain.status == packed.status == "ok"
    assert plain.output.split("\n")[2:] == packed.output.split("\n")[2:]


def test_malformed_and_oversized_lines_are_counted_and_reported(session, pack_dir, monkeypatch):
    lines = _chain(pack_dir, slow="back")
    monkeypatch.setattr(otlp, "LINE_MAX_BYTES", 4096)
    monkeypatch.setattr(otlp, "_CHUNK", 1024)
    extra = ["{not json", json.dumps({"resourceSpans": "x"}), "x" * 10_000]
    traces_write(pack_dir / "traces", [*lines[:10], *extra, *lines[10:]])
    row = _traces(session)
    assert row.status == "ok"
    assert row.summary["totals"]["malformed_lines"] == 3
    assert "malformed lines 3" in row.output
    assert "spans.jsonl:11: not valid JSON" in row.output


def test_files_past_the_size_limit_are_refused_with_a_clear_message(session, pack_dir, settings):
    _chain(pack_dir, slow="back")
    settings.TRACE_FILES_MAX_BYTES = 1000
    row = _traces(session)
    assert row.status == "error"
    assert "more than the limit of 1000 bytes (TRACE_FILES_MAX_BYTES)" in row.error


def test_the_stream_is_read_in_chunks_not_whole(tmp_path, monkeypatch):
    lines = chain_lines(["a", "b"], start=START, end=END, change_at=CHANGE)
    path = traces_write(tmp_path, lines, gz=True)
    reads = []
    real_open = gzip.open

    def spying(*args, **kwargs):
        handle = real_open(*args, **kwargs)
        original = handle.read
        handle.read = lambda size=-1: (reads.append(size), original(size))[1]
        return handle

    monkeypatch.setattr(gzip, "open", spying)
    stats = ReadStats()
    spans = list(file_spans(path, stats=stats, deadline=Deadline.after(30), max_bytes=10**9))
    assert len(spans) == 2 * len(lines)
    assert reads and all(0 < size <= otlp._CHUNK for size in reads)


# --- the views ---------------------------------------------------------------------


def test_in_a_chain_the_slow_callee_ranks_first_and_its_callers_are_explained(session, pack_dir):
    _chain(pack_dir, slow="back")
    row = _traces(session)
    assert row.status == "ok"
    services = row.summary["services"]
    assert services[0]["service"] == "back"
    assert services[0]["change"] == "self"
    callers = {s["service"]: s for s in services[1:]}
    assert callers["front"]["waiting"] and callers["mid"]["waiting"]
    assert not services[0]["waiting"]
    edges = {(e["caller"], e["callee"]) for e in row.summary["edges"]}
    assert edges == {("front", "mid"), ("mid", "back")}
    assert "waiting on its callees" in row.output


@pytest.mark.parametrize("names", [["front", "mid", "back"], ["a", "b", "c"], ["c", "b", "a"]])
def test_in_a_chain_the_failing_callee_is_where_the_errors_originate(session, pack_dir, names):
    lines = chain_lines(names, start=START, end=END, change_at=CHANGE, failing=names[2])
    traces_write(pack_dir / "traces", lines)
    row = _traces(session)
    services = {s["service"]: s for s in row.summary["services"]}
    assert row.summary["services"][0]["service"] == names[2]
    assert services[names[2]]["change"] == "errors"
    assert services[names[2]]["own_errors_window"] > 0
    assert services[names[0]]["own_errors_window"] == 0
    assert services[names[1]]["own_errors_window"] == 0


def test_the_ranking_follows_the_spans_not_the_names(session, pack_dir):
    lines = chain_lines(
        ["zeta", "alpha", "mu"], start=START, end=END, change_at=CHANGE, slow="zeta"
    )
    traces_write(pack_dir / "traces", lines)
    row = _traces(session)
    assert row.summary["services"][0]["service"] == "zeta"  # the entry, slow itself


def test_the_service_view_lists_operations_and_edges_in_and_out(session, pack_dir):
    _chain(pack_dir, slow="back")
    row = _traces(session, service="mid")
    assert row.summary["view"] == "service"
    assert [s["service"] for s in row.summary["services"]] == ["mid"]
    assert row.summary["operations"][0]["operation"] == "mid handle"
    edges = {(e["caller"], e["callee"]) for e in row.summary["edges"]}
    assert edges == {("front", "mid"), ("mid", "back")}
    assert len(row.summary["traces"]) == 5


def test_the_trace_view_is_a_span_tree_with_self_time_and_the_slowest_path(session, pack_dir):
    _chain(pack_dir, slow="back")
    fleet = _traces(session, limit=1)
    trace_id = fleet.summary["traces"][0]["trace_id"]
    row = _traces(session, trace_id=trace_id.upper())
    assert row.status == "ok"
    lines = row.output.splitlines()
    assert lines[1].startswith(f"trace {trace_id}: 3 spans, 3 services")
    tree = [line for line in lines if line.lstrip().startswith(("*", "-"))]
    assert [len(t) - len(t.lstrip()) for t in tree] == [0, 2, 4]
    assert all(t.lstrip().startswith("*") for t in tree)
    assert "back back handle [server]" in tree[2] and "(self 20" in tree[2]


def test_an_environment_without_traces_is_a_gap_not_a_failure(session):
    row = _traces(session)
    assert row.status == "no_data"
    assert row.summary["missing_source"] == "traces"


def test_bad_arguments_become_error_rows(session, pack_dir):
    _chain(pack_dir, slow="back")
    assert _traces(session, status="broken").status == "error"
    assert "hex" in _traces(session, trace_id="xyz").error
    assert _traces(session, min_duration_ms="x").status == "error"


def test_the_verifier_sees_the_ranked_lines_as_facts(session, pack_dir):
    _chain(pack_dir, slow="back")
    row = _traces(session)
    facts = tool_definition("query_traces").summary_facts(row.summary)
    assert facts[0].startswith("read: 1 files")
    assert facts[1] == row.summary["services"][0]["line"]
    assert all(f in row.output for f in facts)


@pytest.mark.parametrize("cut", [600, 1500])
def test_a_truncated_output_keeps_only_the_entries_it_shows(session, pack_dir, settings, cut):
    _chain(pack_dir, slow="back")
    settings.TOOL_OUTPUT_MAX_CHARS = max(cut, 1000)
    row = _traces(session)
    assert row.truncated
    for key in ("services", "edges", "traces"):
        assert all(item["line"] in row.output for item in row.summary[key])


# --- pack validation ---------------------------------------------------------------


def test_pack_check_names_each_bad_trace_line_by_file_and_line(pack_dir):
    good = request_line({"a": [span(1, 1, None, name="x", start_ns=T0, end_ns=T0 + MS)]})
    bad_span = request_line({"a": [{**span(1, 2, None, name="y", start_ns=T0, end_ns=T0 - 1)}]})
    traces_write(pack_dir / "traces", [good, "{oops", bad_span, '{"resourceSpans": 3}'], gz=True)
    with pytest.raises(PackError) as caught:
        pack_load(pack_dir)
    text = str(caught.value)
    assert "traces/spans.jsonl.gz:2: not valid JSON" in text
    assert "traces/spans.jsonl.gz:3: 1 span(s) skipped (endTimeUnixNano is before" in text
    assert "traces/spans.jsonl.gz:4: a line must be an object" in text
    assert "spans.jsonl.gz:1:" not in text


def test_a_pack_with_good_trace_files_loads(pack_dir):
    _chain(pack_dir, slow="back", gz=True)
    assert pack_load(pack_dir).paths.traces == (pack_dir / "traces" / "spans.jsonl.gz",)


# --- generated fleets ----------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 5, 12])  # errors, cpu, errors, latency; depth 2-4
def test_on_a_generated_fleet_without_topology_the_root_cause_ranks_first(session, tmp_path, seed):
    pack = fleet_pack_write(
        out=tmp_path / "fleet", services=46, seed=seed, traces=True, topology=False
    )
    session.environment.pack_path = str(pack.path)
    session.environment.save()
    row = _traces(session)
    services = row.summary["services"]
    assert services[0]["service"] == pack.root
    callers = [s for s in services[1:] if s["score"] > 0]
    assert all(s["own_errors_window"] or not s["waiting"] for s in callers)
