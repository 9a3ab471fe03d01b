"""The file backend's shortcuts agree with the plain way of reading a log line.

Each shortcut (block reading, the common JSON layout read by one regular expression,
masking by message shape) must give what the straightforward code gives, for any input.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.evidence.common import Deadline
from diagnosis.evidence.formats import jsonl_line_parse, level_normalise
from diagnosis.evidence.tools.query_logs import linescan
from diagnosis.evidence.tools.query_logs.masking import MessageMasker, message_mask

_TOKENS = [
    "v1",
    "O26030277937",
    "pod-h466w",
    "deadbeefcafe12",
    "0xff",
    "10.0.0.1:80",
    "abcdefab-abcd-abcd-abcd-abcdefabcdef",
    "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "12ms",
    "1,234.5",
    "-3",
    "+4",
    "%s",
    "%%",
    "a_12",
    "x1y22z333",
    "٣٤",
    "é9",
]
_message_parts = st.one_of(
    st.sampled_from(_TOKENS),
    st.text(alphabet=string.digits + "abcdefxABCDEF_-.:,+ =/<>%" + "٣é", max_size=8),
)
messages = st.lists(_message_parts, max_size=10).map(" ".join)


@settings(max_examples=1500, deadline=None)
@given(messages, st.randoms(use_true_random=False))
def test_masking_by_shape_gives_the_same_text_as_message_mask(message, rng):
    masker = MessageMasker()
    # The same shape with other digits takes the cached recipe.
    other = "".join(rng.choice(string.digits) if c in string.digits else c for c in message)
    for text in (message, other, message):
        assert masker.mask(text) == message_mask(text)
    # Every recipe was learned from the shape, none fell back to masking each message.
    recipes = masker.recipes.values()
    fallbacks = [r for r in recipes if isinstance(r, tuple) and r[1] is message_mask]
    assert not fallbacks, message


def test_a_digit_that_survives_masking_is_taken_from_the_message():
    masker = MessageMasker()
    assert masker.mask("GET /api/v1/orders 200 id=O26030277937") == (
        "GET /api/v1/orders <NUM> id=<ID>"
    )
    assert masker.mask("GET /api/v2/orders 404 id=O26030277000") == (
        "GET /api/v2/orders <NUM> id=<ID>"
    )
    assert len(masker.recipes) == 1


_json_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFF), max_size=12
)
# Mostly text json.dumps writes without escapes, so most lines take the shortcut.
_plain_text = st.text(
    alphabet=st.characters(
        min_codepoint=0x20, max_codepoint=0x2FFF, blacklist_categories=("Cs",)
    ).filter(lambda c: c not in '"\\'),
    max_size=12,
)
_text = st.one_of(_plain_text, _plain_text, _plain_text, _json_text)
_json_value = st.one_of(
    _text,
    st.integers(min_value=-(10**60), max_value=10**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=1500, deadline=None)
@given(
    ts=st.one_of(
        st.datetimes(timezones=st.none()).map(lambda d: d.isoformat() + "Z"),
        st.datetimes(timezones=st.none()).map(lambda d: d.isoformat(timespec="milliseconds") + "Z"),
        st.datetimes(timezones=st.none()).map(lambda d: d.isoformat(timespec="milliseconds")),
        _json_text,
    ),
    service=_text.filter(bool),
    level=st.one_of(_text, _text, _json_value),
    message=st.one_of(_text, _text, st.integers()),
    extra=st.dictionaries(
        st.sampled_from(["trace_id", "pod", "x", "y", "z", "ts", "level", "message", "service"]),
        st.one_of(_text, _text, _json_value),
        max_size=3,
    ),
    ensure_ascii=st.booleans(),
)
def test_a_line_in_the_common_layout_reads_as_json_lines_parsing_reads_it(
    ts, service, level, message, extra, ensure_ascii
):
    record = {"ts": ts, "service": service, "level": level, "message": message}
    line = json.dumps(record, ensure_ascii=ensure_ascii)
    if extra:
        line = line[:-1] + ", " + json.dumps(extra, ensure_ascii=ensure_ascii)[1:]
    match = linescan.JSONL_COMMON.match(line + "\n")
    if match is None:
        return
    ts_text, service_text, level_text, message_text = match.groups()
    parsed = jsonl_line_parse(line)
    assert (parsed.ts_text, parsed.service, parsed.message) == (
        ts_text,
        service_text,
        message_text,
    )
    assert parsed.level == level_normalise(level_text)


def test_the_common_layout_matches_what_json_dumps_writes():
    line = json.dumps(
        {
            "ts": "2026-03-02T10:19:05.000Z",
            "service": "payment-service",
            "level": "ERROR",
            "message": "Connection is not available, request timed out after 30000ms",
            "pod": "payment-service-h2lrmmclmd-h466w",
            "n": -1.5e3,
            "ok": True,
        }
    )
    assert linescan.JSONL_COMMON.match(line + "\n") is not None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [b"\n", b"\r", b"\r\n", b"\xe4\xb8\xad", b"\xe4\xb8", b"\xff", b"\xef\xbb\xbf"]
            ),
            st.binary(max_size=9),
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=7),
)
def test_blocks_hold_the_lines_text_mode_reading_gives(tmp_path_factory, parts, size):
    path = tmp_path_factory.mktemp("blocks") / "x.log"
    path.write_bytes(b"".join(parts))
    with path.open(encoding="utf-8", errors="replace") as handle:
        expected = [line.removesuffix("\n") for line in handle]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(linescan, "READ_BLOCK_BYTES", size)  # lines and characters across blocks
        blocks = list(linescan._text_blocks(path, Deadline.after(60)))
    assert all(block.endswith("\n") for block in blocks)
    assert "".join(blocks).split("\n")[:-1] == expected
