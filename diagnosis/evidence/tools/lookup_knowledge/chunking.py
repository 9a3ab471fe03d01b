"""Markdown runbooks cut into chunks at ``## `` headings, each with a stable id derived from
the document and section (bindings that cite a chunk survive re-imports of unchanged text)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from django.utils.text import slugify

INTRO_HEADING = ""
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class ChunkDraft:
    chunk_id: str
    ordinal: int
    heading: str
    text: str


@dataclass(frozen=True)
class MarkdownDoc:
    title: str
    sections: list[tuple[str, str]]  # (heading, text)


def markdown_split(text: str, *, fallback_title: str) -> MarkdownDoc:
    """Title from the first ``# `` line; sections at each ``## `` line outside code fences."""
    title = ""
    sections: list[tuple[str, list[str]]] = [(INTRO_HEADING, [])]
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        if not in_fence and not title and line.startswith("# "):
            title = line[2:].strip()
            continue
        if not in_fence and line.startswith("## "):
            sections.append((line[3:].strip(), []))
            continue
        sections[-1][1].append(line)
    built = [(heading, "\n".join(body).strip()) for heading, body in sections]
    built = [(h, t) for h, t in built if t or h]
    return MarkdownDoc(title=title or fallback_title, sections=built)


def slug_or_hash(text: str, *, prefix: str, max_length: int = 60) -> str:
    slug = slugify(text)[:max_length].strip("-")
    if slug:
        return slug
    return prefix + hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]


def document_slug(stem: str) -> str:
    return slug_or_hash(stem, prefix="doc-", max_length=120)


def chunk_drafts(
    *, document_slug_value: str, environment_slug: str | None, body: str, title: str
) -> list[ChunkDraft]:
    """The chunks of a Markdown body, with ids ``kb-[<env>.]<doc>-<section>``."""
    doc = markdown_split(body, fallback_title=title)
    prefix = (
        f"kb-{environment_slug}.{document_slug_value}"
        if environment_slug
        else f"kb-{document_slug_value}"
    )
    drafts: list[ChunkDraft] = []
    used: set[str] = set()
    for ordinal, (heading, text) in enumerate(doc.sections):
        section = "intro" if heading == INTRO_HEADING else slug_or_hash(heading, prefix="s")
        chunk_id = f"{prefix}-{section}"
        suffix = 2
        while chunk_id in used:
            chunk_id = f"{prefix}-{section}-{suffix}"
            suffix += 1
        used.add(chunk_id)
        drafts.append(
            ChunkDraft(chunk_id=chunk_id[:300], ordinal=ordinal, heading=heading, text=text)
        )
    return drafts
