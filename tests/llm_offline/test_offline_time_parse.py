"""The offline engine reads times with the one parser (timeutil.time_parse), leniently."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from diagnosis.offline.common import time_parse

TEN_TWENTY = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "2026-03-02T10:20:00Z",
        "2026-03-02t10:20:00z",
        " 2026-03-02 10:20:00 ",
        "2026-03-02T18:20:00+08:00",
        "2026-03-02T10:20Z",  # no seconds: a model's or a summary's looser ISO text
        TEN_TWENTY.timestamp(),  # Unix seconds
        datetime(2026, 3, 2, 10, 20),  # naive: UTC
        datetime(2026, 3, 2, 18, 20, tzinfo=timezone(timedelta(hours=8))),
    ],
)
def test_a_tool_time_in_any_usual_form_reads_as_one_utc_moment(value: object) -> None:
    parsed = time_parse(value)
    assert parsed == TEN_TWENTY and parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", ["yesterday", "", None, True, 1e30, "10:20:00", [], {}])
def test_an_unreadable_time_is_none_never_an_error(value: object) -> None:
    assert time_parse(value) is None
