"""The invocations the Gatekeeper checks against, and the knowledge blocks of their outputs.

``InvocationRecord`` is what the Gatekeeper needs of a ``tool_invocation`` row;
``knowledge_blocks`` splits a ``lookup_knowledge`` output into the blocks of the
chunks it returned (docs/contracts.md §2: a knowledge excerpt must lie inside its
chunk's block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnosis.evidence.tools import tool_definition

STATUS_OK = "ok"

KIND_EVIDENCE = "evidence"
KIND_KNOWLEDGE = "knowledge"
KIND_OTHER = "other"


@dataclass(frozen=True)
class InvocationRecord:
    """What the Gatekeeper needs of a ``tool_invocation`` row."""

    id: int
    session_id: int
    trace_ref: str
    tool_name: str
    status: str
    output: str
    summary: dict
    arguments: Any = None  # the arguments the tool was called with (gatekeeper_v2 binds by them)


_BLOCK_HEADER = re.compile(r"^===[ \t]*([^|\n]+?)[ \t]*(?:\|[^\n]*)?===[ \t]*\r?$", re.MULTILINE)


def _returned_chunk_ids(summary: object) -> set[str] | None:
    if not isinstance(summary, dict) or not isinstance(summary.get("chunks"), list):
        return None
    ids = set()
    for chunk in summary["chunks"]:
        if isinstance(chunk, dict) and isinstance(chunk.get("chunk_id"), str):
            ids.add(chunk["chunk_id"].strip())
    return ids


def knowledge_blocks(output: str, summary: object) -> list[tuple[str, int, int]]:
    """``(chunk_id, start, end)`` of each returned chunk's block in a lookup_knowledge output."""
    returned = _returned_chunk_ids(summary)
    headers = []
    for match in _BLOCK_HEADER.finditer(output or ""):
        chunk_id = match.group(1).strip()
        if returned is None or chunk_id in returned:
            headers.append((chunk_id, match.start()))
    blocks = []
    for k, (chunk_id, start) in enumerate(headers):
        end = headers[k + 1][1] if k + 1 < len(headers) else len(output)
        blocks.append((chunk_id, start, end))
    return blocks


def tool_kind(tool_name: str) -> str:
    """The registered tool's kind (evidence or knowledge); an unknown tool is other."""
    definition = tool_definition(tool_name)
    return definition.kind if definition is not None else KIND_OTHER


def knowledge_tool_is(tool_name: str) -> bool:
    """Whether the registered tool is a knowledge tool (its output is chunk blocks)."""
    return tool_kind(tool_name) == KIND_KNOWLEDGE
