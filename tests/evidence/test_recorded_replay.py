"""A pack's recorded/invocations.jsonl answers calls with the same tool and arguments."""

from __future__ import annotations

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.models import DiagnosisSession, ToolInvocation
from tests.evidence.packbuilder import recorded_write

RECORDED_OUTPUT = 'query_logs service=pay\npay ERROR template "boom": 3 in window (recorded)'


def _session_for(pack_dir, owner):
    (environment,) = environments_sync_from_packs(dirs=[pack_dir])
    return DiagnosisSession.objects.create(
        owner=owner, environment=environment, original_query="为什么失败"
    )


def test_a_call_with_equal_arguments_after_dropping_nulls_is_answered_from_the_recording(
    tmp_path, owner
):
    pack = tmp_path / "replay"
    (pack).mkdir()
    (pack / "scenario.yaml").write_text(
        "id: replay\ntitle: Replay\nquestion: why\nnow: 2026-03-02T10:40:00Z\n", encoding="utf-8"
    )
    recorded_write(
        pack,
        [
            {
                "tool_name": "query_logs",
                "arguments": {"service": "pay", "level": None, "limit": 3},
                "status": "ok",
                "output": RECORDED_OUTPUT,
            },
            {
                "tool_name": "query_metrics",
                "arguments": {"service": "pay"},
                "status": "timeout",
                "output": "timeout: Prometheus did not answer",
            },
        ],
    )
    session = _session_for(pack, owner)
    hit = tool_invoke(
        session=session,
        attempt=1,
        tool_name="query_logs",
        arguments={"limit": 3, "service": "pay", "query": None},
    )
    recorded_timeout = tool_invoke(
        session=session, attempt=1, tool_name="query_metrics", arguments={"service": "pay"}
    )
    miss = tool_invoke(
        session=session, attempt=1, tool_name="query_logs", arguments={"service": "order"}
    )
    rows = list(ToolInvocation.objects.filter(session=session).order_by("sequence"))
    assert rows[0].status == "ok"
    assert rows[0].output == RECORDED_OUTPUT == hit.output
    assert rows[0].summary["recorded"] is True
    assert rows[0].summary["templates"] == []
    assert rows[1].status == "timeout"
    assert recorded_timeout.status == "timeout"
    assert rows[2].status == "error"
    assert "nothing was recorded for this call" in miss.output
    assert "has no log files" in miss.output


def test_an_unmatched_call_falls_back_to_the_pack_files(pack_dir, owner):
    recorded_write(
        pack_dir,
        [
            {
                "tool_name": "query_logs",
                "arguments": {"service": "pay", "level": "ERROR"},
                "status": "ok",
                "output": RECORDED_OUTPUT,
            }
        ],
    )
    session = _session_for(pack_dir, owner)
    replayed = tool_invoke(
        session=session,
        attempt=1,
        tool_name="query_logs",
        arguments={"service": "pay", "level": "ERROR"},
    )
    from_files = tool_invoke(
        session=session, attempt=1, tool_name="query_logs", arguments={"service": "pay"}
    )
    assert replayed.output == RECORDED_OUTPUT
    assert from_files.status == "ok"
    assert "Connection is not available" in from_files.output
    assert "recorded" not in from_files.summary
