"""query_metrics over either backend: the selector built from the arguments, the grid
chosen, the series read, analysed and rendered."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from diagnosis.evidence.common import (
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    ToolTimeout,
    clamp_record,
)
from diagnosis.evidence.timeutil import duration_format
from diagnosis.evidence.tools.query_metrics.engine import FleetScreen, fleet_screen
from diagnosis.evidence.tools.query_metrics.files import metrics_from_files, rates_apply
from diagnosis.evidence.tools.query_metrics.prometheus import (
    EngineRefusedSize,
    EngineTimedOut,
    metric_types,
    metrics_from_prometheus,
)
from diagnosis.evidence.tools.query_metrics.promql import promql_relabelled
from diagnosis.evidence.tools.query_metrics.render import FleetTotals, metrics_render
from diagnosis.evidence.tools.query_metrics.selector import Matcher, Selector, selector_build
from diagnosis.evidence.tools.query_metrics.series import (
    MAX_GRID_POINTS,
    CountedSeries,
    Grid,
    RawSeries,
    types_declare,
)
from diagnosis.models import SERVICE_LABEL

SWEEP_MAX_POINTS = 80  # grid points over baseline and window for the whole-fleet sweep
# A query the engine refuses for its size is asked again at twice the step, at most this often,
# and never with fewer than MIN_WINDOW_POINTS window points (a shift must hold over 2-3 samples).
MAX_COARSENINGS = 3
MIN_WINDOW_POINTS = 6
# Every series that names its service: the whole fleet, in one query.
FLEET_SELECTOR = Selector(name=None, matchers=(Matcher(SERVICE_LABEL, "!=", ""),))


def _grid(
    *, window: QueryWindow, step: timedelta | None, sweep: bool, clamps: dict[str, Any] | None
) -> Grid:
    """The time grid; a ``step`` it cannot use is clamped and recorded in ``clamps``."""
    # The whole-environment sweep runs on a coarser grid (unless a step is asked for): its
    # cost is every series of the fleet; a drill-down into one service gets full resolution.
    grid = Grid.for_window(
        window, step, SWEEP_MAX_POINTS if sweep and step is None else MAX_GRID_POINTS
    )
    if step is not None and clamps is not None and grid.step != step.total_seconds():
        clamp_record(
            clamps,
            "step",
            given=duration_format(step),
            used=duration_format(timedelta(seconds=grid.step)),
            why=f"at most the window and at most {MAX_GRID_POINTS} points over the range",
        )
    return grid


def _from_prometheus_within_limits(
    *, grid: Grid, window: QueryWindow, **read: Any
) -> tuple[CountedSeries, list[str], FleetTotals | None, Grid]:
    """``_from_prometheus`` on ``grid``, or on a coarser one as often as the engine refuses
    the query for its size (each refusal said in the notes); the grid it was answered on."""
    refusals: list[str] = []
    while True:
        try:
            series, notes, totals = _from_prometheus(grid=grid, window=window, **read)
        except EngineRefusedSize as refused:
            grid = _coarser(grid, window, refused, refusals)
        else:
            return series, refusals + notes, totals, grid


def _coarser(
    grid: Grid, window: QueryWindow, refused: EngineRefusedSize, refusals: list[str]
) -> Grid:
    """The grid at twice the step, after the engine refused ``grid`` for its size (noted in
    ``refusals``); a ToolFailure that says so when the window would keep fewer than
    MIN_WINDOW_POINTS points or MAX_COARSENINGS are spent."""
    step = grid.step * 2
    shown = duration_format(timedelta(seconds=grid.step))
    if (
        len(refusals) >= MAX_COARSENINGS
        or step * MIN_WINDOW_POINTS > (window.end - window.start).total_seconds()
    ):
        raise ToolFailure(
            f"{refused}; still too big at step {shown}: narrow the query (a service, a metric, "
            f"labels or a shorter window)"
        ) from None
    coarser = Grid.for_window(window, timedelta(seconds=step))
    refusals.append(
        f"the metrics engine refused the query at step {shown} for its size; answered at step "
        f"{duration_format(timedelta(seconds=coarser.step))}"
    )
    return coarser


def _description(service: str | None, metric: str | None, labels: dict[str, str]) -> str:
    described = " ".join(f"{k}={v}" for k, v in (("service", service), ("metric", metric)) if v)
    if labels:
        described += " labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    if not service:
        described = (described + " (all services)").strip()
    return described


# Candidates named in the error of a fleet view whose candidates' read ran out of time: enough to
# choose the next call from, few enough to read in one line.
CANDIDATES_NAMED = 8


def _candidates_unread(screen: FleetScreen) -> str:
    """The error of a fleet view whose engine screened the fleet but did not return the
    candidates' series within the call's deadline: which services the screens found, so the
    next call can ask for one of them (a narrower query), instead of a bare timeout."""
    named = [c for c in screen.candidates if c]
    listed = ", ".join(named[:CANDIDATES_NAMED])
    if len(named) > CANDIDATES_NAMED:
        listed += f" and {len(named) - CANDIDATES_NAMED} more"
    return (
        "the metrics engine screened the fleet but did not return the candidate services' "
        f"series within the deadline; the screens found changes in {listed}: "
        "ask for one of them as service"
    )


def _screened_read(
    *,
    base_url: str,
    token_env: str,
    query: str,
    grid: Grid,
    deadline: Deadline,
    service_label: str,
    screen: FleetScreen | None,
) -> tuple[list[RawSeries], list[str]]:
    """``metrics_from_prometheus``; after a fleet screen, a read the engine does not finish
    within the deadline is an error naming the screens' candidates (``_candidates_unread``)."""
    try:
        return metrics_from_prometheus(
            base_url=base_url,
            token_env=token_env,
            query=query,
            grid=grid,
            deadline=deadline,
            service_label=service_label,
        )
    except (ToolTimeout, EngineTimedOut):
        if screen is None or not any(screen.candidates):
            raise
        raise ToolFailure(_candidates_unread(screen)) from None


