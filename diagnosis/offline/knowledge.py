"""Runbook lookup: the query for the leading suspect and the chunks the answer may cite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnosis.evidence import vocab
from diagnosis.llm.base import ToolRunner

from .analysis import Call, Suspect
from .gather import KNOWLEDGE_K, Evidence, tool_call
from .texts import subkind_names
from .wording import short_text


@dataclass
class Chunk:
    call: Call
    chunk_id: str
    title: str
    heading: str
    header: str


def knowledge_query(top: Suspect | None, suspects: list[Suspect], plan: dict[str, Any]) -> str:
    """The runbook search for the leading suspect: its fault's subkind, the series and
    templates that show its fault (``Suspect.own_metrics``: a series that eased is a change
    but no fault, and a runbook for it is not one for this incident), and the question's
    symptoms."""
    words: list[str] = []
    if top is not None:
        if top.subkind:
            words += [subkind_names("zh")[top.subkind], subkind_names("en")[top.subkind]]
        for metric in top.own_metrics[:2]:
            words.append(metric.metric)
        for lg in top.abnormal_logs[:2]:
            words.append(short_text(lg.template, 60))
    for symptom in plan.get("symptoms") or []:
        if isinstance(symptom, str):
            words.append(symptom)
    if not words:
        words = [s.service for s in suspects[:2]] or ["incident"]
    query = " ".join(w for w in words if w)
    return query[:200]


def knowledge_lookup(tools: ToolRunner, evidence: Evidence, query: str) -> list[Chunk]:
    call = tool_call(tools, evidence, "lookup_knowledge", {"query": query, "k": KNOWLEDGE_K})
    return chunks_of(call)


def chunks_of(call: Call) -> list[Chunk]:
    if not call.ok:
        return []
    chunks = []
    for item in call.summary.get("chunks") or []:
        if not isinstance(item, dict):
            continue
        chunk_id = str(item.get("chunk_id") or "")
        title = str(item.get("document_title") or "")
        heading = str(item.get("heading") or "")
        if not chunk_id or vocab.looks_like_instruction(f"{title} {heading}"):
            continue
        header = f"{chunk_id} | {title}"
        if not call.contains(header):
            header = chunk_id if call.contains(chunk_id) and len(chunk_id) >= 8 else ""
        chunks.append(
            Chunk(call=call, chunk_id=chunk_id, title=title, heading=heading, header=header)
        )
    return chunks


def chunks_gather(tools: ToolRunner, evidence: Evidence, query: str) -> list[Chunk]:
    """The runbook chunks of one lookup, plus those a retry's own lookups found."""
    chunks = knowledge_lookup(tools, evidence, query)
    first = chunks_call(chunks)
    for call in evidence.calls:
        if call.tool_name == "lookup_knowledge" and call is not first:
            for chunk in chunks_of(call):
                if chunk.chunk_id not in {c.chunk_id for c in chunks}:
                    chunks.append(chunk)
    return chunks


def chunks_call(chunks: list[Chunk]) -> Call | None:
    return chunks[0].call if chunks else None
