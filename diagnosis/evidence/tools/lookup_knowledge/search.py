"""lookup_knowledge's backend: runbook chunks ranked with BM25 over jieba-segmented text.

The index is built once per process for each environment and knowledge version.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import bm25s
import jieba
from django.db.models import Count, Max, Q

from diagnosis.evidence.common import BackendOutput
from diagnosis.models import Environment, KnowledgeChunk, KnowledgeDocument

jieba.setLogLevel(logging.WARNING)
# bm25s sets its own logger to DEBUG on import (after LOGGING is applied), so every index
# build would print a line; its debug lines say nothing an operator needs.
logging.getLogger("bm25s").setLevel(logging.WARNING)

DEFAULT_K = 5
MAX_K = 20
MAX_CHUNK_CHARS = 2500
INTRO_LABEL = "(intro)"  # how the text before the first section is named in headers
_STOPWORDS = frozenset(
    "a an and are as at be by for from how in is it of on or the this to was what when where "
    "which who why with do does did can could should would i we you our my me "
    "的 了 是 在 和 与 或 及 吗 呢 吧 啊 我 我们 你 你们 他 她 它 这 那 个 "
    "帮 帮我 看看 一下 怎么 什么 为什么 如何 请 有 没有 就 都 也 把 被".split()
)


def text_tokenize(text: str) -> list[str]:
    """Lowercased jieba search-mode tokens, no punctuation or stopwords, English plurals folded."""
    tokens = []
    for raw in jieba.cut_for_search(text.lower()):
        token = raw.strip()
        if not token or not any(ch.isalnum() for ch in token) or token in _STOPWORDS:
            continue
        if token.isascii() and len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        tokens.append(token)
    return tokens


@dataclass(frozen=True)
class IndexedChunk:
    chunk_id: str
    document_title: str
    heading: str
    text: str


@dataclass
class KnowledgeIndex:
    version: tuple[Any, ...]
    chunks: list[IndexedChunk]
    retriever: bm25s.BM25 | None

    def search(self, query: str, k: int) -> list[tuple[IndexedChunk, float]]:
        tokens = text_tokenize(query)
        if not tokens or self.retriever is None:
            return []
        scores = self.retriever.get_scores(tokens)
        ranked = sorted(
            ((float(score), index) for index, score in enumerate(scores) if score > 0),
            key=lambda item: (-item[0], self.chunks[item[1]].chunk_id),
        )
        return [(self.chunks[index], score) for score, index in ranked[:k]]


_INDEXES: dict[int | None, KnowledgeIndex] = {}
_INDEX_LOCK = threading.Lock()


def _documents_for(environment: Environment | None) -> Q:
    if environment is None:
        return Q(environment__isnull=True)
    return Q(environment=environment) | Q(environment__isnull=True)


def knowledge_version(environment: Environment | None) -> tuple[Any, ...]:
    docs = KnowledgeDocument.objects.filter(_documents_for(environment)).aggregate(
        count=Count("id"), updated=Max("updated_at")
    )
    chunks = KnowledgeChunk.objects.filter(
        document__in=KnowledgeDocument.objects.filter(_documents_for(environment))
    ).aggregate(count=Count("id"), last=Max("id"))
    return (docs["count"], docs["updated"], chunks["count"], chunks["last"])


def knowledge_index_get(environment: Environment | None) -> KnowledgeIndex:
    """The BM25 index for this environment's runbooks, rebuilt only when the knowledge changed."""
    key = environment.pk if environment is not None else None
    version = knowledge_version(environment)
    with _INDEX_LOCK:
        cached = _INDEXES.get(key)
        if cached is not None and cached.version == version:
            return cached
    rows = (
        KnowledgeChunk.objects.filter(
            document__in=KnowledgeDocument.objects.filter(_documents_for(environment))
        )
        .select_related("document")
        .order_by("chunk_id")
    )
    chunks = [IndexedChunk(c.chunk_id, c.document.title, c.heading, c.text) for c in rows]
    retriever = None
    if chunks:
        corpus = [
            text_tokenize(f"{c.document_title}\n{c.heading}\n{c.text}") or ["<empty>"]
            for c in chunks
        ]
        retriever = bm25s.BM25()
        retriever.index(corpus, show_progress=False)
    index = KnowledgeIndex(version=version, chunks=chunks, retriever=retriever)
    with _INDEX_LOCK:
        _INDEXES[key] = index
    return index


def chunk_header(chunk: IndexedChunk) -> str:
    heading = chunk.heading or INTRO_LABEL
    return f"=== {chunk.chunk_id} | {chunk.document_title} / {heading} ==="


def chunk_text_bounded(text: str) -> str:
    if len(text) <= MAX_CHUNK_CHARS:
        return text
    return text[:MAX_CHUNK_CHARS].rstrip() + " …[chunk truncated]"


def knowledge_lookup(*, environment: Environment | None, query: str, k: int) -> BackendOutput:
    index = knowledge_index_get(environment)
    hits = index.search(query, k)
    lines = [f"lookup_knowledge query={query!r} k={k}"]
    summary: dict[str, Any] = {"query": query, "chunks": []}
    if not index.chunks:
        lines.append("no data: this environment has no runbooks")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    if not hits:
        lines.append(f"no data: none of {len(index.chunks)} runbook chunks matched the query terms")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    ranking = ", ".join(f"{chunk.chunk_id} ({score:.2f})" for chunk, score in hits)
    lines.append(f"{len(hits)} chunks matched, best first: {ranking}")
    lines.append("")
    for chunk, score in hits:
        text = chunk_text_bounded(chunk.text)
        lines.append(chunk_header(chunk))
        lines.append(text)
        lines.append("")
        summary["chunks"].append(
            {
                "chunk_id": chunk.chunk_id,
                "document_title": chunk.document_title,
                "heading": chunk.heading or INTRO_LABEL,
                "score": round(score, 4),
                "text": text,
            }
        )
    return BackendOutput(status="ok", output="\n".join(lines).rstrip() + "\n", summary=summary)
