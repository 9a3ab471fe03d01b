"""The fleet view of a big fleet screened inside the PromQL engine: the engine ranks every
series, only the candidates' series come back.

A fleet of thousands of services has tens of thousands of series; pulling each into Python
to rank them costs the engine, the link and the worker in proportion to the fleet. Above
``rank_min_series`` series the sweep asks the engine instead, at the window's end (instant
queries, so each answer is a few numbers, not a matrix):

0. one ``count`` of the series at the window's end (an instant selector): below
   ``rank_min_series`` every series is read as for a small fleet, and nothing more is asked;
1. the metric families the selector matches (``/api/v1/label/__name__/values``);
2. per family, one query (ENGINE_CONCURRENCY of them in flight): every series' window mean
   against its baseline mean in units of the baseline's spread (``avg_over_time`` and
   ``stddev_over_time`` over the baseline range, with ``offset``), ``topk`` by service; the
   ``topk`` services whose series stopped in the window; the family's series count;
3. one count of the services over every family (the totals line);
4. the candidate services' series (``query_range``, FETCH_SERVICES_PER_QUERY services a
   query), on which the one change statistic (``statistics.shift_measure``) ranks as always.

So the number of queries grows with the families (bounded by MAX_FAMILIES), never with the
services, and the bytes received and the worker's CPU with the candidates. Each range
function is written once per query: engines do not share repeated subexpressions, so each
repetition is another pass over every series' samples. The screen is a filter, not the
statistic: a level shift moves the window's mean, and a series that stopped reporting has
baseline samples and none in the window, so what the statistic ranks high is among a screen's
top RANK_CANDIDATES (a test checks that the output equals the all-series ranking on generated
fleets and the demo packs). Counters are screened as per-second rates (``rate`` over each
range; their spread as a subquery of ``rate`` on the grid's step).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from diagnosis.evidence.common import Deadline, ToolFailure
from diagnosis.evidence.http import backend_get, bearer_headers
from diagnosis.evidence.tools.query_metrics.prometheus import (
    EngineRefusedSize,
    answer_data,
    metric_types,
)
from diagnosis.evidence.tools.query_metrics.selector import Matcher, Selector, label_to_backend
from diagnosis.evidence.tools.query_metrics.series import (
    LOOKBACK_SECONDS,
    Grid,
    RawSeries,
    declared_type_of,
    is_counter,
)
from diagnosis.models import SERVICE_LABEL

# Services each screen keeps per family: the fleet view shows at most 12 series (3 a service)
# and 10 services; 16 leaves room for the screen's order to differ a little from the
# statistic's near the cut.
RANK_CANDIDATES = 16
FETCH_SERVICES_PER_QUERY = 200  # candidate services a range query names (about 2-4 KB)
ENGINE_CONCURRENCY = 4  # the families' screens in flight at once (one query each)
MAX_FAMILIES = 64  # more families than this: the fleet view covers the first ones and says so
_EPSILON = 1e-9  # keeps a noise-free baseline's ratio finite
_COUNT_LABEL = "rootproof_family"  # tags each family's count in the one count answer


@dataclass(frozen=True)
class FleetScreen:
    """What the engine said about the whole fleet: its totals and the services to fetch."""

    services: int
    series: int
    candidates: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def selectors(self, base: Selector) -> list[Selector]:
        """``base`` narrowed to the candidate services, FETCH_SERVICES_PER_QUERY a selector (a
        proxy in front of the engine may bound a URL's length); the candidate "" (series
        without a service label) is the regex's empty alternative, which matches them."""
        chunks = [
            self.candidates[i : i + FETCH_SERVICES_PER_QUERY]
            for i in range(0, len(self.candidates), FETCH_SERVICES_PER_QUERY)
        ]
        return [
            Selector(
                name=base.name,
                matchers=(
                    *base.matchers,
                    Matcher(SERVICE_LABEL, "=~", "|".join(_regex_literal(s) for s in chunk)),
                ),
            )
            for chunk in chunks
        ]


@dataclass(frozen=True)
class _Ranges:
    """The grid's window and baseline as PromQL ranges, evaluated at ``at`` (the grid's end)."""

    at: float
    window: int  # seconds back from ``at``
    baseline: int  # seconds of baseline, ending where the window starts
    step: int

    @classmethod
    def of(cls, grid: Grid, window_start: float, baseline_start: float) -> _Ranges:
        window = max(int(grid.end - window_start), int(grid.step))
        baseline = max(int(window_start - baseline_start), int(grid.step))
        return cls(at=grid.end, window=window, baseline=baseline, step=max(int(grid.step), 1))


