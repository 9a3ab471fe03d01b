"""Scenario packs: one incident folder (see docs/scenario-pack.md), its scenario.yaml and files.

``pack_open`` reads and checks scenario.yaml and lists the data files; ``pack_header_load``
caches that for the tools. Validating every data file line by line is
``diagnosis.evidence.pack_check.pack_load``. A broken pack raises one ``PackError`` that
lists every problem as ``file:line: message``, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from diagnosis.evidence.timeutil import TimeFormatError, time_parse

PACK_FILE = "scenario.yaml"
TOPOLOGY_FILE = "topology.json"
PACK_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$")
ROOT_CAUSE_KINDS = (
    "cpu",
    "memory",
    "disk",
    "network",
    "latency",
    "errors",
    "resource_exhaustion",
    "configuration",
    "dependency",
    "code",
)
DECISIONS = ("PASS", "LOW_CONFID", "REJECT")
ANSWER_SOURCES = ("composer", "fallback")
# Past this many problems in one file, the rest are counted, not listed.
MAX_PROBLEMS_PER_FILE = 20


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


class PackError(Exception):
    """A pack that cannot be used; ``problems`` lists each one with its file and line."""

    def __init__(self, path: Path | str, problems: list[Problem]) -> None:
        self.path = Path(path)
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"scenario pack {self.path} has {len(problems)} problem(s):\n{lines}")


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime


@dataclass(frozen=True)
class PackPaths:
    root: Path
    metrics: tuple[Path, ...] = ()
    logs_jsonl: tuple[Path, ...] = ()
    logs_plain: tuple[Path, ...] = ()
    knowledge: tuple[Path, ...] = ()
    traces: tuple[Path, ...] = ()  # traces/*.jsonl and *.jsonl.gz (OTLP/JSON)
    recorded: Path | None = None
    scripted: Path | None = None
    topology: Path | None = None

    @property
    def logs(self) -> tuple[Path, ...]:
        return tuple(sorted(self.logs_jsonl + self.logs_plain))


@dataclass(frozen=True)
class ScenarioPack:
    id: str
    title: str
    question: str
    now: datetime
    window: Window | None
    language: str
    services: tuple[str, ...]
    expected: dict[str, Any]
    paths: PackPaths
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.paths.root


def _sorted_files(folder: Path, suffix: str) -> tuple[Path, ...]:
    if not folder.is_dir():
        return ()
    return tuple(sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(suffix)))


def pack_paths(root: Path) -> PackPaths:
    recorded = root / "recorded" / "invocations.jsonl"
    scripted = root / "scripted"
    topology = root / TOPOLOGY_FILE
    return PackPaths(
        topology=topology if topology.is_file() else None,
        root=root,
        metrics=_sorted_files(root / "metrics", ".om"),
        logs_jsonl=_sorted_files(root / "logs", ".jsonl"),
        logs_plain=_sorted_files(root / "logs", ".log"),
        knowledge=_sorted_files(root / "knowledge", ".md"),
        traces=tuple(
            sorted(
                _sorted_files(root / "traces", ".jsonl")
                + _sorted_files(root / "traces", ".jsonl.gz")
            )
        ),
        recorded=recorded if recorded.is_file() else None,
        scripted=scripted if scripted.is_dir() else None,
    )


def pack_discover(dirs: Iterable[Path | str]) -> list[Path]:
    """Pack folders in ``dirs``: each dir holding a scenario.yaml, or its children that do."""
    found: set[Path] = set()
    for entry in dirs:
        folder = Path(entry)
        if (folder / PACK_FILE).is_file():
            found.add(folder.resolve())
            continue
        if folder.is_dir():
            for child in folder.iterdir():
                if child.is_dir() and (child / PACK_FILE).is_file():
                    found.add(child.resolve())
    return sorted(found)


class ProblemList:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[Problem] = []
        self._per_file: dict[str, int] = {}

    def add(self, path: Path, line: int | None, message: str) -> None:
        name = os.path.relpath(path, self.root) if path.is_absolute() else str(path)
        count = self._per_file.get(name, 0) + 1
        self._per_file[name] = count
        if count <= MAX_PROBLEMS_PER_FILE:
            self.items.append(Problem(name, line, message))

    def finish(self) -> list[Problem]:
        for name, count in self._per_file.items():
            if count > MAX_PROBLEMS_PER_FILE:
                extra = count - MAX_PROBLEMS_PER_FILE
                self.items.append(Problem(name, None, f"… and {extra} more problem(s)"))
        return self.items


# A check of a pack's data: (scenario.yaml fields, file list, problems to add to).
PackCheck = Callable[[dict[str, Any], PackPaths, ProblemList], None]


def _key_lines(text: str) -> dict[str, int]:
    """Line number of each top-level key of a YAML mapping."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        str(k.value): k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)
    }


