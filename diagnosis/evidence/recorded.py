"""Replay of recorded tool calls (a pack's ``recorded/invocations.jsonl``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
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
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict) or record.get("tool_name") != tool_name:
                continue
            recorded_args = record.get("arguments") or {}
            if not isinstance(recorded_args, dict) or arguments_normalise(recorded_args) != wanted:
                continue
            status = record.get("status", "ok")
            output = record.get("output")
            if status not in STATUSES or not isinstance(output, str):
                continue
            summary = record.get("summary")
            return RecordedCall(
                line=number,
                tool_name=tool_name,
                arguments=recorded_args,
                status=status,
                output=output,
                summary=summary if isinstance(summary, dict) else None,
            )
    return None