def _regex_literal(text: str) -> str:
    """``text`` matched literally by an RE2 regular expression."""
    return "".join("\\" + c if c in r"\.+*?()|[]{}^$" else c for c in text)


def _engine(
    *, base_url: str, token_env: str, path: str, params: dict[str, str], deadline: Deadline
) -> object:
    response = backend_get(
        backend="Prometheus",
        base_url=base_url,
        url=base_url.rstrip("/") + path,
        params=params,
        headers=bearer_headers(token_env, "Prometheus"),
        deadline=deadline,
    )
    return answer_data(response, base_url=base_url, query=params.get("query", path))


def _instant(
    *, base_url: str, token_env: str, query: str, at: float, deadline: Deadline
) -> list[dict[str, object]]:
    data = _engine(
        base_url=base_url,
        token_env=token_env,
        path="/api/v1/query",
        params={
            "query": query,
            "time": f"{at:.3f}",
            "timeout": f"{max(int(deadline.remaining() * 1000), 100)}ms",
        },
        deadline=deadline,
    )
    result = data.get("result") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("resultType") != "vector"
        or not isinstance(result, list)
    ):
        raise ToolFailure(f"Prometheus did not answer {query!r} with a vector")
    return [item for item in result if isinstance(item, dict)]


class _Family:
    """One metric family's screen: PromQL over its window and baseline, each range function
    written once (the engine does not share repeated subexpressions)."""

    def __init__(self, name: str, selector: Selector, counter: bool, ranges: _Ranges) -> None:
        self.name = name
        # The family was listed as matching the selector: its own __name__ matchers hold.
        matchers = tuple(m for m in selector.matchers if m.name != "__name__")
        self.raw = Selector(name=name, matchers=matchers).render()
        self.counter = counter
        self.ranges = ranges

    def _baseline(self, seconds: int | None = None) -> str:
        return f"{self.raw}[{seconds or self.ranges.baseline}s] offset {self.ranges.window}s"

    def _levels(self) -> tuple[str, str, str]:
        """The window's mean, the baseline's mean and the baseline's spread (a counter's as
        per-second rates: its mean rate is one ``rate`` over the range, its spread that of the
        rate on the grid's step, a subquery)."""
        window, baseline = f"{self.raw}[{self.ranges.window}s]", self._baseline()
        if not self.counter:
            return (
                f"avg_over_time({window})",
                f"avg_over_time({baseline})",
                f"stddev_over_time({baseline})",
            )
        step = self.ranges.step
        rates = (
            f"rate({self.raw}[{2 * step}s])[{self.ranges.baseline}s:{step}s] "
            f"offset {self.ranges.window}s"
        )
        return f"rate({window})", f"rate({baseline})", f"stddev_over_time({rates})"

    def present(self) -> str:
        """Its series with a sample in the range the fleet view reads (baseline, window)."""
        span = self.ranges.window + self.ranges.baseline + int(LOOKBACK_SECONDS)
        return f"count_over_time({self.raw}[{span}s])"

    def screen(self, service: str) -> str:
        """One expression: the top services by level change, the top services whose series
        stopped in the window, and the family's series count (tagged with its name)."""
        window_mean, baseline_mean, spread = self._levels()
        # No relative floor for a noise-free baseline (it would cost another pass over the
        # window): any change of one scores without bound and ranks first, within its family.
        level = f"abs({window_mean} - {baseline_mean}) / ({spread} + {_EPSILON:g})"
        stopped = (
            f"count_over_time({self._baseline()}) "
            f"unless count_over_time({self.raw}[{self.ranges.window}s])"
        )
        count = f'label_replace(count({self.present()}), "{_COUNT_LABEL}", "{self.name}", "", "")'
        return (
            f"topk({RANK_CANDIDATES}, max by ({service}) ({level})) or "
            f"topk({RANK_CANDIDATES}, max by ({service}) ({stopped})) or {count}"
        )


def _families(
    *, base_url: str, token_env: str, selector: str, grid: Grid, deadline: Deadline
) -> list[str]:
    data = _engine(
        base_url=base_url,
        token_env=token_env,
        path="/api/v1/label/__name__/values",
        params={"match[]": selector, "start": f"{grid.start:.3f}", "end": f"{grid.end:.3f}"},
        deadline=deadline,
    )
    if not isinstance(data, list):
        raise ToolFailure("Prometheus did not list the metric names")
    return sorted(name for name in data if isinstance(name, str))


