"""The file backend of query_logs: a pack's log files scanned line by line, or, for big
unfiltered scans, counted by masked line in parallel (``logscan``, same result)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from diagnosis.evidence.common import (
    BackendOutput,
    Deadline,
    QueryWindow,
)
from diagnosis.evidence.tools.query_logs import logscan
from diagnosis.evidence.tools.query_logs.clustering import LogClusterer
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.linescan import FileScan
from diagnosis.evidence.tools.query_logs.render import logs_render


def logs_from_files(
    *,
    files: Iterable[Path],
    log_filter: LogFilter,
    window: QueryWindow,
    limit: int,
    deadline: Deadline,
) -> BackendOutput:
    files = list(files)
    if log_filter.text is None and log_filter.pattern is None:
        # Text and pattern filters are cut with str.find first: only count big unfiltered scans.
        if sum(path.stat().st_size for path in files) >= logscan.AGGREGATE_MIN_BYTES:
            counted = logscan.files_count(
                files=files, log_filter=log_filter, window=window, limit=limit, deadline=deadline
            )
            if counted is not None:
                return logs_render(clusterer=counted, window=window, log_filter=log_filter)
    clusterer = LogClusterer(window=window, limit=limit)
    scan = FileScan(clusterer=clusterer, log_filter=log_filter, window=window)
    for path in sorted(files):
        if path.suffix != ".log":
            scan.jsonl_file(path, deadline)
        elif log_filter.service_allows(path.stem):
            scan.plain_file(path, deadline)
    return logs_render(clusterer=clusterer, window=window, log_filter=log_filter)
