"""A scenario pack validated file by file: ``pack_load`` checks every data file of a pack
(metrics, logs, traces, runbooks, recorded invocations, scripted answers, topology) line
by line.

It raises one ``PackError`` listing every problem as ``file:line: message``. Recorded
invocations may name only tools the registry (``diagnosis.evidence.tools``) can replay.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from diagnosis.evidence.formats import (
    jsonl_line_parse,
    openmetrics_comment_check,
    openmetrics_line_parse,
    plain_line_parse,
)
from diagnosis.evidence.packs import PackPaths, ProblemList, ScenarioPack, pack_open, topology_read
from diagnosis.evidence.recorded import STATUSES as RECORDED_STATUSES
from diagnosis.evidence.tools import recordable_tool_names
from diagnosis.evidence.tools.query_traces.otlp import file_problems as trace_file_problems


def _lines(path: Path, problems: ProblemList) -> Iterable[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8", errors="strict") as handle:
            yield from enumerate(handle, start=1)
    except UnicodeDecodeError as exc:
        problems.add(path, None, f"not UTF-8 text ({exc.reason})")
    except OSError as exc:
        problems.add(path, None, f"cannot read: {exc}")


def _metrics_check(path: Path, problems: ProblemList) -> None:
    saw_eof = False
    samples = 0
    for number, line in _lines(path, problems):
        if not line.strip():
            continue
        if saw_eof:
            problems.add(path, number, "content after '# EOF'")
            break
        if line.startswith("#"):
            issue = openmetrics_comment_check(line)
            if issue:
                problems.add(path, number, issue)
            saw_eof = line.split() == ["#", "EOF"]
            continue
        try:
            sample = openmetrics_line_parse(line)
        except ValueError as exc:
            problems.add(path, number, f"malformed OpenMetrics sample: {exc}")
            continue
        if sample is not None:
            samples += 1
            if sample.timestamp is None:
                problems.add(path, number, "sample has no timestamp (Unix seconds)")
    if not saw_eof:
        problems.add(path, None, "missing the final '# EOF' line (promtool needs it)")
    elif samples == 0:
        problems.add(path, None, "no samples")


def _jsonl_check(path: Path, problems: ProblemList) -> None:
    for number, line in _lines(path, problems):
        if not line.strip():
            continue
        try:
            jsonl_line_parse(line)
        except ValueError as exc:
            problems.add(path, number, str(exc))


def _plain_check(path: Path, problems: ProblemList) -> None:
    service = path.stem
    for number, line in _lines(path, problems):
        if not line.strip():
            continue
        try:
            plain_line_parse(line, service=service)
        except ValueError as exc:
            problems.add(path, number, str(exc))


def _recorded_check(path: Path, problems: ProblemList) -> None:
    for number, line in _lines(path, problems):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(path, number, f"not valid JSON ({exc.msg})")
            continue
        if not isinstance(record, dict):
            problems.add(path, number, "a recorded invocation must be a JSON object")
            continue
        recordable = recordable_tool_names()
        if record.get("tool_name") not in recordable:
            problems.add(path, number, f"tool_name must be one of: {', '.join(recordable)}")
        if not isinstance(record.get("arguments", {}), dict):
            problems.add(path, number, "arguments must be an object")
        if record.get("status", "ok") not in RECORDED_STATUSES:
            problems.add(path, number, f"status must be one of: {', '.join(RECORDED_STATUSES)}")
        if not isinstance(record.get("output"), str):
            problems.add(path, number, "output must be a string")


def _knowledge_check(path: Path, problems: ProblemList) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.add(path, None, f"not UTF-8 text ({exc.reason})")
        return
    if not text.strip():
        problems.add(path, None, "empty runbook")


def _scripted_check(folder: Path, problems: ProblemList) -> None:
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            problems.add(path, exc.lineno, f"not valid JSON ({exc.msg})")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.add(path, None, f"cannot read: {exc}")
            continue
        if not isinstance(data, dict) or not ({"content", "tool_calls"} & data.keys()):
            problems.add(path, 1, 'must be {"content": …} or {"tool_calls": […]}')


def _data_check(header: dict[str, Any], paths: PackPaths, problems: ProblemList) -> None:
    for om in paths.metrics:
        _metrics_check(om, problems)
    for jl in paths.logs_jsonl:
        _jsonl_check(jl, problems)
    for pl in paths.logs_plain:
        _plain_check(pl, problems)
    for md in paths.knowledge:
        _knowledge_check(md, problems)
    for traces in paths.traces:
        for line, message in trace_file_problems(traces):
            problems.add(traces, line, message)
    if paths.recorded:
        _recorded_check(paths.recorded, problems)
    if paths.scripted:
        _scripted_check(paths.scripted, problems)
    if paths.topology:
        topology_read(paths.topology, problems, header.get("services", ()))


def pack_load(path: Path | str, *, check_data: bool = True) -> ScenarioPack:
    """Load a pack; with ``check_data`` every data file is validated line by line.

    Raises ``PackError`` listing every problem found (file and line).
    """
    return pack_open(path, _data_check if check_data else None)
