"""The line-by-line scan of pack log files (JSON lines and plain text) into a clusterer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from diagnosis.evidence.common import (
    Deadline,
    QueryWindow,
)
from diagnosis.evidence.formats import (
    LogRecord,
    jsonl_line_parse,
    level_normalise,
    log_time_parse,
    plain_line_parse,
)
from diagnosis.evidence.tools.query_logs.clustering import LogClusterer
from diagnosis.evidence.tools.query_logs.filter import LogFilter

READ_BLOCK_BYTES = 1 << 16


# A string character json.loads takes as it is: not a quote, a backslash or a control.
_C = r"[ !#-\[\]-\U0010ffff]"
JSON_NUMBER = r"-?(?:0|[1-9][0-9]{0,50})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_UTC_STAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z"
# The layout json.dumps writes: ts, service, level and message first, then flat fields.
# A line that matches is valid JSON whose fields json.loads would return verbatim (no
# escapes, no control characters, no repeated key among the four), so the fields are
# taken from the match; any other line is parsed by jsonl_line_parse. The stamp is UTC
# with fixed-width fields, so its first 19 characters sort as the time does.
JSONL_COMMON = re.compile(
    rf'^\{{"ts": "({_UTC_STAMP})", "service": "({_C}+)", "level": "({_C}*)", "message": "({_C}*)"'
    rf'(?:, "(?!(?:ts|service|level|message)"){_C}*": (?:"{_C}*"|true|false|null|{JSON_NUMBER}))*'
    r"\}\n",
    re.MULTILINE,
)


def _text_blocks(path: Path, deadline: Deadline) -> Iterator[str]:
    r"""The file as text, in blocks of whole lines that each end with a newline.

    Decoded and split as ``open(path, encoding="utf-8", errors="replace")`` would: ``\r\n``
    and a lone ``\r`` end a line too. A block never splits a line (nor a ``\r\n``), and
    ``\n`` never occurs inside a multi-byte character, so decoding block by block gives
    the same text as decoding the whole file.
    """
    pending: list[bytes] = []
    with path.open("rb") as handle:
        while True:
            deadline.check()
            chunk = handle.read(READ_BLOCK_BYTES)
            if not chunk:
                break
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                pending.append(chunk)
                continue
            if pending:
                data: bytes | memoryview = b"".join([*pending, chunk[:cut]])
            else:
                data = memoryview(chunk)[:cut]
            pending = [chunk[cut:]] if cut < len(chunk) else []
            yield text_decode(data)
    if pending:
        yield text_decode(b"".join(pending) + b"\n")


def text_decode(data: bytes | bytearray | memoryview) -> str:
    text = str(data, "utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def second_floor(moment: datetime) -> str | None:
    """The time as the first 19 characters of an RFC 3339 UTC stamp, when they sort as times."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") if 1000 <= moment.year <= 9999 else None


class FileScan:
    """Feeds the records of pack files, in file order, to a clusterer."""

    def __init__(
        self, *, clusterer: LogClusterer, log_filter: LogFilter, window: QueryWindow
    ) -> None:
        self.clusterer = clusterer
        self.log_filter = log_filter
        # A stamp whose first 19 characters sort before the baseline's second (or after the
        # window's end second) is outside the range whatever its fraction: skip it unparsed.
        self.head_low = second_floor(window.baseline_start) or ""
        self.head_high = second_floor(window.end) or "\uffff"
        self.levels: dict[str, str] = {}

    def record(self, record: LogRecord) -> None:
        clusterer = self.clusterer
        if clusterer.in_range(record.ts) and self.log_filter.matches(record):
            clusterer.add(record)

    def plain_file(self, path: Path, deadline: Deadline) -> None:
        service = path.stem
        for text in _text_blocks(path, deadline):
            for line in text.split("\n"):
                if not line.strip():
                    continue
                try:
                    record = plain_line_parse(line, service=service)
                except ValueError:
                    continue
                self.record(record)

    def jsonl_file(self, path: Path, deadline: Deadline) -> None:
        needles = self.log_filter.raw_prefilter()
        for text in _text_blocks(path, deadline):
            if needles:
                text = _lines_with(text, needles)
            self._jsonl_block(text)

    def _jsonl_block(self, text: str) -> None:
        """Every line of ``text``: the common layout read from the match, others parsed."""
        rows = JSONL_COMMON.findall(text)
        if len(rows) == text.count("\n"):  # each match is one whole line: all matched
            self._jsonl_common(rows)
            return
        rows = []
        pos = 0
        for match in JSONL_COMMON.finditer(text):
            if match.start() != pos:  # lines in between: parse them in their turn
                self._jsonl_common(rows)
                rows = []
                self._jsonl_other(text[pos : match.start()])
            rows.append(match.groups())
            pos = match.end()
        self._jsonl_common(rows)
        if pos != len(text):
            self._jsonl_other(text[pos:])

    def _jsonl_common(self, rows: list[tuple[str, str, str, str]]) -> None:
        clusterer = self.clusterer
        add = clusterer.add_fields
        baseline_start, window_end = clusterer.baseline_start, clusterer.window_end
        head_low, head_high = self.head_low, self.head_high
        levels = self.levels
        fields_match = self.log_filter.fields_match if self.log_filter.selective else None
        fromisoformat = datetime.fromisoformat
        for ts_text, service, level_text, message in rows:
            head = ts_text[:19]
            if head < head_low or head > head_high:
                continue
            try:
                ts = fromisoformat(ts_text).timestamp()
            except ValueError:
                try:
                    ts = log_time_parse(ts_text)[0]
                except ValueError:
                    continue
            if not baseline_start <= ts <= window_end:
                continue
            level = levels.get(level_text)
            if level is None:
                if len(levels) >= 1000:
                    levels.clear()
                level = levels[level_text] = level_normalise(level_text)
            if fields_match is not None and not fields_match(service, level, message):
                continue
            add(ts, ts_text, service, level, message)

    def _jsonl_other(self, lines: str) -> None:
        needles = self.log_filter.raw_prefilter()
        for line in lines.split("\n"):
            if needles and not all(n in line for n in needles):
                continue
            if not line.strip():
                continue
            try:
                record = jsonl_line_parse(line)
            except ValueError:
                continue
            self.record(record)


def _lines_with(text: str, needles: list[str]) -> str:
    """The lines of ``text`` that hold every needle, found with str.find (each keeps its \\n)."""
    first, others = needles[0], needles[1:]
    kept = []
    found = text.find(first)
    while found >= 0:
        start = text.rfind("\n", 0, found) + 1
        end = text.index("\n", found) + 1
        line = text[start:end]
        if all(n in line for n in others):
            kept.append(line)
        found = text.find(first, end)
    return "".join(kept)
