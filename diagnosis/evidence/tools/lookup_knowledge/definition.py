"""lookup_knowledge: BM25 search over the environment's runbooks and incident notes."""

from __future__ import annotations

from typing import Any

from diagnosis.evidence.common import BackendOutput
from diagnosis.evidence.tools.base import Arg, ToolCall, ToolDefinition
from diagnosis.evidence.tools.lookup_knowledge.search import DEFAULT_K, MAX_K, knowledge_lookup


def _empty() -> dict[str, Any]:
    return {"query": "", "chunks": []}


def _run(call: ToolCall) -> BackendOutput:
    return knowledge_lookup(
        environment=call.environment, query=call.args["query"], k=call.args.get("k", DEFAULT_K)
    )


def _facts(summary: dict[str, Any]) -> list[str]:
    """One line per chunk found: its id, document and section."""
    return [
        f"{c.get('chunk_id')}: {c.get('document_title')} / {c.get('heading') or '(intro)'}"
        for c in summary.get("chunks") or []
    ]


def _cut(summary: dict[str, Any], output: str) -> dict[str, Any]:
    """Only the chunks whose header and text the truncated output still shows."""
    out = dict(summary)
    if isinstance(out.get("chunks"), list):
        out["chunks"] = [
            c
            for c in out["chunks"]
            if f"=== {c.get('chunk_id')} |" in output and c.get("text", "") in output
        ]
    return out


DEFINITION = ToolDefinition(
    name="lookup_knowledge",
    purpose="runbooks and past-incident notes",
    description=(
        "Search the runbooks and past-incident notes (Chinese or English). Each result "
        "starts with '=== <chunk_id> | <title> / <section> ===' followed by the section "
        "text; cite a chunk by its chunk_id. Runbooks describe what may happen, not what "
        "is happening now."
    ),
    args=(
        Arg(
            "query",
            "string",
            "What to look for, e.g. 连接池耗尽 or connection pool exhausted.",
            required=True,
        ),
        Arg(
            "k",
            "integer",
            f"How many chunks to return (default {DEFAULT_K}).",
            minimum=1,
            maximum=MAX_K,
        ),
    ),
    run=_run,
    empty_summary=_empty,
    kind="knowledge",
    facts=_facts,
    summary_cut=_cut,
)