def _services_count(families: list[_Family], service: str) -> str:
    """The services over every family (a service in several families counted once)."""
    union = " or ".join(family.present() for family in families)
    return f"count(group by ({service}) ({union}))"


def fleet_screen(
    *,
    base_url: str,
    token_env: str,
    selector: Selector,
    service_label: str,
    grid: Grid,
    window_start: float,
    baseline_start: float,
    deadline: Deadline,
    rank_min_series: int,
) -> FleetScreen | None:
    """The fleet's totals and candidate services, ranked in the engine; None when the fleet has
    fewer than ``rank_min_series`` series (every series is then read, as before)."""
    backend_selector = selector.relabelled(service_label)
    # A small fleet is told by one cheap count (the series at the window's end, an instant
    # selector: no range read), before any screen is asked for.
    live = _instant(
        base_url=base_url,
        token_env=token_env,
        query=f"count({backend_selector.render()})",
        at=grid.end,
        deadline=deadline,
    )
    if sum(_value(item) for item in live) < rank_min_series:
        return None
    names = _families(
        base_url=base_url,
        token_env=token_env,
        selector=backend_selector.render(),
        grid=grid,
        deadline=deadline,
    )
    if not names:
        return FleetScreen(services=0, series=0, candidates=())
    notes: list[str] = []
    if len(names) > MAX_FAMILIES:
        notes.append(
            f"the fleet view ranked the first {MAX_FAMILIES} of {len(names)} metric families "
            f"(by name); name a metric to rank the others"
        )
        names = names[:MAX_FAMILIES]
    ranges = _Ranges.of(grid, window_start, baseline_start)
    types = metric_types(base_url=base_url, token_env=token_env, deadline=deadline, names=names)
    families = [
        _Family(
            name,
            backend_selector,
            is_counter(RawSeries(name, {}, [], declared_type=declared_type_of(name, types))),
            ranges,
        )
        for name in names
    ]
    service = label_to_backend(SERVICE_LABEL, service_label)
    queries = [_services_count(families, service)] + [f.screen(service) for f in families]

    def ask(query: str) -> list[dict[str, object]] | None:
        """The answer; None when the engine refused the query for its size (a gap, said)."""
        try:
            return _instant(
                base_url=base_url, token_env=token_env, query=query, at=ranges.at, deadline=deadline
            )
        except EngineRefusedSize:
            return None

    # The families' screens are independent: the engine evaluates them side by side.
    with ThreadPoolExecutor(max_workers=min(ENGINE_CONCURRENCY, len(queries))) as pool:
        counted, *answers = pool.map(ask, queries)
    series, candidates, refused = _screens_read(families, answers, service)
    notes.extend(_gaps(refused, counted_refused=counted is None))
    if refused and not candidates:
        raise ToolFailure("; ".join(notes))
    if series < rank_min_series and not refused:
        return None
    return FleetScreen(
        services=int(sum(_value(item) for item in counted or [])),
        series=series,
        candidates=candidates,
        notes=tuple(notes),
    )


def _screens_read(
    families: list[_Family], answers: list[list[dict[str, object]] | None], service: str
) -> tuple[int, tuple[str, ...], list[str]]:
    """The screens' answers: the series counted, the candidate services, the refused families."""
    series = 0
    candidates: dict[str, None] = {}
    refused = [f.name for f, answer in zip(families, answers, strict=True) if answer is None]
    for item in (item for answer in answers if answer is not None for item in answer):
        labels = _labels(item)
        if _COUNT_LABEL in labels:
            series += int(_value(item))
        else:  # "": series without a service label (a metric asked for fleet-wide)
            candidates[labels.get(service, "")] = None
    return series, tuple(sorted(candidates)), refused


def _gaps(refused: list[str], *, counted_refused: bool) -> list[str]:
    """What the fleet view lacks because the engine refused queries for their size."""
    gaps = []
    if refused:
        gaps.append(
            f"the metrics engine refused to screen {', '.join(refused)} for its size: those "
            f"families are not in the totals or the ranking; name one as metric to rank it"
        )
    if counted_refused:
        gaps.append(
            "the metrics engine refused to count the services for the query's size: the "
            "services count is of the candidates read"
        )
    return gaps


def _labels(item: dict[str, object]) -> dict[str, str]:
    metric = item.get("metric")
    return {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}


def _value(item: dict[str, object]) -> float:
    value = item.get("value")
    try:
        number = float(value[1]) if isinstance(value, list) and len(value) == 2 else math.nan
    except (TypeError, ValueError):
        number = math.nan
    return number if math.isfinite(number) else 0.0
