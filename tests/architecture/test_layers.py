"""The diagnosis core's packages in layers, each importing only the layers below it.

Checked on packages, not modules (a module-level check does not see two packages that
import each other through different modules), with grimp, from the checkout:

- the core's layers, top to bottom: the app's entry points (``services``,
  ``selectors``); the flow (stages, the agent loop, the Gatekeeper, choosing each
  role's agent); the offline engine, a sibling answerer of a role; the model layer
  (``llm``: transports, prompts, schemas, reply parsing, call records); the session
  record (``sessions``) and the evidence (tools, packs), independent of each other;
  contracts, models and the small shared modules at the bottom;
- no two packages of the core import each other;
- the core imports no app built on it (``chat``, ``audit``).

What another restructuring still has to remove is listed with its issue, and removed
from the list when it lands; every check can be shown to fail (the last test).
"""

from __future__ import annotations

import itertools

import grimp

CORE = "diagnosis"
APPS_ON_THE_CORE = ("chat", "audit")
CORE_LAYERS: tuple[grimp.Layer | str, ...] = (
    grimp.Layer("services", "selectors", independent=False),
    "flow",
    "offline",
    "llm",
    grimp.Layer("sessions", "evidence", independent=True),
    grimp.Layer(
        "contracts",
        "models",
        "i18n",
        "storable",
        "tokens",
        "db",
        "per_process",
        "wording",
        "credentials",
        "audit_trail",
        independent=False,
    ),
)
# Package pairs of the core that still import each other, by the issue that separates them.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# Core modules that still import an app built on the core, by the issue that moves them.
KNOWN_CORE_IMPORTS_OF_APPS: dict[tuple[str, str], str] = {}


def layer_violations(graph: grimp.ImportGraph) -> list[str]:
    """Each import of a layer above, as ``importer -> imported (via …)``."""
    found = graph.find_illegal_dependencies_for_layers(layers=CORE_LAYERS, containers={CORE})
    return sorted(
        f"{d.importer} -> {d.imported} (via "
        + "; ".join(" → ".join((*r.heads, *r.middle, *r.tails)) for r in d.routes)
        + ")"
        for d in found
    )


def package_cycles(graph: grimp.ImportGraph) -> list[str]:
    """Pairs of the core's direct children that import each other, but the known ones."""
    children = sorted(graph.find_children(CORE))
    return [
        f"{a} <-> {b}"
        for a, b in itertools.combinations(children, 2)
        if frozenset({a, b}) not in KNOWN_CYCLES
        and graph.direct_import_exists(importer=a, imported=b, as_packages=True)
        and graph.direct_import_exists(importer=b, imported=a, as_packages=True)
    ]


def core_imports_of_apps(graph: grimp.ImportGraph) -> list[str]:
    """Core modules importing ``chat`` or ``audit``, but the known ones."""
    return [
        f"{importer} -> {imported}"
        for importer in sorted(graph.find_descendants(CORE) | {CORE})
        for imported in sorted(graph.find_modules_directly_imported_by(importer))
        if imported.split(".")[0] in APPS_ON_THE_CORE
        and (importer, imported) not in KNOWN_CORE_IMPORTS_OF_APPS
    ]


def test_the_core_layers_import_only_downwards(graph: grimp.ImportGraph) -> None:
    violations = layer_violations(graph)
    assert not violations, "imports of a layer above:\n" + "\n".join(violations)


def test_no_two_packages_of_the_core_import_each_other(graph: grimp.ImportGraph) -> None:
    cycles = package_cycles(graph)
    assert not cycles, "packages importing each other:\n" + "\n".join(cycles)


def test_the_core_imports_no_app_built_on_it(graph: grimp.ImportGraph) -> None:
    imports = core_imports_of_apps(graph)
    assert not imports, "the core imports an app built on it:\n" + "\n".join(imports)


def test_the_known_exceptions_still_exist(graph: grimp.ImportGraph) -> None:
    """An exception that no longer holds is deleted, so that it cannot come back unseen."""
    stale = [
        f"{importer} -> {imported} ({issue})"
        for (importer, imported), issue in KNOWN_CORE_IMPORTS_OF_APPS.items()
        if not graph.direct_import_exists(importer=importer, imported=imported)
    ]
    stale += [
        f"{' <-> '.join(sorted(pair))} ({issue})"
        for pair, issue in KNOWN_CYCLES.items()
        if not all(
            graph.direct_import_exists(importer=a, imported=b, as_packages=True)
            for a, b in itertools.permutations(sorted(pair))
        )
    ]
    assert not stale, "exceptions that no longer hold (delete them):\n" + "\n".join(stale)


def _planted(*imports: tuple[str, str]) -> grimp.ImportGraph:
    planted = grimp.ImportGraph()
    modules = {CORE, "chat", "chat.models"}
    for layer in CORE_LAYERS:
        tails = layer.module_tails if isinstance(layer, grimp.Layer) else {layer}
        modules |= {f"{CORE}.{name}" for name in tails}
    for pair in imports:
        modules |= set(pair)
    for module in sorted(modules):
        planted.add_module(module)
    for importer, imported in imports:
        planted.add_import(importer=importer, imported=imported)
    return planted


def test_the_checks_see_an_upward_import_a_package_cycle_and_an_app_import() -> None:
    """Each check fails on a graph with what it forbids, and passes without it."""
    downwards = ("diagnosis.flow", "diagnosis.llm")
    assert not layer_violations(_planted(downwards))
    assert layer_violations(_planted(downwards, ("diagnosis.llm", "diagnosis.flow")))
    assert layer_violations(_planted(("diagnosis.evidence", "diagnosis.sessions")))
    assert package_cycles(_planted(downwards, ("diagnosis.llm", "diagnosis.flow")))
    # The API and the Alertmanager receivers no longer import each other (issue 29).
    pair = (("diagnosis.alerts", "diagnosis.api"), ("diagnosis.api", "diagnosis.alerts"))
    assert package_cycles(_planted(*pair, downwards))
    assert core_imports_of_apps(_planted(("diagnosis.flow", "chat.models")))
    assert not core_imports_of_apps(_planted(("chat.models", "diagnosis.flow")))
