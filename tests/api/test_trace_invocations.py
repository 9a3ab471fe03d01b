"""A query_traces invocation through the API, as any other tool's: output, summary, owner check."""

from __future__ import annotations

from datetime import UTC, datetime

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.services import environments_sync_from_packs
from tests.api.conftest import session_make
from tests.evidence.packbuilder import pack_write
from tests.evidence.tracebuilder import chain_lines, traces_write


def test_a_trace_invocation_is_returned_with_its_output_and_summary(
    api, outsider_api, owner, tmp_path
):
    pack = pack_write(tmp_path / "packs" / "traced", pack_id="traced")
    lines = chain_lines(
        ["gateway", "pay"],
        start=datetime(2026, 3, 2, 8, 0, tzinfo=UTC),
        end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC),
        change_at=datetime(2026, 3, 2, 10, 19, tzinfo=UTC),
        slow="pay",
    )
    traces_write(pack / "traces", lines, gz=True)
    (environment,) = environments_sync_from_packs(dirs=[pack.parent])
    session = session_make(
        owner=owner, environment=environment, context={"now": "2026-03-02T10:40:00Z"}
    )
    result = tool_invoke(session=session, attempt=1, tool_name="query_traces", arguments={})
    body = api.get(f"/api/v1/tool-invocations/{result.invocation_id}").json()
    assert body["tool_name"] == "query_traces" and body["status"] == "ok"
    assert body["output"] == result.output and "query_traces fleet view" in body["output"]
    listed = api.get(f"/api/v1/diagnoses/{session.public_id}/tool-invocations").json()
    assert [i["trace_ref"] for i in listed["results"]] == ["trace-1"]
    assert outsider_api.get(f"/api/v1/tool-invocations/{result.invocation_id}").status_code == 404
