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
   ``stddev_over_time`` over the baseline range, with ``offset``), or +Inf for a series with
   baseline samples that has none in the window (it stopped); ``topk`` by service, the +Inf
   ones first (``_Family.screen``). Only when they fill the answer are the level changes
   asked for alone (``_Family.level``);
3. one query for the totals line over every family: ``count_values`` of the services' series
   counts, a few rows whatever the fleet's size, from one selector over every family's
   series (``_totals``);
4. the candidate services' series (``query_range``, FETCH_SERVICES_PER_QUERY services a
   query), on which the one change statistic (``statistics.shift_measure``) ranks as always.

Steps 0-3 answer within SCREENS_SHARE of the call's deadline (``Deadline.share``): a screen
the engine has not answered by then (or that would be sent after it) is a gap the output names,
as a screen refused for its size is, and the candidates of the screens that answered are read
and ranked in what is left. So a fleet too big for the engine to screen in time gets a partial
answer that says what it lacks, never a timeout; only when no family was screened is the call
an error, which says how to narrow it.

So the number of queries grows with the families (bounded by MAX_FAMILIES), never with the
services, and the bytes received and the worker's CPU with the candidates. The engine's cost
is its passes over the series: each selector in a query is one (engines share no repeated
subexpression; each costs a lookup of the series, a read of their samples in the range and
the garbage of both), so a family's screen makes four and the totals one in all, where
each query once asked for what it needed (seven a family and the totals' one). What a pass
reads matters as much as how many there are: on a TSDB cut into time blocks (Prometheus: 2 h),
a range reading two blocks costs about twice one (a lookup and merge of each series in each),
so the baseline's ranges end 1 ms before the window starts, as the statistic's baseline does,
rather than reaching the next block for the one sample at the window's start. A fleet-wide
selector's ``service!=""`` is not sent with the families' passes (Prometheus answers it by
merging every service's postings list, in every pass: a fifth of a screen's CPU at 10,000
services); the series that name no service are left out of the answers instead. The screen is
a filter, not the statistic: a level shift moves the window's mean, and a series that stopped
reporting has baseline samples and none in the window, so what the statistic ranks high is
among a screen's top RANK_CANDIDATES (a test checks that the output equals the all-series
ranking on generated fleets and the demo packs). Counters are screened as per-second rates
(``rate`` over each range; their spread as a subquery of ``rate`` on the grid's step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum

from diagnosis.evidence.common import Deadline, ToolFailure, ToolTimeout
from diagnosis.evidence.http import backend_get, bearer_headers
from diagnosis.evidence.tools.query_metrics.prometheus import (
    EngineRefusedSize,
    EngineTimedOut,
    answer_data,
    engine_timeout,
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
# The families' screens in flight at once (one query each). An engine evaluates a query on
# about one core; more queries than its cores share them, and under a deadline that is the
# worst order: every screen ends late together. At 50,000 services on 2 cores (load 4.6-6.6)
# 4 at once left all five families unscreened at the share's end; 2 at once screened two to
# four of them. At 10,000 services 2 and 4 took the same wall time (4.7-5.5 s, load 4).
ENGINE_CONCURRENCY = 2
# The fleet's size, its families and their screens answer within this share of the call's
# deadline, counted from its start (12.75 s of the default 15 s); a screen not answered by then
# is a named gap. The rest is for the candidates' range queries, their metadata and the
# ranking: at 50,000 services 0.01-0.15 s of range queries and 0.2 s of this worker's CPU
# (load 4.6-6.6), so the 2.25 s left is several times what they took.
SCREENS_SHARE = 0.85
# A screen is not sent with less than this left of the share: the engine could not answer it.
MIN_ASK_SECONDS = 0.1
MAX_FAMILIES = 64  # more families than this: the fleet view covers the first ones and says so
_EPSILON = 1e-9  # keeps a noise-free baseline's ratio finite
_HAS_SERVICE_LABEL = "rootproof_named"  # tags, in the totals, the series that name a service
_COUNT_LABEL = "rootproof_series"  # the totals' rows: services with that many series


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
        named = Matcher(SERVICE_LABEL, "!=", "")
        return [
            Selector(
                name=base.name,
                matchers=(
                    # A regex of service names requires the label: ``service!=""`` would only
                    # add an index-wide lookup.
                    *(m for m in base.matchers if m != named or "" in chunk),
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


def _screen_top() -> int:
    """The rows a family's screen asks for: room for RANK_CANDIDATES flagged services (stopped)
    and as many ranked by level change, and one for the series that name no service."""
    return 2 * RANK_CANDIDATES + 1


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
            "timeout": engine_timeout(deadline),
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

    def __init__(self, name: str, matchers: tuple[Matcher, ...], counter: bool, ranges: _Ranges):
        self.name = name
        # The family was listed as matching the selector: its own __name__ matchers hold.
        self.matchers = tuple(m for m in matchers if m.name != "__name__")
        self.raw = Selector(name=name, matchers=self.matchers).render()
        self.counter = counter
        self.ranges = ranges

    def _baseline(self) -> str:
        """The baseline's samples: the range ends 1 ms before the window starts (the
        statistic's baseline is half-open, ``[baseline_start, window_start)``: a sample at the
        window's start is the window's). On a TSDB cut into blocks at round hours (2 h in
        Prometheus) the closed range that reached the window's first instant also read the
        next block for that one sample: a second series lookup and merge, about 40 % of the
        pass's CPU at 10,000 services."""
        length, offset = self.ranges.baseline * 1000 - 1, self.ranges.window * 1000 + 1
        return f"{self.raw}[{length}ms] offset {offset}ms"

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
        # The rates the spread is taken of read baseline samples only: each reads the two
        # steps before it, so the first is two steps into the baseline and the last before
        # the window (the same half-open baseline as the means; the rates that reached over
        # its ends also read the blocks before and after it).
        step = self.ranges.step
        span = max(self.ranges.baseline - 2 * step, step)
        rates = (
            f"rate({self.raw}[{2 * step}s])[{span * 1000 - 1}ms:{step}s] "
            f"offset {self.ranges.window * 1000 + 1}ms"
        )
        return f"rate({window})", f"rate({baseline})", f"stddev_over_time({rates})"

    def span(self) -> int:
        """The seconds back from the window's end the fleet view reads a series' samples
        over (baseline, window and the lookback before the first grid point)."""
        return self.ranges.window + self.ranges.baseline + int(LOOKBACK_SECONDS)

    def _change(self) -> str:
        """Every series' level change: the window's mean against the baseline's mean, in
        baseline spreads (a series with samples in both)."""
        window_mean, baseline_mean, spread = self._levels()
        # No relative floor for a noise-free baseline (it would cost another pass over the
        # window): any change of one scores without bound and ranks first, within its family.
        return f"abs({window_mean} - {baseline_mean}) / ({spread} + {_EPSILON:g})"

    def level(self, service: str, k: int) -> str:
        """The top ``k`` services by level change alone."""
        return f"topk({k}, max by ({service}) ({self._change()}))"

    def screen(self, service: str) -> str:
        """One expression and four passes over the family's series: every series' level change,
        or +Inf for a series with baseline samples the change was not measured on (it stopped
        in the window, or a counter kept one sample there); the top ``_screen_top()``
        services. The +Inf rows come first, then the largest changes."""
        reported = f"count_over_time({self._baseline()}) * 0 + Inf"
        return f"topk({_screen_top()}, max by ({service}) ({self._change()} or {reported}))"


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


def _totals(families: list[_Family], service: str) -> str:
    """One expression for the fleet's totals: how many services have each number of series
    (``count_values`` of the per-service counts, a few rows whatever the fleet's size), over
    every family (a service in several families counted once), those that name a service
    tagged with _HAS_SERVICE_LABEL (the screens ask for the families without a matcher on the
    service label: an index-wide lookup in each of their passes). One selector reads every
    family's series (``__name__`` one of theirs): ``last_over_time`` keeps the metric name,
    so the families' series stay apart without a tag a family and an ``or`` of them. The tag
    is set on the per-service counts, not on the series: one label rewrite a service instead
    of one a series (the series without a service are the one count of service "")."""
    first = families[0]
    names = "|".join(_regex_literal(family.name) for family in families)
    union = Selector(name=None, matchers=(Matcher("__name__", "=~", names), *first.matchers))
    present = f"last_over_time({union.render()}[{first.span()}s])"
    per_service = f"count by ({service}) ({present})"
    tagged = f'label_replace({per_service}, "{_HAS_SERVICE_LABEL}", "1", "{service}", ".+")'
    return f'count_values by ({_HAS_SERVICE_LABEL}) ("{_COUNT_LABEL}", {tagged})'


def _service_required(selector: Selector, service: str) -> bool:
    """Whether ``selector`` asks for series that name a service (``service!=""``)."""
    return Matcher(service, "!=", "") in selector.matchers


class _Missed(Enum):
    """Why a query of the sweep has no answer: a gap the fleet view names, never a failure."""

    REFUSED = "refused"  # the engine refused it for its size
    LATE = "late"  # no answer within the screens' share of the call's deadline


_Answer = list[dict[str, object]] | _Missed


@dataclass(frozen=True)
class _Screened:
    """One family's answer: its candidate services, or why it has none."""

    name: str
    candidates: tuple[str, ...] | _Missed


def _candidates_read(
    answer: list[dict[str, object]], service: str, *, keep_unnamed: bool
) -> tuple[list[str], list[str], bool]:
    """A screen's rows as (services flagged +Inf, services by level change, best first), and
    whether the answer may be cut (as many rows as asked for). Without ``keep_unnamed`` the
    row of the series that name no service is left out (the fleet view needs a service)."""
    flagged: list[str] = []
    ranked: list[tuple[float, str]] = []
    for item in answer:
        name = _labels(item).get(service, "")
        if not name and not keep_unnamed:
            continue
        value = _raw_value(item)
        if value == math.inf:
            flagged.append(name)
        elif not math.isnan(value):
            ranked.append((value, name))
    ranked.sort(key=lambda pair: (-pair[0], pair[1]))
    return sorted(flagged), [name for _, name in ranked], len(answer) >= _screen_top()


def _family_screened(
    family: _Family, ask: Callable[[str], _Answer], service: str, *, named_only: bool
) -> _Screened:
    """One family's candidates: its screen, and the level changes alone when the flagged
    services filled the answer."""
    answer = ask(family.screen(service))
    if isinstance(answer, _Missed):
        return _Screened(family.name, answer)
    flagged, ranked, cut = _candidates_read(answer, service, keep_unnamed=not named_only)
    if cut and len(ranked) < RANK_CANDIDATES:
        # More flagged services than the answer left room for: the level changes alone.
        alone = ask(family.level(service, RANK_CANDIDATES + 1))
        if isinstance(alone, _Missed):
            return _Screened(family.name, alone)
        _, ranked, _ = _candidates_read(alone, service, keep_unnamed=not named_only)
    return _Screened(family.name, tuple(flagged[:RANK_CANDIDATES] + ranked[:RANK_CANDIDATES]))


def _families_built(
    names: list[str], selector: Selector, service: str, ranges: _Ranges, types: dict[str, str]
) -> list[_Family]:
    """The families' screens, without ``service!=""``: the series that name no service are
    left out of the answers instead (_candidates_read, _totals), the same series without the
    index-wide lookup."""
    matchers = tuple(m for m in selector.matchers if m != Matcher(service, "!=", ""))
    return [
        _Family(
            name,
            matchers,
            is_counter(RawSeries(name, {}, [], declared_type=declared_type_of(name, types))),
            ranges,
        )
        for name in names
    ]


def _fleet_families(
    *,
    base_url: str,
    token_env: str,
    selector: str,
    grid: Grid,
    deadline: Deadline,
    rank_min_series: int,
) -> tuple[list[str], int] | None:
    """The metric families to screen and the series reporting at the window's end; None for
    a fleet of fewer than ``rank_min_series`` such series. An engine too slow to say within
    ``deadline`` is an error that says how to narrow the call, not a timeout."""
    try:
        # A small fleet is told by one cheap count (the series at the window's end, an
        # instant selector: no range read), before any screen is asked for.
        live = _instant(
            base_url=base_url,
            token_env=token_env,
            query=f"count({selector})",
            at=grid.end,
            deadline=deadline,
        )
        reporting = int(sum(_value(item) for item in live))
        if reporting < rank_min_series:
            return None
        families = _families(
            base_url=base_url, token_env=token_env, selector=selector, grid=grid, deadline=deadline
        )
        return families, reporting
    except (ToolTimeout, EngineTimedOut):
        raise ToolFailure(
            f"the metrics engine did not size the fleet within the {deadline.seconds:.3g} s the "
            f"fleet view gives its screens: name a service or a metric"
        ) from None


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
    fewer than ``rank_min_series`` series (every series is then read, as before).

    Everything before the candidates are read answers within SCREENS_SHARE of ``deadline``: a
    screen not answered by then is a gap the output names, as a refused one is, so the call
    ends with what was screened, never as a timeout."""
    screens_deadline = deadline.share(SCREENS_SHARE)
    backend_selector = selector.relabelled(service_label)
    sized = _fleet_families(
        base_url=base_url,
        token_env=token_env,
        selector=backend_selector.render(),
        grid=grid,
        deadline=screens_deadline,
        rank_min_series=rank_min_series,
    )
    if sized is None:
        return None
    names, reporting = sized
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
    types = metric_types(
        base_url=base_url, token_env=token_env, deadline=screens_deadline, names=names
    )
    service = label_to_backend(SERVICE_LABEL, service_label)
    named_only = _service_required(backend_selector, service)
    families = _families_built(names, backend_selector, service, ranges, types)

    def ask(query: str) -> _Answer:
        """The answer, or why there is none (a gap, said): refused for its size, or not
        answered within the screens' share (not sent when that is spent)."""
        if screens_deadline.remaining() < MIN_ASK_SECONDS:
            return _Missed.LATE
        try:
            return _instant(
                base_url=base_url,
                token_env=token_env,
                query=query,
                at=ranges.at,
                deadline=screens_deadline,
            )
        except EngineRefusedSize:
            return _Missed.REFUSED
        except (ToolTimeout, EngineTimedOut):
            return _Missed.LATE

    screens, counted = _screens_asked(families, ask, service, named_only=named_only)
    services, series = _totals_read(counted, keep_unnamed=not named_only)
    found = [s.candidates for s in screens if not isinstance(s.candidates, _Missed)]
    candidates = tuple(sorted({c for screened in found for c in screened}))
    notes.extend(_gaps(screens, counted, screens_deadline, reporting=reporting))
    missed = any(isinstance(s.candidates, _Missed) for s in screens)
    if missed and not candidates:
        # Nothing ranked: what the totals lack does not matter.
        raise ToolFailure("; ".join(_gaps(screens, [], screens_deadline, reporting=reporting)))
    if series < rank_min_series and not missed and not isinstance(counted, _Missed):
        return None
    return FleetScreen(services=services, series=series, candidates=candidates, notes=tuple(notes))


def _screens_asked(
    families: list[_Family], ask: Callable[[str], _Answer], service: str, *, named_only: bool
) -> tuple[list[_Screened], _Answer]:
    """Every family's screen and the totals, ENGINE_CONCURRENCY at once (the engine evaluates
    them side by side). The totals are asked last: under a deadline a family's candidates
    are worth more than the fleet's count, which the candidates read stand in for."""
    with ThreadPoolExecutor(max_workers=min(ENGINE_CONCURRENCY, len(families) + 1)) as pool:
        screened = [
            pool.submit(_family_screened, family, ask, service, named_only=named_only)
            for family in families
        ]
        counted = pool.submit(ask, _totals(families, service))
        return [future.result() for future in screened], counted.result()


def _totals_read(answer: _Answer, *, keep_unnamed: bool) -> tuple[int, int]:
    """(services, series) from the totals' answer (0, 0 when it has none): each row is how
    many services have that many series."""
    services = series = 0
    for item in answer if isinstance(answer, list) else []:
        labels = _labels(item)
        # VictoriaMetrics (1.79) writes the tag empty where it was not set.
        if not keep_unnamed and labels.get(_HAS_SERVICE_LABEL) != "1":
            continue
        count = int(_value(item))
        services += count
        try:
            series += count * int(float(labels.get(_COUNT_LABEL, "0")))
        except ValueError:
            continue
    return services, series


def _missed_said(missed: _Missed, what: str, share: Deadline) -> str:
    """That the metrics engine did not ``what``, and why (refused, or not in time)."""
    if missed is _Missed.REFUSED:
        return f"the metrics engine refused to {what} for its size"
    return (
        f"the metrics engine did not {what} within the {share.seconds:.3g} s the fleet view "
        f"gives its screens"
    )


def _gaps(
    screens: list[_Screened], counted: _Answer, share: Deadline, *, reporting: int
) -> list[str]:
    """What the fleet view lacks because the engine refused queries for their size or did not
    answer them within the screens' share of the deadline. Totals not counted say how many
    series report at the window's end (the first count's answer): the fleet's size, where the
    totals line can only count the candidates read."""
    gaps = []
    for missed in _Missed:
        names = [s.name for s in screens if s.candidates is missed]
        if names:
            gaps.append(
                f"{_missed_said(missed, 'screen ' + ', '.join(names), share)}: those families "
                f"are not in the ranking; name one as metric to rank it"
            )
    if isinstance(counted, _Missed):
        what = "count the fleet's services and series"
        gaps.append(
            f"{_missed_said(counted, what, share)}: the totals are of the candidates read "
            f"({reporting} series report at the window's end)"
        )
    return gaps


def _labels(item: dict[str, object]) -> dict[str, str]:
    metric = item.get("metric")
    return {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}


def _raw_value(item: dict[str, object]) -> float:
    """An answer row's value as the engine wrote it (``+Inf`` and ``NaN`` included); NaN when
    it has none."""
    value = item.get("value")
    try:
        return float(value[1]) if isinstance(value, list) and len(value) == 2 else math.nan
    except (TypeError, ValueError):
        return math.nan


def _value(item: dict[str, object]) -> float:
    number = _raw_value(item)
    return number if math.isfinite(number) else 0.0
