"""Writes for the evidence side: scenario environments from packs, runbooks from Markdown."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import PackError, Problem, ScenarioPack, pack_discover
from diagnosis.evidence.tools.lookup_knowledge.chunking import (
    chunk_drafts,
    document_slug,
    markdown_split,
)
from diagnosis.models import Environment, KnowledgeChunk, KnowledgeDocument

logger = logging.getLogger(__name__)


@dataclass
class KnowledgeImportResult:
    created: list[KnowledgeDocument] = field(default_factory=list)
    updated: list[KnowledgeDocument] = field(default_factory=list)
    unchanged: list[KnowledgeDocument] = field(default_factory=list)
    removed: int = 0

    @property
    def documents(self) -> list[KnowledgeDocument]:
        return self.created + self.updated + self.unchanged


def knowledge_document_save(*, document: KnowledgeDocument) -> list[KnowledgeChunk]:
    """Save an edited runbook and re-chunk it with the evidence side's own chunker."""
    with transaction.atomic():
        document.save()
        return knowledge_document_rechunk(document=document)


def knowledge_document_rechunk(*, document: KnowledgeDocument) -> list[KnowledgeChunk]:
    """Bring the document's chunks in line with its body; unchanged sections keep their ids."""
    environment = document.environment
    drafts = chunk_drafts(
        document_slug_value=document.slug,
        environment_slug=environment.slug if environment else None,
        body=document.body,
        title=document.title,
    )
    wanted = {d.chunk_id for d in drafts}
    with transaction.atomic():
        document.chunks.exclude(chunk_id__in=wanted).delete()
        existing = {c.chunk_id: c for c in document.chunks.all()}
        taken = set(
            KnowledgeChunk.objects.filter(chunk_id__in=wanted)
            .exclude(document=document)
            .values_list("chunk_id", flat=True)
        )
        if taken:
            raise ValueError(
                f"chunk id(s) {', '.join(sorted(taken))} of {document.slug} already belong to "
                "another document; rename the file or the section"
            )
        chunks = []
        for draft in drafts:
            chunk = existing.get(draft.chunk_id)
            if chunk is None:
                chunk = KnowledgeChunk.objects.create(
                    document=document,
                    chunk_id=draft.chunk_id,
                    ordinal=draft.ordinal,
                    heading=draft.heading[:300],
                    text=draft.text,
                )
            elif (chunk.ordinal, chunk.heading, chunk.text) != (
                draft.ordinal,
                draft.heading[:300],
                draft.text,
            ):
                chunk.ordinal, chunk.heading, chunk.text = (
                    draft.ordinal,
                    draft.heading[:300],
                    draft.text,
                )
                chunk.save(update_fields=["ordinal", "heading", "text"])
            chunks.append(chunk)
    return chunks


def knowledge_import_markdown(
    *, folder: Path | str, environment: Environment | None = None, prune: bool = False
) -> KnowledgeImportResult:
    """Import every ``*.md`` of ``folder`` (idempotent: unchanged files are left untouched).

    With ``prune``, documents of this environment imported earlier from this folder whose
    file is gone are deleted.
    """
    root = Path(folder).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    result = KnowledgeImportResult()
    seen: set[str] = set()
    with transaction.atomic():
        for path in sorted(root.glob("*.md")):
            body = path.read_text(encoding="utf-8")
            title = markdown_split(body, fallback_title=path.stem).title[:300]
            slug = document_slug(path.stem)
            seen.add(slug)
            document = KnowledgeDocument.objects.filter(environment=environment, slug=slug).first()
            if document is None:
                document = KnowledgeDocument.objects.create(
                    environment=environment,
                    slug=slug,
                    title=title,
                    body=body,
                    source_path=str(path),
                )
                result.created.append(document)
            elif (document.title, document.body, document.source_path) != (title, body, str(path)):
                document.title, document.body, document.source_path = title, body, str(path)
                document.save()
                result.updated.append(document)
            else:
                result.unchanged.append(document)
            knowledge_document_rechunk(document=document)
        if prune:
            stale = KnowledgeDocument.objects.filter(
                environment=environment, source_path__startswith=str(root) + "/"
            ).exclude(slug__in=seen)
            result.removed = stale.count()
            stale.delete()
    return result


def _environment_from_pack(pack: ScenarioPack) -> Environment:
    environment, _ = Environment.objects.update_or_create(
        slug=pack.id,
        defaults={
            "name": pack.title[:200],
            "kind": Environment.Kind.SCENARIO,
            "description": pack.question,
            "pack_path": str(pack.path),
            "services": list(pack.services),
            "is_active": True,
        },
    )
    knowledge = pack.path / "knowledge"
    if knowledge.is_dir():
        knowledge_import_markdown(folder=knowledge, environment=environment, prune=True)
    else:
        KnowledgeDocument.objects.filter(environment=environment).delete()
    return environment


def environments_sync_from_packs(
    *, dirs: list[Path] | list[str] | None = None, strict: bool = True
) -> list[Environment]:
    """One scenario Environment per pack found in ``dirs`` (default: SCENARIO_PACK_DIRS).

    Every pack is validated first. With ``strict`` any broken pack raises ``PackError``
    (listing the problems of every broken pack) before anything is written; without it,
    broken packs are logged and skipped.
    """
    folders = pack_discover(dirs if dirs is not None else settings.SCENARIO_PACK_DIRS)
    packs: list[ScenarioPack] = []
    problems: list[Problem] = []
    for folder in folders:
        try:
            packs.append(pack_load(folder))
        except PackError as exc:
            logger.warning("%s", exc)
            problems.extend(
                Problem(f"{folder.name}/{p.file}", p.line, p.message) for p in exc.problems
            )
    if problems and strict:
        raise PackError(folders[0].parent if folders else Path("."), problems)
    ids = [p.id for p in packs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise PackError(
            folders[0].parent,
            [
                Problem("scenario.yaml", None, f"pack id {d!r} is used by more than one pack")
                for d in duplicates
            ],
        )
    with transaction.atomic():
        return [_environment_from_pack(pack) for pack in packs]


def environment_sync_from_pack(*, path: Path | str) -> Environment:
    """The scenario Environment of one pack folder (validated; created or updated)."""
    pack = pack_load(path)
    with transaction.atomic():
        return _environment_from_pack(pack)
