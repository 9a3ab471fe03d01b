"""The C half of the counting scan (query_logs/_blockscan.c) refuses what it cannot read
safely, and keeps nothing it was lent past the call."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import numpy as np
import pytest

from diagnosis.evidence import formats
from diagnosis.evidence.common import Deadline
from diagnosis.evidence.tools.query_logs import _blockscan, logscan
from diagnosis.evidence.tools.query_logs.filter import LogFilter


def _block(count: int = 50) -> bytes:
    lines = [
        json.dumps(
            {
                "ts": f"2026-03-02T10:00:{i % 60:02d}.5Z",
                "service": "pay",
                "level": "INFO",
                "message": f"took {i}ms",
            }
        )
        for i in range(count)
    ]
    return ("\n".join(lines) + "\n").encode()


def test_layouts_given_as_a_passing_generator_read_as_the_constant_does():
    # The scan reads the layouts with the GIL released: it must hold its own copy.
    buf = _block()
    expected = _blockscan.block_index(buf, logscan._LAYOUTS)
    fresh = (tuple(bytes(part) for part in layout) for layout in logscan._LAYOUTS)
    assert _blockscan.block_index(buf, fresh) == expected
    flags = np.frombuffer(expected[5], np.uint16)
    assert not (flags & _blockscan.FLAG_LAYOUT).any()


def test_line_keys_refuse_offsets_outside_a_line_and_arrays_that_are_not_int64():
    buf = _block(3)
    _starts, ends, quotes, *_ = _blockscan.block_index(buf, logscan._LAYOUTS)
    q = np.frombuffer(quotes, np.int64).reshape(-1, 16).copy()
    ends_a = np.frombuffer(ends, np.int64)
    rows = np.arange(3, dtype=np.int64)
    keys, _order, sizes = _blockscan.line_keys(buf, q, ends_a, rows)
    assert len(keys) == 1 and np.frombuffer(sizes, np.int64).tolist() == [3]  # took 1ms
    q[1, 15] = ends_a[1]  # the message would end where the line does
    with pytest.raises(ValueError):
        _blockscan.line_keys(buf, q, ends_a, rows)
    with pytest.raises(ValueError):
        _blockscan.line_keys(buf, q.astype(np.int32), ends_a, rows)
    with pytest.raises(ValueError):
        _blockscan.line_keys(buf, q, ends_a, np.array([7], dtype=np.int64))


def test_a_chunk_told_to_stop_reads_no_further(tmp_path):
    path = tmp_path / "apps.jsonl"
    path.write_bytes(_block())
    stop = threading.Event()
    stop.set()
    spec = logscan.ScanSpec(
        window_start=0.0,
        window_end=2e9,
        baseline_start=0.0,
        head_low="",
        head_high="\uffff",
        log_filter=LogFilter.build(service=None, query=None, level=None),
        limit=3,
        deadline=Deadline.after(60),
    )
    arguments = {"path": path, "start": 0, "end": path.stat().st_size, "number": 0}
    assert logscan.chunk_scan(**arguments, spec=spec, jsonl=True, stop=stop) is None
    groups = logscan.chunk_scan(**arguments, spec=spec, jsonl=True)
    assert groups is not None and sum(g.count_window for g in groups.values()) == 50


def _pick(rng: random.Random, usual: list, odd: list) -> Any:
    """One of ``usual``, or now and then one of ``odd``."""
    return rng.choice(odd if rng.random() < 0.1 else usual)


def _stamp_like(rng: random.Random) -> str:
    """A plain line's start: an RFC 3339 stamp as services write them, or nearly one."""
    year = _pick(rng, [1970, 2026, 2038], [9999, 1])
    month, day = _pick(rng, [1, 2, 12], [13, 0]), _pick(rng, [1, 28, 29], [31, 0])
    hour, minute = _pick(rng, [0, 9, 23], [24]), _pick(rng, [0, 59], [60])
    second = _pick(rng, [0, 7, 59], [60])
    point = _pick(rng, ["", ".", ","], [";", "·"])
    digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([0, 1, 3, 6, 7, 9])))
    digits += _pick(rng, [""], ["٣", "x", " "])
    zone = _pick(rng, ["", "Z", "+05:30", "-0800", "-05:00"], ["z", "+24:00", "+05:3", "+01:60"])
    sep = _pick(rng, ["T", " "], ["t", "_"])
    stamp = f"{year:04d}-{month:02d}-{day:02d}{sep}{hour:02d}:{minute:02d}:{second:02d}"
    stamp += f"{point}{digits}{zone}"
    if rng.random() < 0.2:
        stamp = f"[{stamp}]"
    return stamp + _pick(rng, [" ", "  ", "\t"], ["", "\u3000"]) + rng.choice(["INFO", "x 1"])


def test_plain_stamps_read_in_c_as_the_regex_and_log_time_parse_read_them():
    rng = random.Random(20261201)
    lines = [_stamp_like(rng) for _ in range(20_000)]
    buf = ("\n".join(lines) + "\n").encode()
    _starts, _ends, rest, seconds, micros, flags = _blockscan.plain_index(buf)
    rest_a, seconds_a, micros_a = (np.frombuffer(a, np.int64) for a in (rest, seconds, micros))
    flags_a = np.frombuffer(flags, np.uint16)
    line_starts = np.cumsum([0] + [len(line.encode()) + 1 for line in lines[:-1]])
    read = {"dot": 0, "comma": 0}
    for n, line in enumerate(lines):
        total = int(seconds_a[n]) * 1_000_000 + int(micros_a[n])
        if flags_a[n] & _blockscan.FLAG_STAMP or abs(total) >= logscan._MAX_EXACT_MICROS:
            continue  # left to the line-by-line scan (as _PlainBlock leaves it): always safe
        match = formats._PLAIN_TS.match(line)
        assert match, line
        assert total / 1e6 == formats.log_time_parse(match.group(1))[0], line
        assert rest_a[n] - line_starts[n] == len(line[: match.end()].encode()), line
        fraction = match.group(1)[19:20]
        read["comma" if fraction == "," else "dot"] += 1
    assert read["dot"] > 1000 and read["comma"] > 1000, read  # both forms are read in C
