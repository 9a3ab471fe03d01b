"""Replay of recorded tool calls (a pack's ``recorded/invocations.jsonl``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

STATUSES = ("ok", "no_data", "error", "timeout")


def arguments_normalise(value: Any) -> Any:
    """Drop keys whose value is null, at every level, so ``{"k": null}`` equals ``{}``."""
    if isinstance(value, dict):
        return {k: arguments_normalise(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [arguments_normalise(v) for v in value]
    return value


@dataclass(frozen=True)
class RecordedCall:
    line: int
    tool_name: str
    arguments: dict[str, Any]
    status: str
    output: str
    summary: dict[str, Any] | None


def recorded_find(*, path: Path, tool_name: str, arguments: dict[str, Any]) -> RecordedCall | None:
    """The first recorded call with this tool and equal arguments (nulls dropped), or None."""
    wanted = arguments_normalise(arguments)
    stat = path.stat()
    for call, normalised in _recorded_calls(path, stat.st_mtime_ns, stat.st_size):
        if call.tool_name == tool_name and normalised == wanted:
            return call
    return None


@lru_cache(maxsize=16)
def _recorded_calls(path: Path, mtime_ns: int, size: int) -> tuple[tuple[RecordedCall, Any], ...]:
    """Every usable record of the file with its normalised arguments, read once per version."""
    calls = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict) or not isinstance(record.get("tool_name"), str):
                continue
            recorded_args = record.get("arguments") or {}
            if not isinstance(recorded_args, dict):
                continue
            status = record.get("status", "ok")
            output = record.get("output")
            if status not in STATUSES or not isinstance(output, str):
                continue
            summary = record.get("summary")
            call = RecordedCall(
                line=number,
                tool_name=record["tool_name"],
                arguments=recorded_args,
                status=status,
                output=output,
                summary=summary if isinstance(summary, dict) else None,
            )
            calls.append((call, arguments_normalise(recorded_args)))
    return tuple(calls)


def recorded_tool_names(path: Path) -> frozenset[str]:
    """The tools a recording holds calls of."""
    stat = path.stat()
    return frozenset(c.tool_name for c, _ in _recorded_calls(path, stat.st_mtime_ns, stat.st_size))
