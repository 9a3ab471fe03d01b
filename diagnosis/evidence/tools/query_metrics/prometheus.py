"""The Prometheus backend of query_metrics: ``query_range`` on the grid."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

import httpx

from diagnosis.evidence.common import (
    Deadline,
    ToolFailure,
    ToolTimeout,
)
from diagnosis.evidence.http import backend_get, bearer_headers
from diagnosis.evidence.tools.query_metrics.selector import COUNTER_SUFFIXES, labels_from_backend
from diagnosis.evidence.tools.query_metrics.series import (
    MAX_SERIES_READ,
    Grid,
    RawSeries,
    collection_paused,
)
from diagnosis.models import SERVICE_LABEL


def engine_timeout(deadline: Deadline) -> str:
    """The ``timeout`` parameter that has the engine stop a query when the call stops waiting
    for it: what is left of ``deadline`` (at least 0.1 s), in seconds. Both engines read a
    plain number as seconds; VictoriaMetrics (1.79) ignores a unit (``…ms``), so a query the
    call gave up on went on taking its CPU."""
    return f"{max(deadline.remaining(), 0.1):.3f}"


def metrics_from_prometheus(
    *,
    base_url: str,
    token_env: str,
    query: str,
    grid: Grid,
    deadline: Deadline,
    service_label: str = SERVICE_LABEL,
    shown_as: str | None = None,
) -> tuple[list[RawSeries], list[str]]:
    """One ``/api/v1/query_range`` call on the grid; the series as Prometheus evaluated them,
    their ``service_label`` label read as ``service`` (``labels_from_backend``). A series
    without a metric name (an aggregation) is named ``shown_as`` (the expression as the
    caller wrote it), else the query sent.

    ``limit`` asks Prometheus (3.x; older versions ignore it) for at most one series more
    than MAX_SERIES_READ, so a fleet-wide selector cannot return the whole TSDB.
    """
    url = base_url.rstrip("/") + "/api/v1/query_range"
    params = {
        "query": query,
        "start": f"{grid.start:.3f}",
        "end": f"{grid.end:.3f}",
        "step": f"{grid.step:g}",
        "limit": str(MAX_SERIES_READ + 1),
        "timeout": engine_timeout(deadline),
    }
    response = backend_get(
        backend="Prometheus",
        base_url=base_url,
        url=url,
        params=params,
        # Uncompressed: gzip costs Prometheus (2.42) about 1.1 CPU-seconds per 15 MB matrix
        # (a 1,000-service sweep), several times what the 4.4x fewer bytes save on any link
        # faster than about 100 Mbit/s; the answer is read at once either way.
        headers={**bearer_headers(token_env, "Prometheus"), "Accept-Encoding": "identity"},
        deadline=deadline,
    )
    with collection_paused():
        series = _series_read(response, base_url=base_url, query=query, shown_as=shown_as)
        for item in series:
            item.labels = labels_from_backend(item.labels, service_label)
    series.sort(key=lambda s: (s.name, sorted(s.labels.items())))
    notes = []
    if len(series) > MAX_SERIES_READ:
        series = series[:MAX_SERIES_READ]
        notes.append(f"more than {MAX_SERIES_READ} series matched; narrow the selector")
    return series, notes


# Metric types from Prometheus' metadata (what its scrape targets declare), per server, token and
# metric family: each family read at most once a minute, whatever came of it (a server whose
# metadata is slow or missing stays so), so a session's calls share one read. Only the families
# in play are asked for (``metric=``: a big server's whole metadata is several MB); more than
# METADATA_MAX_FAMILIES of them take one whole read instead. The reads share their own budget,
# at most METADATA_BUDGET_SECONDS and half of what is left of the call, so a slow answer never
# costs the call its deadline; with less than METADATA_MIN_SECONDS left none is made.
METADATA_FRESH_SECONDS = 60.0
METADATA_BUDGET_SECONDS = 2.0
METADATA_MIN_SECONDS = 1.0
METADATA_MAX_FAMILIES = 8
_WHOLE = ""  # the cache key of a whole read
_metadata: dict[tuple[str, str, str], tuple[float, dict[str, str]]] = {}
_clock = time.monotonic  # the cache's clock (tests move it, not the process's)


def metadata_families(names: Iterable[str]) -> list[str]:
    """The families whose metadata can declare these sample names' types: each name itself and,
    for a suffixed name, the family it belongs to (``http_requests`` for ``…_total``)."""
    families: dict[str, None] = {}
    for name in names:
        families[name] = None
        for suffix in COUNTER_SUFFIXES:
            if name.endswith(suffix):
                families[name[: -len(suffix)]] = None
    return sorted(families)


def metric_types(
    *, base_url: str, token_env: str, deadline: Deadline, names: Iterable[str]
) -> dict[str, str]:
    """Each metric family's type as Prometheus' ``/api/v1/metadata`` has it, for the families
    of ``names``; empty when it has none (data only backfilled) or cannot say (an error, a
    timeout, an old server): series are then judged by their names, as before. Never a tool
    failure: the series are read."""
    now = _clock()
    families = metadata_families(names)
    whole = _metadata.get((base_url, token_env, _WHOLE))
    if whole is not None and now < whole[0]:
        return whole[1]
    if len(families) > METADATA_MAX_FAMILIES:
        families = [_WHOLE]
    types: dict[str, str] = {}
    budget: Deadline | None = None
    for family in families:
        key = (base_url, token_env, family)
        cached = _metadata.get(key)
        if cached is None or now >= cached[0]:
            if budget is None:
                left = deadline.remaining()
                if left < METADATA_MIN_SECONDS:
                    return types
                budget = Deadline.after(min(METADATA_BUDGET_SECONDS, left / 2))
            cached = (
                now + METADATA_FRESH_SECONDS,
                _metadata_read(base_url, token_env, family, budget),
            )
            _metadata[key] = cached
        types.update(cached[1])
    return types


def _metadata_read(base_url: str, token_env: str, family: str, budget: Deadline) -> dict[str, str]:
    """One metadata answer (of ``family``, or whole for _WHOLE); empty on any failure or once
    the budget is spent."""
    if budget.remaining() <= 0:
        return {}
    try:
        response = backend_get(
            backend="Prometheus",
            base_url=base_url,
            url=base_url.rstrip("/") + "/api/v1/metadata",
            params={"metric": family} if family else {},
            headers=bearer_headers(token_env, "Prometheus"),
            deadline=budget,
        )
        if response.status_code == 200:
            return _types_parse(response.json()) or {}
    except (ToolFailure, ToolTimeout, ValueError):
        pass
    return {}


def _types_parse(body: object) -> dict[str, str] | None:
    """The family -> type map of a metadata answer; None when it is not one. Families whose
    targets disagree on the type say nothing."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict):
        return None
    types: dict[str, str] = {}
    for family, entries in data.items():
        if not isinstance(entries, list):
            continue
        kinds = {_entry_type(e) for e in entries}
        kind = kinds.pop() if len(kinds) == 1 else None
        if isinstance(family, str) and isinstance(kind, str):
            types[family] = kind.lower()
    return types


