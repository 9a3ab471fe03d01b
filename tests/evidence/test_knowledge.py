"""Runbooks: Markdown import with stable chunk ids, BM25 ranking in Chinese and English."""

from __future__ import annotations

from django.core.management import call_command

from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.services import knowledge_import_markdown
from diagnosis.models import KnowledgeChunk, KnowledgeDocument, ToolInvocation

CACHE_RUNBOOK = """\
# Redis cache runbook

## Eviction storm

When Redis evicts keys faster than usual, hit ratio drops and latency rises.

## 缓存击穿

热点 key 过期导致大量请求直接打到数据库，数据库 CPU 飙高。
"""


def _lookup(session, query, k=5):
    result = tool_invoke(
        session=session, attempt=1, tool_name="lookup_knowledge", arguments={"query": query, "k": k}
    )
    return ToolInvocation.objects.get(pk=result.invocation_id)


def test_a_chinese_query_ranks_the_chinese_section_first(session):
    row = _lookup(session, "连接池耗尽 请求超时 怎么处理")
    assert row.status == "ok"
    first = row.summary["chunks"][0]
    assert first["document_title"] == "连接池耗尽处理手册"
    assert first["chunk_id"].startswith("kb-fixture-pool.pool-runbook-")
    assert all(c["document_title"] != "Deploy rollback runbook" for c in row.summary["chunks"])


def test_an_english_query_ranks_the_english_section_first(session):
    row = _lookup(session, "when should I roll back a release with 5xx errors")
    first = row.summary["chunks"][0]
    assert first["chunk_id"] == "kb-fixture-pool.deploy-rollback-when-to-roll-back"
    assert row.output.count("=== ") == len(row.summary["chunks"])
    assert (
        "=== kb-fixture-pool.deploy-rollback-when-to-roll-back | Deploy rollback runbook / "
        "When to roll back ===\nRoll back a release when the 5xx error rate doubles"
    ) in row.output


def test_k_bounds_the_number_of_chunks(session):
    row = _lookup(session, "连接池", k=1)
    assert len(row.summary["chunks"]) == 1


def test_a_query_that_matches_nothing_is_no_data(session):
    row = _lookup(session, "kubernetes etcd quorum")
    assert row.status == "no_data"
    assert "no data" in row.output


def test_shared_runbooks_are_found_from_every_environment(session, tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "redis-cache.md").write_text(CACHE_RUNBOOK, encoding="utf-8")
    knowledge_import_markdown(folder=folder)
    row = _lookup(session, "热点 key 过期 缓存击穿")
    assert row.summary["chunks"][0]["document_title"] == "Redis cache runbook"
    assert row.summary["chunks"][0]["chunk_id"].startswith("kb-redis-cache-")


def test_reimporting_unchanged_files_keeps_chunk_ids_and_changes_update_them(db, tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    path = folder / "redis-cache.md"
    path.write_text(CACHE_RUNBOOK, encoding="utf-8")
    first = knowledge_import_markdown(folder=folder)
    ids = list(KnowledgeChunk.objects.order_by("ordinal").values_list("chunk_id", flat=True))
    pks = list(KnowledgeChunk.objects.order_by("ordinal").values_list("pk", flat=True))
    assert len(first.created) == 1
    assert ids[0] == "kb-redis-cache-eviction-storm"
    again = knowledge_import_markdown(folder=folder)
    assert len(again.unchanged) == 1
    assert list(KnowledgeChunk.objects.order_by("ordinal").values_list("pk", flat=True)) == pks

    path.write_text(CACHE_RUNBOOK.replace("latency rises", "p99 latency rises"), encoding="utf-8")
    changed = knowledge_import_markdown(folder=folder)
    assert len(changed.updated) == 1
    chunk = KnowledgeChunk.objects.get(chunk_id="kb-redis-cache-eviction-storm")
    assert "p99 latency rises" in chunk.text
    assert (
        list(KnowledgeChunk.objects.order_by("ordinal").values_list("chunk_id", flat=True)) == ids
    )


def test_the_index_is_rebuilt_when_knowledge_changes(session, tmp_path):
    assert _lookup(session, "eviction storm").status == "no_data"
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "redis-cache.md").write_text(CACHE_RUNBOOK, encoding="utf-8")
    knowledge_import_markdown(folder=folder, environment=session.environment)
    assert _lookup(session, "eviction storm").status == "ok"


def test_the_import_knowledge_command_imports_a_folder(db, tmp_path, capsys):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "redis-cache.md").write_text(CACHE_RUNBOOK, encoding="utf-8")
    call_command("import_knowledge", str(folder))
    assert KnowledgeDocument.objects.get().title == "Redis cache runbook"
    assert "1 created" in capsys.readouterr().out
