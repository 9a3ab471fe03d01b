"""Known call edges of an environment, for localisation along the calls.

- A scenario pack declares them in an optional ``topology.json``.
- A live environment gets them from its own call-edges query (``call_edges_query``),
  or else the ``CALL_EDGES_QUERY`` setting: a PromQL expression whose result series
  name caller and callee in their labels, in any of the usual namings
  (``source_workload``/``destination_workload``, ``client``/``server``,
  ``caller``/``callee``, ``src``/``dst``…: ``call_label_pairs``), for example
  ``sum by (source_workload, destination_workload) (rate(istio_requests_total[10m]))``;
  it runs once per Executor attempt on the environment's Prometheus, over the session's
  window (at most EDGE_QUERY_POINTS evaluations of it, the last at the window's end): the
  calls of the incident's time, whenever the session is run or replayed, never the wall
  clock's last minutes.
- Either way, the Executor also reads caller/callee labels off the metrics it queries
  (the offline engine with ``call_label_pairs`` too).
"""

from __future__ import annotations

import logging
import math
from datetime import datetime

from django.conf import settings

from diagnosis.evidence.common import Deadline, ToolFailure, ToolTimeout
from diagnosis.evidence.packs import PackError, pack_call_edges
from diagnosis.evidence.tools.query_metrics.prometheus import metrics_from_prometheus
from diagnosis.evidence.tools.query_metrics.series import Grid
from diagnosis.models import SERVICE_LABEL, Environment

logger = logging.getLogger(__name__)

# The query is evaluated at a few times across the window (an edge seen at any of them counts):
# a call that stopped during the incident is still an edge of it. Its own range vector (the
# ``[10m]`` of a rate) covers what lies between two evaluations.
EDGE_QUERY_POINTS = 10
EDGE_QUERY_MIN_STEP_S = 60.0
EDGE_QUERY_TIMEOUT_S = 5.0

# Label pairs that name both ends of a call on one series (caller, callee), in any naming:
# source/destination (Istio, Linkerd), client/server, caller/callee, src/dst, from/to,
# upstream/downstream (as seen from the caller), parent/child (trace-derived maps).
CALL_LABEL_ENDS = (
    ("source", "destination"),
    ("src", "dst"),
    ("client", "server"),
    ("caller", "callee"),
    ("from", "to"),
    ("parent", "child"),
)
_CALL_LABEL_SUFFIXES = ("", "_service", "_workload", "_app", "_name", "_service_name", "_svc")


def call_label_pairs(labels: dict[str, str]) -> list[tuple[str, str]]:
    """(caller, callee) values named by one series' labels, in any of the common namings.

    ``source_workload``/``destination_workload``, ``client_service``/``server_service``,
    ``src``/``dst``… each pair must share its suffix, so unrelated labels are never paired.
    """
    lowered = {k.lower(): v for k, v in labels.items() if isinstance(v, str) and v}
    pairs: list[tuple[str, str]] = []
    for left, right in CALL_LABEL_ENDS:
        for suffix in _CALL_LABEL_SUFFIXES:
            for sep in ("", "_"):
                a = lowered.get(f"{left}{sep}{suffix.lstrip('_')}" if suffix else left)
                b = lowered.get(f"{right}{sep}{suffix.lstrip('_')}" if suffix else right)
                if a and b and a != b and (a, b) not in pairs:
                    pairs.append((a, b))
    return pairs


def environment_call_edges(
    *, environment: Environment, start: datetime, end: datetime
) -> tuple[tuple[str, str], ...]:
    """(caller, callee) pairs known for ``environment`` over the window ``start``–``end`` (a
    live environment's query is evaluated there); none when nothing declares any."""
    if environment.kind == Environment.Kind.SCENARIO:
        if not environment.pack_path:
            return ()
        try:
            return pack_call_edges(environment.pack_path)
        except (PackError, OSError):
            logger.warning("environment %s: its topology.json cannot be read", environment.slug)
            return ()
    query = environment.call_edges_query.strip() or str(
        getattr(settings, "CALL_EDGES_QUERY", "") or ""
    )
    if not query or not environment.prometheus_url:
        return ()
    grid = _edge_grid(start.timestamp(), end.timestamp())
    try:
        series, _ = metrics_from_prometheus(
            base_url=environment.prometheus_url,
            token_env=environment.prometheus_token_env,
            query=query,
            grid=grid,
            deadline=Deadline.after(EDGE_QUERY_TIMEOUT_S),
            # the query names its labels as the environment's Prometheus does: none is renamed
            service_label=SERVICE_LABEL,
        )
    except (ToolFailure, ToolTimeout) as exc:
        # no edges is a diagnosis without localisation along the calls, not a failure
        logger.warning("environment %s: the call-edge query failed: %s", environment.slug, exc)
        return ()
    edges: dict[tuple[str, str], None] = {}
    for item in series:
        for pair in call_label_pairs(item.labels):
            edges[pair] = None
    return tuple(sorted(edges))


def _edge_grid(start: float, end: float) -> Grid:
    """At most EDGE_QUERY_POINTS evaluation times over the window, the last at its end."""
    span = max(end - start, 0.0)
    if span > EDGE_QUERY_MIN_STEP_S * (EDGE_QUERY_POINTS - 1):
        return Grid(start=start, end=end, step=span / (EDGE_QUERY_POINTS - 1))
    step = EDGE_QUERY_MIN_STEP_S
    return Grid(start=end - step * math.floor(span / step), end=end, step=step)
