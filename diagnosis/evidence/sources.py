"""Which sources of evidence an environment has, for an Executor deciding what to ask."""

from __future__ import annotations

import logging

from diagnosis.evidence.packs import PackError, pack_header_load
from diagnosis.evidence.recorded import recorded_tool_names
from diagnosis.models import Environment

logger = logging.getLogger(__name__)


def environment_has_traces(environment: Environment) -> bool:
    """A live environment with a trace backend, or a pack with trace files (or recorded
    query_traces calls): the Executor then starts from the fleet view of the spans."""
    if environment.kind == Environment.Kind.LIVE:
        return bool(environment.traces_url)
    if not environment.pack_path:
        return False
    try:
        paths = pack_header_load(environment.pack_path).paths
    except (PackError, OSError):
        logger.warning("environment %s: its pack cannot be read", environment.slug)
        return False
    if paths.traces:
        return True
    return paths.recorded is not None and "query_traces" in recorded_tool_names(paths.recorded)
