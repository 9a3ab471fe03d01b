"""The project's import graph, built once per module from the checkout."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("diagnosis", "chat", "audit", "config")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """Runtime imports only (the ones under ``if TYPE_CHECKING:`` do not run); no migrations."""
    built = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)
    for module in list(built.modules):
        if ".migrations" in module:
            built.remove_module(module)
    return built
