"""Known call edges of an environment, for localisation along the calls.

A scenario pack declares them in an optional ``topology.json``; a live environment's
edges come from the caller/callee labels of its own metrics (source/destination,
client/server, caller/callee, src/dst), which the Executor reads from the fleet view.
"""

from __future__ import annotations

import logging

from diagnosis.evidence.packs import PackError, pack_call_edges
from diagnosis.models import Environment

logger = logging.getLogger(__name__)


def environment_call_edges(*, environment: Environment) -> tuple[tuple[str, str], ...]:
    """(caller, callee) pairs declared for ``environment``; none when it declares none."""
    if environment.kind != Environment.Kind.SCENARIO or not environment.pack_path:
        return ()
    try:
        return pack_call_edges(environment.pack_path)
    except (PackError, OSError):
        logger.warning("environment %s: its topology.json cannot be read", environment.slug)
        return ()