def _from_prometheus(
    *,
    selector: Selector | None,
    metric: str | None,
    service: str | None,
    labels: dict[str, str],
    window: QueryWindow,
    grid: Grid,
    deadline: Deadline,
    prometheus_url: str,
    prometheus_token_env: str,
    service_label: str,
    rank_min_series: int,
) -> tuple[CountedSeries, list[str], FleetTotals | None]:
    totals: FleetTotals | None = None
    notes: list[str] = []
    selectors = [selector] if selector is not None else []
    screen: FleetScreen | None = None
    if selector is not None and not service and rank_min_series > 0:
        screen = fleet_screen(
            base_url=prometheus_url,
            token_env=prometheus_token_env,
            selector=selector,
            service_label=service_label,
            grid=grid,
            window_start=window.start.timestamp(),
            baseline_start=window.baseline_start.timestamp(),
            deadline=deadline,
            rank_min_series=rank_min_series,
        )
        if screen is not None:
            selectors = screen.selectors(selector)
            totals = FleetTotals(services=screen.services, series=screen.series)
            notes.extend(screen.notes)
    if selector is not None:
        fetched: list[RawSeries] = []
        for narrowed in selectors:
            read, read_notes = _screened_read(
                base_url=prometheus_url,
                token_env=prometheus_token_env,
                query=narrowed.relabelled(service_label).render(),
                grid=grid,
                deadline=deadline,
                service_label=service_label,
                screen=screen,
            )
            fetched.extend(read)
            notes.extend(n for n in read_notes if n not in notes)
        if not fetched:
            return CountedSeries(iter(fetched), 0), notes, totals
        types = metric_types(
            base_url=prometheus_url,
            token_env=prometheus_token_env,
            deadline=deadline,
            names={s.name for s in fetched},
        )
        counted = CountedSeries(rates_apply(types_declare(fetched, types)), len(fetched))
        return counted, notes, totals
    # A PromQL expression is evaluated with this environment's label names; service and
    # labels filter its result.
    fetched, notes = metrics_from_prometheus(
        base_url=prometheus_url,
        token_env=prometheus_token_env,
        query=promql_relabelled(metric or "", service_label),
        grid=grid,
        deadline=deadline,
        service_label=service_label,
        shown_as=metric or "",
    )
    if service_label != SERVICE_LABEL:
        notes.append(
            f"this environment names services with the label {service_label!r}: the PromQL "
            f"was sent with {service_label!r} for service, and its result shows it as service"
        )
    wanted = {**labels, **({SERVICE_LABEL: service} if service else {})}
    kept = [s for s in fetched if all(s.labels.get(k) == v for k, v in wanted.items())]
    return CountedSeries(iter(kept), len(kept)), notes, None


