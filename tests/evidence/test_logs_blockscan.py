"""The C half of the counting scan (query_logs/_blockscan.c) refuses what it cannot read
safely, and keeps nothing it was lent past the call."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

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