def _time_field(value: object, label: str, add: Any) -> datetime | None:
    if value is None:
        add(f"{label} is required (an RFC 3339 time such as 2026-03-02T10:40:00Z)")
        return None
    try:
        return time_parse(value if isinstance(value, datetime) else str(value))
    except TimeFormatError as exc:
        add(f"{label}: {exc}")
        return None


def _yaml_read(path: Path, problems: ProblemList) -> tuple[dict[str, Any], str] | None:
    """scenario.yaml parsed, with its text; None (and the problem added) when it cannot be."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.add(path, None, "missing scenario.yaml")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(path, None, f"cannot read: {exc}")
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc)
        problems.add(path, mark.line + 1 if mark else None, f"invalid YAML: {reason}")
        return None
    if not isinstance(data, dict):
        problems.add(path, 1, "scenario.yaml must be a mapping of keys to values")
        return None
    return data, text


# Adds a problem at the line of one key of scenario.yaml.
_At = Callable[[str], Callable[[str], None]]


def _window_check(window: object, at: _At) -> Window | None:
    if window is None:
        return None
    if not isinstance(window, dict):
        at("window")("window must be a mapping with start and end")
        return None
    start = _time_field(window.get("start"), "window.start", at("window"))
    end = _time_field(window.get("end"), "window.end", at("window"))
    if not (start and end):
        return None
    if start >= end:
        at("window")("window.start must be before window.end")
        return None
    return Window(start=start, end=end)


def _language_check(language: object, at: _At) -> str:
    if not isinstance(language, str) or not re.fullmatch(
        r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*", language
    ):
        at("language")(f"language {language!r} must be a language tag such as zh-CN or en")
        return "zh-CN"
    return language


def _expected_check(expected: object, at: _At) -> dict[str, Any]:
    if not isinstance(expected, dict):
        at("expected")("expected must be a mapping")
        return {}
    kind = expected.get("root_cause_kind")
    if kind is not None and kind not in ROOT_CAUSE_KINDS:
        at("expected")(
            f"expected.root_cause_kind {kind!r} must be one of: {', '.join(ROOT_CAUSE_KINDS)}"
        )
    for key in ("must_mention", "must_not_claim"):
        value = expected.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            at("expected")(f"expected.{key} must be a list of strings")
    if expected.get("abstain") is not None and not isinstance(expected["abstain"], bool):
        at("expected")("expected.abstain must be true or false")
    if expected.get("decision") is not None and expected["decision"] not in DECISIONS:
        at("expected")(f"expected.decision must be one of: {', '.join(DECISIONS)}")
    if (
        expected.get("answer_source") is not None
        and expected["answer_source"] not in ANSWER_SOURCES
    ):
        at("expected")(f"expected.answer_source must be one of: {', '.join(ANSWER_SOURCES)}")
    return expected


def _header_check(root: Path, problems: ProblemList) -> dict[str, Any]:
    """Validate scenario.yaml; return the parsed fields (possibly partial)."""
    path = root / PACK_FILE
    read = _yaml_read(path, problems)
    if read is None:
        return {}
    data, text = read
    lines = _key_lines(text)

    def at(key: str) -> Callable[[str], None]:
        return lambda message: problems.add(path, lines.get(key), message)

    out: dict[str, Any] = {}
    for key in ("id", "title", "question"):
        value = data.get(key)
        if not isinstance(value, str) or not value.strip():
            at(key)(f"'{key}' is required (a non-empty string)")
        else:
            out[key] = value.strip()
    if "id" in out and not PACK_ID.match(out["id"]):
        at("id")(f"id {out['id']!r} must use only a-z, 0-9 and '-' (e.g. payment-pool-saturation)")
        out.pop("id")
    out["now"] = _time_field(data.get("now"), "now", at("now"))
    out["window"] = _window_check(data.get("window"), at)
    out["language"] = _language_check(data.get("language", "zh-CN"), at)
    services = data.get("services", [])
    if not isinstance(services, list) or not all(isinstance(s, str) and s for s in services):
        at("services")("services must be a list of service names")
        services = []
    out["services"] = tuple(services)
    out["expected"] = _expected_check(data.get("expected", {}) or {}, at)
    known = {"id", "title", "question", "now", "window", "language", "services", "expected"}
    out["extra"] = {k: v for k, v in data.items() if k not in known}
    return out


@dataclass(frozen=True)
class CallEdge:
    caller: str
    callee: str


def topology_read(
    path: Path, problems: ProblemList, services: tuple[str, ...]
) -> tuple[CallEdge, ...]:
    """``{"calls": [{"caller": "a", "callee": "b"}, …]}``; each bad entry is a problem
    with its line, and a name the pack's ``services`` do not list is one too."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(path, None, f"cannot read: {exc}")
        return ()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.add(path, exc.lineno, f"not valid JSON ({exc.msg})")
        return ()
    calls = data.get("calls") if isinstance(data, dict) else None
    if not isinstance(calls, list):
        problems.add(path, 1, 'must be {"calls": [{"caller": "a", "callee": "b"}, …]}')
        return ()
    # each entry's line: the n-th line holding a "caller" key (one entry a line, or close)
    entry_lines = [n for n, line in enumerate(text.splitlines(), start=1) if '"caller"' in line]
    known = set(services)
    edges: list[CallEdge] = []
    for index, item in enumerate(calls):
        line = entry_lines[index] if index < len(entry_lines) else None
        if not isinstance(item, dict):
            problems.add(path, line, f"calls[{index}] must be an object with caller and callee")
            continue
        caller, callee = item.get("caller"), item.get("callee")
        if not (isinstance(caller, str) and caller and isinstance(callee, str) and callee):
            problems.add(path, line, f"calls[{index}] needs caller and callee as service names")
            continue
        unknown = [n for n in (caller, callee) if known and n not in known]
        if unknown:
            names = ", ".join(repr(n) for n in unknown)
            problems.add(path, line, f"calls[{index}]: {names} not in scenario.yaml services")
            continue
        edges.append(CallEdge(caller=caller, callee=callee))
    return tuple(dict.fromkeys(edges))