def metrics_query(
    *,
    service: str | None,
    metric: str | None,
    labels: dict[str, str],
    window: QueryWindow,
    step: timedelta | None,
    deadline: Deadline,
    files: tuple[Path, ...] | None = None,
    prometheus_url: str | None = None,
    prometheus_token_env: str = "",
    service_label: str = SERVICE_LABEL,
    clamps: dict[str, dict[str, Any]] | None = None,
    rank_min_series: int = 0,
) -> BackendOutput:
    """Run query_metrics against files (``files``) or Prometheus (``prometheus_url``).

    Without ``service`` the call ranks across the whole environment (fleet view): with
    no ``metric`` either, every series that has a ``service`` label. Either way it is one
    pass over the files, or on Prometheus a number of queries that does not grow with the
    services (one range query for a small fleet; ``engine`` for a large one).

    ``service_label`` is the label that names a service in Prometheus: selectors and PromQL
    are sent with it in place of ``service`` (``promql_relabelled``) and the series come
    back with it read as ``service``; a series' own ``service`` label is then read as
    ``exported_service``, as Prometheus itself renames a clashing label.

    A ``step`` the grid cannot use (longer than the window, or too fine for the range) is
    clamped and recorded in ``clamps``.

    On Prometheus, a fleet-wide selector over at least ``rank_min_series`` series (0: never)
    is ranked in the engine and only the candidates' series are read (``engine``); on either
    backend such a fleet shows its anomalous series and near misses only (``metrics_render``).
    """
    grid = _grid(window=window, step=step, sweep=not service and not metric, clamps=clamps)
    fleet = not service
    if metric:
        selector = selector_build(metric=metric, service=service, labels=labels)
    else:
        base = FLEET_SELECTOR if fleet else Selector(name=None, matchers=())
        selector = selector_build(metric=base.render(), service=service, labels=labels)
    series: CountedSeries
    totals: FleetTotals | None = None
    if prometheus_url:
        series, notes, totals, grid = _from_prometheus_within_limits(
            selector=selector,
            metric=metric,
            service=service,
            labels=labels,
            window=window,
            grid=grid,
            deadline=deadline,
            prometheus_url=prometheus_url,
            prometheus_token_env=prometheus_token_env,
            service_label=service_label,
            rank_min_series=rank_min_series,
        )
    else:
        if selector is None:
            raise ToolFailure(
                f"metric {metric!r} is not a metric name or selector such as "
                'hikaricp_connections_active{pool="main"}; PromQL functions need a live Prometheus'
            )
        read, notes = metrics_from_files(
            files=files or (), selector=selector, grid=grid, deadline=deadline
        )
        series = CountedSeries(rates_apply(read), read.count)
    return metrics_render(
        series=series,
        window=window,
        grid=grid,
        description=_description(service, metric, labels),
        notes=notes,
        fleet=fleet,
        totals=totals,
        large_fleet_series=rank_min_series,
        series_count=series.count,
    )
