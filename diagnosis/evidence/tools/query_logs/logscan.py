"""The file backend's scan of big log files: every line counted exactly, in parallel.

``logs_from_files`` reads small inputs line by line (``FileScan``). Past
``AGGREGATE_MIN_BYTES`` it counts instead of clustering line by line, with the same result:

1. **Count by masked line.** Each chunk of a file (in threads when the machine has cores and
   the input is big: the C half, numpy and the reads release the GIL) groups its lines by
   (service, level, masked message) and keeps, per group, the window and baseline counts,
   first/last seen, the first sample lines and where the group first occurs. Lines in
   ``json.dumps`` layout, or in its compact form without the spaces,
   are read block by block: the C module ``_blockscan`` finds each line's bounds, quotes,
   stamp and flags in one pass, and its line key (the digit shape of the message, see
   ``MessageMasker``) in another; numpy and a loop over the distinct keys do the rest.
   Plain ``.log`` lines go the same way (``_PlainBlock``): the C module reads each line's
   stamp, and a line key is the text after it, every digit as 1, on which the level and
   message split of ``plain_line_parse`` runs once per key.
   Every other line is parsed as the line-by-line scan parses it.
2. **Learn the templates.** The distinct masked messages, in the order they first occur,
   go through drain3 exactly as the line-by-line scan feeds them, so each group lands in
   the template (or stays unclustered) where that scan would put its lines.
3. **Add up.** Group counts, times and samples merge into the templates' statistics.

Step 2 equals the line-by-line scan while the distinct masked messages fit its mask cache
(``clustering.MASK_CACHE_SIZE``): past that, that scan re-learns messages in an order only it can
give, so such inputs are read line by line after all. Memory is bounded by the number of
groups and one block per thread, not by the file size.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from django.conf import settings

from diagnosis.evidence.common import Deadline, QueryWindow, ToolTimeout
from diagnosis.evidence.formats import (
    LINE_BREAK_MARK,
    jsonl_line_parse,
    level_normalise,
    log_time_parse,
    message_single_line,
    plain_level_split,
    plain_line_parse,
)
from diagnosis.evidence.tools.query_logs import _blockscan, clustering
from diagnosis.evidence.tools.query_logs.clustering import LogClusterer, TemplateStats, sample_text
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.linescan import (
    JSON_NUMBER,
    JSONL_COMMON,
    second_floor,
    text_decode,
)
from diagnosis.evidence.tools.query_logs.masking import MessageMasker

# The C module's interface this code was written for (see ABI_VERSION in _blockscan.c).
_BLOCKSCAN_ABI = 6
if getattr(_blockscan, "ABI_VERSION", None) != _BLOCKSCAN_ABI:
    raise ImportError(
        f"{_blockscan.__file__} was built from another version of _blockscan.c: "
        "rebuild it with `make install` (or `pip install -e .`)"
    )

AGGREGATE_MIN_BYTES = 16 << 20
PARALLEL_MIN_BYTES = 96 << 20
CHUNK_BYTES = 48 << 20
BLOCK_BYTES = 2 << 20
LINE_SLOTS = 1 << 40  # positions: chunk number * LINE_SLOTS + line number in the chunk

_U8 = np.uint8
# The four fields' keys as json.dumps writes them, and as compact writers do (no spaces:
# JSON.stringify, Go's encoding/json, jq -c, json.dumps(separators=(",", ":"))).
_LAYOUTS = (
    (b'{"ts": "', b'", "service": "', b'", "level": "', b'", "message": "'),
    (b'{"ts":"', b'","service":"', b'","level":"', b'","message":"'),
)
_MAX_EXACT_MICROS = 2**53
# Lines the fast path leaves to the line-by-line code: escapes outside the message (or ill
# formed ones in it), control bytes, fewer than 16 quotes, the four keys not as a layout
# writes them, a ts value that is not a UTC stamp (YYYY-MM-DDTHH:MM:SS, then Z or a
# fraction of 1 to 9 digits and Z).
_NOT_FAST = (
    _blockscan.FLAG_CONTROL
    | _blockscan.FLAG_BACKSLASH
    | _blockscan.FLAG_SHORT
    | _blockscan.FLAG_LAYOUT
    | _blockscan.FLAG_STAMP
)


@dataclass(slots=True)
class GroupStats:
    """The lines of one (service, level, masked message) group."""

    first: int
    count_window: int = 0
    count_baseline: int = 0
    first_seen: float = float("inf")
    last_seen: float = float("-inf")
    samples: list[tuple[int, str]] = field(default_factory=list)
    baseline_samples: list[tuple[int, str]] = field(default_factory=list)


GroupKey = tuple[str, str, str]  # service, level, masked message
# A line key read: (service, level, message shape), its recipe, surviving digits' offsets.
KeyRead = tuple[tuple[bytes, bytes, bytes], Any, np.ndarray]
# A plain line key read: level, the recipe of its message, surviving digits' offsets in the key.
PlainKeyRead = tuple[str, Any, np.ndarray]
_KEYS_KEPT = 10_000
Groups = dict[GroupKey, GroupStats]


@dataclass(frozen=True)
class ScanSpec:
    """What every chunk needs to know (shared by the scan's threads)."""

    window_start: float
    window_end: float
    baseline_start: float
    head_low: str
    head_high: str
    log_filter: LogFilter
    limit: int
    deadline: Deadline


def _sample_keep(samples: list[tuple[int, str]], position: int, sample: str, limit: int) -> None:
    """Keep the ``limit`` samples that come first in the files (lines may arrive out of order)."""
    bisect.insort(samples, (position, sample_text(sample)))
    del samples[limit:]


_T = TypeVar("_T")


def _kept(cache: dict[bytes, _T], key: bytes, value: _T) -> _T:
    """``value``, kept in ``cache`` (cleared when full)."""
    if len(cache) >= _KEYS_KEPT:
        cache.clear()
    cache[key] = value
    return value


class _Aggregator:
    def __init__(self, spec: ScanSpec) -> None:
        self.spec = spec
        self.groups: Groups = {}
        self.masker = MessageMasker()
        self.levels: dict[str, str] = {}
        self.needles = spec.log_filter.raw_prefilter()
        self.masked: set[str] = set()
        self.keys: dict[bytes, KeyRead | None] = {}
        self.plain_keys: dict[bytes, PlainKeyRead | None] = {}

    def key_read(self, key: bytes) -> KeyRead | None:
        """A line key's fields, masking recipe and surviving digits' raw offsets, read once
        per key (None: its lines go line by line)."""
        if key in self.keys:
            return self.keys[key]
        parsed = _key_parse(key)
        read = None
        if parsed is not None:
            recipe, raw_offsets = _recipe_of(self.masker, parsed[2])
            if recipe is not None:
                read = (parsed, recipe, np.array(raw_offsets, dtype=np.int64))
        return _kept(self.keys, key, read)

    def plain_key_read(self, key: bytes) -> PlainKeyRead | None:
        """A plain line key's level, masking recipe and surviving digits' offsets, read once
        per key as ``plain_line_parse`` and ``add_line`` read its lines (None: they go line
        by line; the key is not UTF-8, or see ``_shape_recipe``)."""
        if key in self.plain_keys:
            return self.plain_keys[key]
        read = None
        try:
            rest = key.decode("utf-8")
        except UnicodeDecodeError:
            rest = None
        if rest is not None:
            level, message_at = plain_level_split(rest)
            at = len(rest[:message_at].encode("utf-8"))
            recipe, offsets = _shape_recipe(self.masker, key[at:])
            if recipe is not None:
                read = (level, recipe, np.array(offsets, dtype=np.int64) + at)
        return _kept(self.plain_keys, key, read)

    def level(self, text: str) -> str:
        level = self.levels.get(text)
        if level is None:
            level = self.levels[text] = level_normalise(text)
        return level

    def add_line(
        self,
        position: int,
        ts: float,
        ts_text: str,
        service: str,
        level: str,
        message: str,
        sample: str | None,
    ) -> None:
        """One line already known to be in range and to match the filter."""
        key = (service, level, self.masker.mask(message))
        stats = self.groups.get(key)
        if stats is None:
            stats = self.groups[key] = GroupStats(first=position)
            self.masked.add(key[2])
        elif position < stats.first:
            stats.first = position
        if ts < stats.first_seen:
            stats.first_seen = ts
        if ts > stats.last_seen:
            stats.last_seen = ts
        if ts >= self.spec.window_start:
            stats.count_window += 1
            samples = stats.samples
        else:
            stats.count_baseline += 1
            samples = stats.baseline_samples
        if len(samples) < self.spec.limit or position < samples[-1][0]:
            if sample is None:
                sample = f"{ts_text} {service} {level or '-'} {message}"
            _sample_keep(samples, position, sample, self.spec.limit)

    def add_record(self, position: int, record: Any) -> None:
        spec = self.spec
        if spec.baseline_start <= record.ts <= spec.window_end and spec.log_filter.matches(record):
            self.add_line(
                position,
                record.ts,
                record.ts_text,
                record.service,
                record.level,
                record.message,
                record.sample,
            )

    def add_common(
        self, position: int, ts_text: str, service: str, level_text: str, message: str
    ) -> None:
        """A line in the common JSON layout, read as ``FileScan._jsonl_common`` reads it."""
        spec = self.spec
        head = ts_text[:19]
        if head < spec.head_low or head > spec.head_high:
            return
        try:
            ts = datetime.fromisoformat(ts_text).timestamp()
        except ValueError:
            try:
                ts = log_time_parse(ts_text)[0]
            except ValueError:
                return
        if not spec.baseline_start <= ts <= spec.window_end:
            return
        level = self.level(level_text)
        log_filter = spec.log_filter
        if log_filter.selective and not log_filter.fields_match(service, level, message):
            return
        self.add_line(position, ts, ts_text, service, level, message, None)

    def add_jsonl_line(self, position: int, line: str) -> None:
        """A line outside the fast path, as ``FileScan.jsonl_file`` reads it.

        Lines without the filter's verbatim needles are dropped unread as there (so an
        escaped service name does not match a service filter there either).
        """
        needles = self.needles
        if needles and not all(n in line for n in needles):
            return
        match = JSONL_COMMON.match(line + "\n")
        if match is not None:
            self.add_common(position, *match.groups())
            return
        if not line.strip():
            return
        try:
            record = jsonl_line_parse(line)
        except ValueError:
            return
        self.add_record(position, record)

    def add_plain_line(self, position: int, line: str, service: str) -> None:
        if not line.strip():
            return
        try:
            record = plain_line_parse(line, service=service)
        except ValueError:
            return
        self.add_record(position, record)


def _byte_blocks(path: Path, start: int, end: int, deadline: Deadline) -> Iterator[bytearray]:
    """Bytes ``start``–``end`` of the file (both at line starts) in blocks of whole lines.

    Each block is read straight into its own buffer and cut at its last newline in place;
    only the partial line after that is copied (to the front of the next block).
    """
    with path.open("rb") as handle:
        handle.seek(start)
        carry = b""
        left = end - start
        while left > 0:
            deadline.check()
            block = bytearray(len(carry) + min(BLOCK_BYTES, left))
            block[: len(carry)] = carry
            got = handle.readinto(memoryview(block)[len(carry) :])
            if not got:
                break
            left -= got
            del block[len(carry) + got :]
            cut = block.rfind(b"\n") + 1
            if not cut:
                carry = bytes(block)
                continue
            carry = bytes(block[cut:])
            del block[cut:]
            yield block
        if carry:
            yield bytearray(carry + b"\n")


def _line_starts(path: Path, size: int, pieces: int) -> list[int]:
    """``pieces`` + 1 offsets splitting the file at line starts (first 0, last the size)."""
    offsets = [0]
    with path.open("rb") as handle:
        for i in range(1, pieces):
            handle.seek(max(size * i // pieces - 1, offsets[-1]))
            handle.readline()
            at = handle.tell()
            if at >= size:
                break
            if at > offsets[-1]:
                offsets.append(at)
    offsets.append(size)
    return offsets


class _FastBlock:
    """The lines of one block in the common JSON layout, as ``_blockscan.block_index`` reads them.

    ``ok`` marks the lines that start as ``JSONL_COMMON`` demands (the four fields in
    order, no control character, no escape outside the message, a UTC stamp whose value a
    float holds exactly); whether the fields after the message are flat JSON fields, none
    of them one of the four, is decided per distinct line key (``_shape_rows``). The rest
    is left to the line-by-line code.
    """

    def __init__(self, buf: bytearray) -> None:
        self.buf, self.arr = buf, np.frombuffer(buf, _U8)
        index = _blockscan.block_index(buf, _LAYOUTS)
        starts, nl, quotes, seconds, micros = (np.frombuffer(a, np.int64) for a in index[:5])
        self.starts, self.ends, self.lines = starts, nl, len(nl)
        q = self.q = quotes.reshape(-1, 16)
        self.flags = np.frombuffer(index[5], np.uint16)
        ok = (nl - starts) >= 60
        ok &= (self.flags & _NOT_FAST) == 0
        ok &= q[:, 7] > q[:, 6] + 1  # a service is not empty
        # The stamp in microseconds, which a float holds exactly below 2**53.
        total = np.where(ok, seconds, 0) * 1_000_000 + micros
        ok &= np.abs(total) < _MAX_EXACT_MICROS
        self.ts = total / 1e6
        self.ok = ok


# Flat fields after the message, as either layout writes them (JSON takes either space).
_TAIL = re.compile(
    r'(?:, ?"(?!(?:ts|service|level|message)")[^"]*": ?'
    rf'(?:"[^"]*"|true|false|null|{JSON_NUMBER}))*\}}'
)


def _fast_block(agg: _Aggregator, buf: bytearray, base: int) -> int:
    """Count a block's lines; returns how many lines it held."""
    spec = agg.spec
    block = _FastBlock(buf)
    ts, ok, starts = block.ts, block.ok, block.starts
    in_range = (ts >= spec.baseline_start) & (ts <= spec.window_end)
    # A line outside the range is skipped unread, as there, unless a later "ts" field
    # (which json.loads would take) might bring it in.
    skipped = ok & ~in_range & ((block.flags & _blockscan.FLAG_LATER_TS) == 0)
    # "0x" in a message: its masking does not follow from the digit shape alone.
    plain = ok & in_range & ((block.flags & _blockscan.FLAG_HEX) == 0)
    rows = np.flatnonzero(plain)
    slow = ~plain & ~skipped
    if len(rows):
        slow[rows[~_shape_rows(agg, block, rows, base)]] = True
    for row in np.flatnonzero(slow).tolist():
        text = buf[starts[row] : block.ends[row]].decode("utf-8", "replace")
        agg.add_jsonl_line(base + row, text)
    return block.lines


def _line_keys(block: _FastBlock, rows: np.ndarray) -> tuple[list[bytes], list[np.ndarray]]:
    """The distinct line keys of ``rows`` in the order they first occur, and each key's
    members (positions in ``rows``, in file order).

    A key runs from the line's service to its end, every digit as 1, the contents of
    string values after the message emptied (``_as_written`` gives the service and level
    back as written).
    """
    found = _blockscan.line_keys(
        block.buf, block.q, block.ends, np.ascontiguousarray(rows, dtype=np.int64)
    )
    return _keys_grouped(found)


def _keys_grouped(found: tuple[list[bytes], bytes, bytes]) -> tuple[list[bytes], list[np.ndarray]]:
    """``line_keys``' or ``plain_keys``' result as the keys and each key's members."""
    keys, order, sizes = found
    bounds = np.cumsum(np.frombuffer(sizes, np.int64))[:-1]
    return keys, np.split(np.frombuffer(order, np.int64), bounds)


def _shape_rows(agg: _Aggregator, block: _FastBlock, rows: np.ndarray, base: int) -> np.ndarray:
    """Count the lines whose masking follows from their message's digit shape.

    The lines of one line key (``_line_keys``) mask alike, and the key's end says whether
    they are flat JSON fields. Returns, per row, whether it was counted (the others go
    line by line).
    """
    spec = agg.spec
    arr, q = block.arr, block.q
    keys, members_by_id = _line_keys(block, rows)
    # Keys write every digit as 1, which would hide a number with a leading zero (not
    # JSON) in the fields after the message: such lines go line by line.
    counted = (block.flags[rows] & _blockscan.FLAG_LEADING_ZERO) == 0
    ts = block.ts[rows]
    in_window = ts >= spec.window_start
    log_filter = spec.log_filter
    for key, all_members in zip(keys, members_by_id, strict=True):
        members = all_members[counted[all_members]]
        if not len(members):
            continue
        read = agg.key_read(key)
        if read is None:
            counted[members] = False  # not flat JSON after the message, or see _recipe_of
            continue
        parsed, recipe, raw_offsets = read
        for service_bytes, level_bytes, written in _as_written(block, rows, members, parsed):
            service = service_bytes.decode("utf-8", "replace")
            level = agg.level(level_bytes.decode("utf-8", "replace"))
            if log_filter.selective and not log_filter.fields_match(service, level, ""):
                continue
            sample_of = _json_sampler(block, service, level)
            msg_start = q[rows[written], 14] + 1
            for masked, part in _masked_parts(arr, msg_start, recipe, raw_offsets):
                members_part = written if part is None else written[part]
                key3 = (service, level, masked)
                _group_add(agg, rows, members_part, key3, base, in_window, ts, sample_of)
    return counted


def _masked_parts(
    arr: np.ndarray, msg_start: np.ndarray, recipe: Any, raw_offsets: np.ndarray
) -> Iterator[tuple[str, np.ndarray | None]]:
    """The masked messages of lines of one recipe whose messages start at ``msg_start``,
    each with which of the lines have it (None: all of them)."""
    if isinstance(recipe, str):
        yield recipe, None
        return
    template = recipe[0]
    kept = arr[msg_start[:, None] + raw_offsets]
    if (kept == kept[0]).all():  # the usual case: the same digits on every line
        yield template % tuple(chr(b) for b in kept[0].tolist()), None
        return
    combos, which = np.unique(kept, axis=0, return_inverse=True)
    which = which.reshape(-1)
    for c, combo in enumerate(combos.tolist()):
        yield template % tuple(chr(b) for b in combo), which == c


def _json_sampler(block: _FastBlock, service: str, level: str) -> Callable[[int], str]:
    """A line's sample as ``add_line`` writes it for a JSON line."""

    def sample_of(row: int) -> str:
        q = block.q[row]
        ts_text = block.buf[q[2] + 1 : q[3]].decode("ascii")
        message = _message_text(block.buf[q[14] + 1 : q[15]])
        return f"{ts_text} {service} {level or '-'} {message}"

    return sample_of


def _recipe_of(masker: MessageMasker, shape: bytes) -> tuple[Any, tuple[int, ...]]:
    """How lines of this message shape mask, and the raw offsets of the digits that survive.

    (None, ()) when they must be read line by line: not UTF-8, a masking that takes each
    message itself, or an escape ``_unescaped_shape`` does not read.
    """
    raw_at: list[int] | None = None
    if b"\\" in shape:
        unescaped = _unescaped_shape(shape)
        if unescaped is None:
            return None, ()
        shape, raw_at = unescaped
    recipe, offsets = _shape_recipe(masker, shape)
    return recipe, offsets if raw_at is None else tuple(raw_at[i] for i in offsets)


def _shape_recipe(masker: MessageMasker, shape: bytes) -> tuple[Any, tuple[int, ...]]:
    """How messages of this shape (UTF-8, digits as 1) mask, and the offsets of the digits
    that survive; (None, ()) when not UTF-8 or when the masking takes each message itself."""
    recipe = masker.recipe(shape)
    if recipe is None or isinstance(recipe, str):
        return recipe, ()
    offsets = recipe[2]
    if offsets is None:
        return None, ()
    return recipe, offsets


# The JSON escapes a message may hold and still be counted by its shape: \" \\ \/ \t, a line
# break (\n or \r\n, which the message shows as LINE_BREAK_MARK: stack traces) and a \uXXXX
# of a character beyond ASCII (CJK text from json.dumps' default ensure_ascii). Any other (a
# lone \r, a letter or digit written as an escape, half of a surrogate pair) sends the lines
# to that code.
_ESCAPE = re.compile(rb'\\(?:u([0-9a-fA-F]{4})|(["\\/t]|n|r\\n))')
_ESCAPED = {
    b'"': b'"',
    b"\\": b"\\",
    b"/": b"/",
    b"t": b"\t",
    b"n": LINE_BREAK_MARK.encode(),
    b"r\\n": LINE_BREAK_MARK.encode(),
}


def _unescaped_shape(shape: bytes) -> tuple[bytes, list[int]] | None:
    """A message shape written with JSON escapes as the shape of its text (UTF-8), and the
    raw offset each byte of that comes from; None for an escape ``_ESCAPE`` does not take."""
    out = bytearray()
    raw_at: list[int] = []
    at = 0
    for match in _ESCAPE.finditer(shape):
        literal = shape[at : match.start()]
        if b"\\" in literal:
            return None
        out += literal
        raw_at.extend(range(at, match.start()))
        code = match.group(1)
        if code is not None:
            number = int(code, 16)
            if number < 0x80 or 0xD800 <= number <= 0xDFFF:
                return None
            text = chr(number).encode("utf-8")
        else:
            text = _ESCAPED[match.group(2)]
        out += text
        raw_at.extend([match.start()] * len(text))
        at = match.end()
    if b"\\" in shape[at:]:
        return None
    out += shape[at:]
    raw_at.extend(range(at, len(shape)))
    return bytes(out), raw_at


def _message_text(raw: bytes | bytearray) -> str:
    """A message's text as ``jsonl_line_parse`` gives it (its escapes are ones ``_ESCAPE``
    takes)."""
    if b"\\" in raw:
        return message_single_line(json.loads(b'"' + bytes(raw) + b'"'))
    return raw.decode("utf-8", "replace")


def _as_written(
    block: _FastBlock, rows: np.ndarray, members: np.ndarray, parsed: tuple[bytes, bytes, bytes]
) -> Iterator[tuple[bytes, bytes, np.ndarray]]:
    """The members of one line key by service and level as written (a key writes their
    digits as 1), in the order they first occur."""
    service, level, _shape = parsed
    if b"1" not in service and b"1" not in level:
        yield service, level, members
        return
    buf, q = block.buf, block.q
    by_written: dict[tuple[bytes, bytes], list[int]] = {}
    for member in members.tolist():
        at = q[rows[member]]
        written = (bytes(buf[at[6] + 1 : at[7]]), bytes(buf[at[10] + 1 : at[11]]))
        by_written.setdefault(written, []).append(member)
    for (service, level), part in by_written.items():
        yield service, level, np.array(part, dtype=members.dtype)


# A JSON string's contents, up to its closing quote (escapes are read whole).
_STRING_BODY = re.compile(rb'(?:[^"\\]|\\.)*', re.DOTALL)


def _key_parse(key: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(service, level, message shape) of a line key, None when its end is not flat JSON."""
    service, _, rest = key.partition(b'"')
    for _prefix, _service, level_key, message_key in _LAYOUTS:
        if rest.startswith(level_key[1:]):
            level, _, rest = rest[len(level_key) - 1 :].partition(b'"')
            if rest.startswith(message_key[1:]):
                body = _STRING_BODY.match(rest, len(message_key) - 1)
                if body is None:  # never: the pattern matches the empty string too
                    return None
                shape, tail = body.group(), rest[body.end() + 1 :]
                return (service, level, shape) if _tail_valid(tail) else None
    return None


def _tail_valid(tail: bytes) -> bool:
    """Whether a key's end is flat JSON fields (read once per key: ``key_read`` keeps it)."""
    return _TAIL.fullmatch(tail.decode("utf-8", "replace")) is not None


def _group_add(
    agg: _Aggregator,
    rows: np.ndarray,
    members: np.ndarray,
    key: GroupKey,
    base: int,
    in_window: np.ndarray,
    ts: np.ndarray,
    sample_of: Callable[[int], str],
) -> None:
    """Lines ``rows[members]`` (in file order) of one group; ``sample_of`` gives a row's
    sample."""
    spec = agg.spec
    window = in_window[members]
    member_ts = ts[members]
    first_row = int(rows[members[0]])
    stats = agg.groups.get(key)
    if stats is None:
        stats = agg.groups[key] = GroupStats(first=base + first_row)
        agg.masked.add(key[2])
    elif base + first_row < stats.first:
        stats.first = base + first_row
    n_window = int(window.sum())
    stats.count_window += n_window
    stats.count_baseline += len(members) - n_window
    low, high = float(member_ts.min()), float(member_ts.max())
    if low < stats.first_seen:
        stats.first_seen = low
    if high > stats.last_seen:
        stats.last_seen = high
    for side, samples in ((True, stats.samples), (False, stats.baseline_samples)):
        for member in members[window == side][: spec.limit].tolist():
            row = int(rows[member])
            if len(samples) >= spec.limit and base + row > samples[-1][0]:
                break
            _sample_keep(samples, base + row, sample_of(row), spec.limit)


# Plain lines the fast path leaves to the line-by-line code: control bytes but the tab,
# "0x" (its masking does not follow from the digit shape), no stamp in the strict form the C
# module reads (see plain_stamp_read in _blockscan.c).
_PLAIN_NOT_FAST = _blockscan.FLAG_CONTROL | _blockscan.FLAG_HEX | _blockscan.FLAG_STAMP


class _PlainBlock:
    """The lines of one block of a plain ``.log`` file, as the C module reads them.

    ``ok`` marks the lines whose stamp it read (a value a float holds exactly) and that
    hold no byte sending them line by line; ``rest`` is where each one's text after the
    stamp starts.
    """

    def __init__(self, buf: bytearray) -> None:
        self.buf, self.arr = buf, np.frombuffer(buf, _U8)
        index = _blockscan.plain_index(buf)
        starts, ends, rest, seconds, micros = (np.frombuffer(a, np.int64) for a in index[:5])
        self.starts, self.ends, self.rest = starts, ends, rest
        ok = (np.frombuffer(index[5], np.uint16) & _PLAIN_NOT_FAST) == 0
        total = np.where(ok, seconds, 0) * 1_000_000 + micros
        ok &= np.abs(total) < _MAX_EXACT_MICROS
        self.ts = total / 1e6
        self.ok = ok

    def line(self, row: int) -> str:
        """The line's text, as ``text_decode`` gives it (the sample is the whole line)."""
        return self.buf[self.starts[row] : self.ends[row]].decode("utf-8", "replace")


def _plain_block(agg: _Aggregator, buf: bytearray, base: int, service: str) -> int:
    """Count a block of plain lines of one service; returns how many lines it held.

    A line outside the range is dropped unread, as ``add_record`` drops it.
    """
    spec = agg.spec
    block = _PlainBlock(buf)
    ts, ok = block.ts, block.ok
    rows = np.flatnonzero(ok & (ts >= spec.baseline_start) & (ts <= spec.window_end))
    slow = ~ok
    if len(rows):
        slow[rows[~_plain_rows(agg, block, rows, base, service)]] = True
    for row in np.flatnonzero(slow).tolist():
        agg.add_plain_line(base + row, block.line(row), service)
    return len(block.ends)


def _plain_rows(
    agg: _Aggregator, block: _PlainBlock, rows: np.ndarray, base: int, service: str
) -> np.ndarray:
    """Count plain lines by their line key; returns, per row, whether it was counted."""
    spec = agg.spec
    keys, members_by_id = _keys_grouped(
        _blockscan.plain_keys(
            block.buf, block.rest, block.ends, np.ascontiguousarray(rows, dtype=np.int64)
        )
    )
    counted = np.ones(len(rows), dtype=bool)
    ts = block.ts[rows]
    in_window = ts >= spec.window_start
    log_filter = spec.log_filter
    for key, members in zip(keys, members_by_id, strict=True):
        read = agg.plain_key_read(key)
        if read is None:
            counted[members] = False
            continue
        level, recipe, offsets = read
        if log_filter.selective and not log_filter.fields_match(service, level, ""):
            continue
        rest = block.rest[rows[members]]
        for masked, part in _masked_parts(block.arr, rest, recipe, offsets):
            members_part = members if part is None else members[part]
            key3 = (service, level, masked)
            _group_add(agg, rows, members_part, key3, base, in_window, ts, block.line)
    return counted


def chunk_scan(
    *,
    path: Path,
    start: int,
    end: int,
    number: int,
    spec: ScanSpec,
    jsonl: bool,
    stop: threading.Event | None = None,
) -> Groups | None:
    """The groups of one chunk of one file (in a thread of the scan, or in-process).

    None as soon as the chunk alone holds more distinct masked messages than the mask
    cache (the whole input is then read line by line), or once ``stop`` is set.
    """
    agg = _Aggregator(spec)
    base = number * LINE_SLOTS
    service = path.stem
    # The plain fast path matches no text filter (the counting scan is run without one).
    fields_only = spec.log_filter.text is None and spec.log_filter.pattern is None
    for buf in _byte_blocks(path, start, end, spec.deadline):
        if stop is not None and stop.is_set():
            return None
        if b"\r" in buf:
            buf = _newlines_unified(buf)
        if jsonl and len(buf) >= 64:
            base += _fast_block(agg, buf, base)
        elif not jsonl and fields_only:
            base += _plain_block(agg, buf, base, service)
        else:
            base += _text_block(agg, buf, base, service, jsonl)
        # Past the mask cache only the line-by-line scan can say: stop counting at once.
        if len(agg.masked) > clustering.MASK_CACHE_SIZE:
            return None
    return agg.groups


def _newlines_unified(buf: bytearray) -> bytearray:
    """The block with ``\r\n`` and a lone ``\r`` as ``\n``, the lines ``text_decode`` (text-mode
    reading) splits it into: ``\r`` is never part of a UTF-8 sequence, so doing it on the bytes
    gives the same text. A block ends with a newline, so never inside a ``\r\n``."""
    arr = np.frombuffer(buf, _U8)
    returns = np.flatnonzero(arr == 13)
    if arr[-1] == 10 and (arr[returns + 1] == 10).all():
        return buf.translate(None, b"\r")  # Windows line ends only: ~5x faster than replace
    return buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _text_block(agg: _Aggregator, buf: bytearray, base: int, service: str, jsonl: bool) -> int:
    """A block read line by line, as the line-by-line scan reads it; returns its lines."""
    lines = text_decode(buf).split("\n")[:-1]
    for i, line in enumerate(lines):
        if jsonl:
            agg.add_jsonl_line(base + i, line)
        else:
            agg.add_plain_line(base + i, line, service)
    return len(lines)


def _chunks(
    files: list[Path], log_filter: LogFilter, pieces_per_byte: float
) -> list[tuple[Path, int, int, bool]]:
    """(file, start, end, is JSON lines) in the order the line-by-line scan reads them."""
    out: list[tuple[Path, int, int, bool]] = []
    for path in sorted(files):
        jsonl = path.suffix != ".log"
        if not jsonl and not log_filter.service_allows(path.stem):
            continue
        size = path.stat().st_size
        pieces = max(1, round(size * pieces_per_byte))
        offsets = _line_starts(path, size, pieces) if pieces > 1 else [0, size]
        out.extend((path, a, b, jsonl) for a, b in itertools.pairwise(offsets))
    return out


def _workers() -> int:
    """Processes or threads one scan uses: ``LOG_SCAN_WORKERS``, else the cores this
    process may use."""
    if settings.LOG_SCAN_WORKERS:
        return int(settings.LOG_SCAN_WORKERS)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _groups_run(
    tasks: list[tuple[Path, int, int, bool]], spec: ScanSpec, workers: int
) -> Iterator[Groups | None]:
    """Each chunk's groups, in chunk order."""
    if workers <= 1 or len(tasks) <= 1:
        for number, (path, start, end, jsonl) in enumerate(tasks):
            yield chunk_scan(path=path, start=start, end=end, number=number, spec=spec, jsonl=jsonl)
        return
    # Threads, not processes: the C half, numpy and the reads release the GIL, a Celery
    # prefork child (a daemon) may not start processes, and worker processes paid ~3x the
    # page faults (their heap shrinks and grows again every block).
    pool = ThreadPoolExecutor(max_workers=min(workers, len(tasks)), thread_name_prefix="logscan")
    stop = threading.Event()
    try:
        futures: list[Future[Groups | None]] = [
            pool.submit(
                chunk_scan,
                path=path,
                start=start,
                end=end,
                number=number,
                spec=spec,
                jsonl=jsonl,
                stop=stop,
            )
            for number, (path, start, end, jsonl) in enumerate(tasks)
        ]
        for future in futures:
            try:
                yield future.result(timeout=max(spec.deadline.remaining(), 0.0))
            except FutureTimeout:
                raise ToolTimeout(
                    f"the backend did not answer within {spec.deadline.seconds:g}s"
                ) from None
    except BaseException:
        # Not read to the end (a timeout, too many messages, an error): every thread stops
        # at its next block.
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def files_count(
    *,
    files: list[Path],
    log_filter: LogFilter,
    window: QueryWindow,
    limit: int,
    deadline: Deadline,
) -> LogClusterer | None:
    """The clusterer the line-by-line scan would end with, or None when only it can say.

    None when the input holds more distinct masked messages than that scan's mask cache.
    """
    spec = ScanSpec(
        window_start=window.start.timestamp(),
        window_end=window.end.timestamp(),
        baseline_start=window.baseline_start.timestamp(),
        head_low=second_floor(window.baseline_start) or "",
        head_high=second_floor(window.end) or "\uffff",
        log_filter=log_filter,
        limit=limit,
        deadline=deadline,
    )
    total = sum(path.stat().st_size for path in files)
    workers = _workers() if total >= PARALLEL_MIN_BYTES else 1
    pieces_per_byte = 1 / CHUNK_BYTES if workers > 1 else 0.0
    merged: Groups = {}
    for groups in _groups_run(_chunks(files, log_filter, pieces_per_byte), spec, workers):
        if groups is None:
            return None
        for key, group in groups.items():
            into = merged.get(key)
            if into is None:
                merged[key] = group
                continue
            into.count_window += group.count_window
            into.count_baseline += group.count_baseline
            into.first_seen = min(into.first_seen, group.first_seen)
            into.last_seen = max(into.last_seen, group.last_seen)
            into.samples = (into.samples + group.samples)[:limit]
            into.baseline_samples = (into.baseline_samples + group.baseline_samples)[:limit]
    # Masked messages in the order they first occur, as the line-by-line scan meets them.
    first_of: dict[str, int] = {}
    for (_service, _level, masked), group in merged.items():
        if group.first < first_of.get(masked, LINE_SLOTS * LINE_SLOTS):
            first_of[masked] = group.first
    if len(first_of) > clustering.MASK_CACHE_SIZE:
        return None
    clusterer = LogClusterer(window=window, limit=limit)
    cluster_of = {
        masked: clusterer._cluster_id_masked(masked)
        for masked in sorted(first_of, key=first_of.__getitem__)
    }
    # Templates' statistics in the order their first line occurs, as that scan makes them.
    samples: dict[tuple[str, str, int], tuple[list[tuple[int, str]], list[tuple[int, str]]]] = {}
    for (service, level, masked), group in sorted(merged.items(), key=lambda i: i[1].first):
        cluster_id = cluster_of[masked]
        if cluster_id is None:
            for in_window, n in ((True, group.count_window), (False, group.count_baseline)):
                if n:
                    clusterer.unclustered_lines[in_window, level, service] += n
            continue
        template_key = (service, level, cluster_id)
        stats = clusterer.stats.get(template_key)
        if stats is None:
            stats = clusterer.stats[template_key] = TemplateStats(service, level, cluster_id)
            samples[template_key] = ([], [])
        stats.count_window += group.count_window
        stats.count_baseline += group.count_baseline
        stats.first_seen = min(stats.first_seen, group.first_seen)
        stats.last_seen = max(stats.last_seen, group.last_seen)
        window_samples, baseline_samples = samples[template_key]
        window_samples.extend(group.samples)
        baseline_samples.extend(group.baseline_samples)
    for template_key, (window_samples, baseline_samples) in samples.items():
        stats = clusterer.stats[template_key]
        stats.samples = [text for _, text in sorted(window_samples)[:limit]]
        stats.baseline_samples = [text for _, text in sorted(baseline_samples)[:limit]]
    return clusterer
