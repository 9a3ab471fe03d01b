"""The documents the code cites are in the repository, and say what the code does.

- Every ``docs/<name>.md`` a source file, template or document names exists, and every
  ``docs/<name>.md §N`` it cites is a heading ``## N. …`` of that document.
- The documents are cited by their path (``docs/contracts.md``, not ``contracts.md``),
  so a reader can open them, and nothing cites material outside the repository.
- ``docs/contracts.md`` names every finding code, parse status and tool argument the
  code has, so a new one cannot land undocumented.

The history (the changelog) may cite what a document said then: it is not checked.
Each check is shown to fail on planted text (the last test).
"""

from __future__ import annotations

import re
from pathlib import Path

from diagnosis.contracts import FindingCode, ParseStatus
from diagnosis.evidence.tools import tool_definitions

ROOT = Path(__file__).resolve().parents[2]
CHECKED_SUFFIXES = {".py", ".html", ".md", ".txt", ".yaml", ".toml"}
FOLDERS = ("diagnosis", "chat", "audit", "config", "tests", "bench", "scenarios", "docs")
FOLDERS += ("templates", "prompts")
TOP_LEVEL = ("README.md", "Makefile", "pyproject.toml")
# the history may cite what a document said then; this file plants bad citations
UNCHECKED = {"CHANGELOG.md", "tests/architecture/test_docs.py"}
DOCS = ("architecture", "contracts", "scenario-pack")

_CITATION = re.compile(r"docs/([\w-]+\.md)`?(?:,?\s*§\s*(\d+))?")
_BARE = re.compile(rf"(?<![\w/-])(?:{'|'.join(DOCS)})\.md")
_OUTSIDE = re.compile(r"shared/docs/|\bseed\s+`?0\d\d")
_HEADING = re.compile(r"^## (\d+)\. ", re.MULTILINE)


def _checked_files() -> list[Path]:
    """The project's code, templates, prompts, packs' texts and documents (no git needed)."""
    files = [ROOT / name for name in TOP_LEVEL if (ROOT / name).is_file()]
    for folder in FOLDERS:
        files += sorted(
            path
            for path in (ROOT / folder).rglob("*")
            if path.suffix in CHECKED_SUFFIXES and path.is_file()
        )
    return [path for path in files if str(path.relative_to(ROOT)) not in UNCHECKED]


def _sections(document: Path) -> set[str] | None:
    """The numbers of the document's ``## N.`` headings; None when it does not exist."""
    if not document.is_file():
        return None
    return set(_HEADING.findall(document.read_text(encoding="utf-8")))


def citation_problems(name: str, text: str, docs_dir: Path) -> list[str]:
    """Each citation in ``text`` that does not resolve, as ``name:line: …``."""
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _CITATION.finditer(line):
            document, section = match.group(1), match.group(2)
            sections = _sections(docs_dir / document)
            if sections is None:
                problems.append(f"{name}:{number}: docs/{document} does not exist")
            elif section is not None and section not in sections:
                problems.append(f"{name}:{number}: docs/{document} has no section §{section}")
        stripped = _CITATION.sub("", line)
        problems += [f"{name}:{number}: cite {m} as docs/{m}" for m in _BARE.findall(stripped)]
        problems += [
            f"{name}:{number}: cites material outside the repository ({m.group(0)!r})"
            for m in _OUTSIDE.finditer(line)
        ]
    return problems


def test_every_docs_citation_resolves_to_a_document_and_a_heading() -> None:
    files = _checked_files()
    # the scan reads the code that cites the documents, and the documents themselves
    assert {ROOT / "diagnosis" / "contracts.py", ROOT / "docs" / "contracts.md"} <= set(files)
    problems: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += citation_problems(str(path.relative_to(ROOT)), text, ROOT / "docs")
    assert not problems, "citations that do not resolve:\n" + "\n".join(problems)


def test_the_contracts_name_every_finding_code_parse_status_and_tool_argument() -> None:
    contracts = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    missing = [f"finding code {c.value}" for c in FindingCode if f"`{c.value}`" not in contracts]
    missing += [f"parse status {s.value}" for s in ParseStatus if f"`{s.value}`" not in contracts]
    rows = {
        row.split("|")[1].strip().strip("`"): row
        for row in contracts.splitlines()
        if row.startswith("| `")
    }
    for tool in tool_definitions():
        row = rows.get(tool.name)
        if row is None:
            missing.append(f"tool {tool.name} (no row in §0)")
            continue
        missing += [f"argument {tool.name}.{a.name}" for a in tool.args if f"`{a.name}`" not in row]
    assert not missing, "docs/contracts.md does not name:\n" + "\n".join(missing)


def test_the_citation_check_sees_a_missing_document_section_bare_name_and_outside_source(
    tmp_path: Path,
) -> None:
    (tmp_path / "contracts.md").write_text("# C\n\n## 0. Tools\n\n## 2. Rules\n", encoding="utf-8")
    assert not citation_problems(
        "a.py", "see docs/contracts.md §2 and `docs/contracts.md`", tmp_path
    )
    assert citation_problems("a.py", "see docs/contracts.md §3", tmp_path)
    assert citation_problems("a.py", "see docs/nowhere.md", tmp_path)
    assert citation_problems("a.py", "see contracts.md §2", tmp_path)
    assert citation_problems("a.py", "as in seed 004", tmp_path)
    assert citation_problems("a.py", "see /work/shared/docs/contracts.md", tmp_path)
