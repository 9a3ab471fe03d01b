"""The time window of a call: an absent start or end takes the session's window length.

The same under ``python -O`` (the window is narrowed by its own branches, not asserts).
"""

from __future__ import annotations

import pytest

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.models import ToolInvocation

CONTEXT = {
    "now": "2026-03-02T10:40:00Z",
    "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
}


def _window(session, **times: str) -> tuple[dict, dict]:
    session.context = CONTEXT
    session.save()
    result = tool_invoke(
        session=session,
        attempt=1,
        tool_name="query_metrics",
        arguments={"metric": "pool_active", **times},
    )
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "ok", row.error
    return row.summary["window"], row.summary.get("clamped", {})


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        ({}, ("2026-03-02T10:00:00Z", "2026-03-02T10:40:00Z")),
        ({"end": "2026-03-02T10:30:00Z"}, ("2026-03-02T09:50:00Z", "2026-03-02T10:30:00Z")),
        ({"start": "2026-03-02T10:10:00Z"}, ("2026-03-02T10:10:00Z", "2026-03-02T10:40:00Z")),
        ({"start": "2026-03-02T10:50:00Z"}, ("2026-03-02T10:50:00Z", "2026-03-02T11:30:00Z")),
        (
            {"start": "2026-03-02T10:05:00Z", "end": "2026-03-02T10:25:00Z"},
            ("2026-03-02T10:05:00Z", "2026-03-02T10:25:00Z"),
        ),
    ],
    ids=["neither", "end only", "start only", "start after the default end", "both"],
)
def test_a_missing_start_or_end_keeps_the_sessions_window_length(session, times, expected):
    window, clamped = _window(session, **times)
    assert (window["start"], window["end"]) == expected
    assert clamped == {}


def test_an_empty_range_becomes_the_default_length_ending_where_asked(session):
    moment = "2026-03-02T10:30:00Z"
    window, clamped = _window(session, start=moment, end=moment)
    assert (window["start"], window["end"]) == ("2026-03-02T09:50:00Z", moment)
    assert clamped["start"]["used"] == "2026-03-02T09:50:00Z"
