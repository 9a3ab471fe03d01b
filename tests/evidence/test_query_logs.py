"""query_logs from pack files: drain3 templates with window/baseline counts."""

from __future__ import annotations

import json
import tracemalloc

from diagnosis.evidence.common import Deadline, QueryWindow
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.timeutil import time_parse
from diagnosis.evidence.tools.query_logs.files import logs_from_files
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.models import ToolInvocation

WINDOW = {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}


def _logs(session, **arguments):
    session.context = {"now": "2026-03-02T10:40:00Z", "window": WINDOW}
    session.save()
    result = tool_invoke(session=session, attempt=1, tool_name="query_logs", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


def test_a_new_error_template_leads_with_counts_and_first_seen(session):
    row = _logs(session, service="pay")
    top = row.summary["templates"][0]
    assert top["level"] == "ERROR"
    assert top["is_new"] is True
    assert top["count_baseline"] == 0
    assert top["count_window"] == 126
    assert top["first_seen"] == "2026-03-02T10:19:05Z"
    assert "Connection is not available" in top["template"]
    assert "NEW (absent from the baseline)" in top["line"]
    assert len(top["samples"]) == 3
    assert top["samples"][0] == (
        "2026-03-02T10:19:05.000Z pay ERROR HikariPool-1 - Connection is not available, "
        "request timed out after 30000ms id=0"
    )
    steady = next(t for t in row.summary["templates"] if t["level"] == "WARN")
    assert steady["is_new"] is False
    assert 0.5 < steady["surge_ratio"] < 2
    assert row.summary["total_window"] == sum(t["count_window"] for t in row.summary["templates"])
    assert f"totals: {row.summary['total_window']} lines in the window" in row.output


def test_level_filter_and_sample_limit(session):
    row = _logs(session, service="pay", level="error", limit=1)
    assert {t["level"] for t in row.summary["templates"]} == {"ERROR"}
    assert all(len(t["samples"]) == 1 for t in row.summary["templates"])


def test_warning_is_the_same_level_as_warn(session):
    row = _logs(session, level="WARNING")
    assert {t["level"] for t in row.summary["templates"]} == {"WARN"}


def test_a_substring_and_a_regex_query_filter_messages(session):
    plain = _logs(session, query="slow query")
    assert [t["level"] for t in plain.summary["templates"]] == ["WARN"]
    regex = _logs(session, query=r"/timed out after \d+ms/")
    assert len(regex.summary["templates"]) == 1
    assert regex.summary["templates"][0]["level"] == "ERROR"


def test_plain_log_files_take_the_service_from_the_file_name(session):
    row = _logs(session, service="gateway")
    (template,) = row.summary["templates"]
    assert template["service"] == "gateway"
    assert template["samples"][0].startswith('2026-03-02T10:00:00Z INFO "POST /pay"')


def test_the_file_backend_streams_with_bounded_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:
        for i in range(25_000):
            minute, second = divmod(i // 10, 60)
            record = {
                "ts": f"2026-03-02T10:{minute % 40:02d}:{second:02d}Z",
                "service": "pay",
                "level": "INFO" if i % 7 else "ERROR",
                "message": f"request {i} done in {i % 97}ms user=u{i % 1000:04d} " + "x" * 100,
            }
            handle.write(json.dumps(record) + "\n")
    window = QueryWindow.around(
        start=time_parse("2026-03-02T10:00:00Z"), end=time_parse("2026-03-02T10:40:00Z")
    )
    tracemalloc.start()
    result = logs_from_files(
        files=[path],
        log_filter=LogFilter.build(service="pay", query=None, level=None),
        window=window,
        limit=3,
        deadline=Deadline.after(60),
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.summary["total_window"] == 25_000
    assert path.stat().st_size > 3_500_000
    assert peak < 1_500_000  # far below the file size: nothing keeps the lines