def pack_call_edges(path: Path | str) -> tuple[tuple[str, str], ...]:
    """The pack's known call edges as (caller, callee); none when it has no topology.json
    (or a broken one: ``pack_load`` reports that, a diagnosis goes on without edges)."""
    pack = pack_header_load(path)
    if pack.paths.topology is None:
        return ()
    problems = ProblemList(pack.path)
    edges = topology_read(pack.paths.topology, problems, pack.services)
    return tuple((e.caller, e.callee) for e in edges)


def _pack_build(root: Path, header: dict[str, Any], paths: PackPaths) -> ScenarioPack:
    return ScenarioPack(
        id=header["id"],
        title=header["title"],
        question=header["question"],
        now=header["now"],
        window=header["window"],
        language=header["language"],
        services=header["services"],
        expected=header["expected"],
        paths=paths,
        extra=header["extra"],
    )


def pack_open(path: Path | str, check: PackCheck | None = None) -> ScenarioPack:
    """Read a pack's scenario.yaml and list its files; ``check`` may add problems of its own
    (``diagnosis.evidence.pack_check`` validates the data files so).

    Raises ``PackError`` listing every problem found (file and line).
    """
    root = Path(path).resolve()
    problems = ProblemList(root)
    if not root.is_dir():
        problems.add(root, None, "not a directory")
        raise PackError(root, problems.finish())
    header = _header_check(root, problems)
    paths = pack_paths(root)
    if check is not None:
        check(header, paths, problems)
    found = problems.finish()
    if found:
        raise PackError(root, found)
    return _pack_build(root, header, paths)


_HEADER_CACHE: dict[tuple[str, float], ScenarioPack] = {}


def pack_header_load(path: Path | str) -> ScenarioPack:
    """The pack's scenario.yaml and file list, cached per file mtime (tools call this per query)."""
    root = Path(path).resolve()
    try:
        mtime = (root / PACK_FILE).stat().st_mtime
    except OSError:
        mtime = -1.0
    key = (str(root), mtime)
    pack = _HEADER_CACHE.get(key)
    if pack is None:
        pack = pack_open(root)
        if len(_HEADER_CACHE) > 256:
            _HEADER_CACHE.clear()
        _HEADER_CACHE[key] = pack
    # Data files come and go without touching scenario.yaml; listing them is cheap.
    return dataclasses.replace(pack, paths=pack_paths(root))