def _entry_type(entry: object) -> str | None:
    """One target's type in a metadata answer; None when it is not a string."""
    kind = entry.get("type") if isinstance(entry, dict) else None
    return kind if isinstance(kind, str) else None


# What PromQL engines answer when a query is too big for their limits, rather than slow:
# Prometheus' --query.max-samples ("query processing would load too many samples into memory")
# and its 11,000 points a series ("exceeded maximum resolution"), VictoriaMetrics'
# -search.maxSamplesPerQuery, -search.maxPointsPerTimeseries and -search.maxUniqueTimeseries
# ("cannot select more than … samples", "cannot generate more than … points", "the number of
# matching timeseries exceeds …"), Mimir's ("the query exceeded the maximum number of series
# (limit: …)") and Thanos' ("exceeded series limit", "limit … violated") series, sample and chunk
# limits.
_SIZE_REFUSAL = re.compile(
    r"too many samples|exceeded maximum resolution|maxSamplesPerQuery|maxPointsPerTimeseries|"
    r"maxUniqueTimeseries|cannot generate more than|cannot select more than|"
    r"matching timeseries exceeds|max-samples|too many points|exceeded the limit|"
    r"limit of \d+ (?:series|samples|chunks)|exceeded the maximum number of|"
    r"exceeded (?:series|sample|chunk)s? limit|limit \d+ violated",
    re.IGNORECASE,
)


class EngineRefusedSize(ToolFailure):
    """The engine refused a query for its size (samples, points, series), not its text."""


# What PromQL engines answer when a query ran past the ``timeout`` it was sent with:
# Prometheus' ``errorType`` "timeout" ("query timed out in …"), VictoriaMetrics' (1.79)
# "timeout exceeded" / "deadline exceeded" wording.
_TIMED_OUT = re.compile(r"timed out|timeout exceeded|deadline exceeded", re.IGNORECASE)


class EngineTimedOut(ToolFailure):
    """The engine stopped a query at the ``timeout`` it was sent with."""


def answer_data(response: httpx.Response, *, base_url: str, query: str) -> object:
    """The ``data`` of a successful Prometheus API answer; an error answer (Prometheus' or
    VictoriaMetrics' shape: ``status``/``error``) or one without JSON is a ToolFailure."""
    try:
        body = response.json()
    except ValueError:
        raise ToolFailure(
            f"Prometheus at {base_url} answered HTTP {response.status_code} without JSON"
        ) from None
    if response.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
        detail = body.get("error") if isinstance(body, dict) else None
        kind = body.get("errorType") if isinstance(body, dict) else None
        refused: type[ToolFailure] = ToolFailure
        if _SIZE_REFUSAL.search(str(detail or "")):
            refused = EngineRefusedSize
        elif kind == "timeout" or _TIMED_OUT.search(str(detail or "")):
            refused = EngineTimedOut
        raise refused(
            f"Prometheus rejected the query {query!r} "
            f"(HTTP {response.status_code}): {detail or 'no detail'}"
        )
    return body.get("data")


def _series_read(
    response: httpx.Response, *, base_url: str, query: str, shown_as: str | None
) -> list[RawSeries]:
    """The range matrix of a ``query_range`` answer as raw series (labels as Prometheus
    names them); an error answer or another result type is a ToolFailure."""
    data = answer_data(response, base_url=base_url, query=query) or {}
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise ToolFailure(f"Prometheus returned {kind!r}, expected a range matrix")
    series = []
    for item in data.get("result") or []:
        labels = dict(item.get("metric") or {})
        name = labels.pop("__name__", "") or shown_as or query
        points = [(float(t), float(v)) for t, v in item.get("values") or []]
        series.append(RawSeries(name=name, labels=labels, points=points))
    return series
