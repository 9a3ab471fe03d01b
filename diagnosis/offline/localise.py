"""Localisation along the calls: which anomalous service is the cause, which only inherit.

With call edges (a pack's ``topology.json``, a live environment's edge query, or
caller/callee labels on the metrics themselves) the cause is the most downstream
anomalous service whose anomaly its own callees do not explain: a caller whose
latency or errors rose while a callee's did too (and no later) only inherits them.
Among the unexplained services, the one that explains most of the anomalous
services above it (its transitive callers), with the strongest own shift, ranks
first — the call-graph traversal of the published RCA baselines, scored the
BARO/RCD way on each service's own robust change.

Without edges the order is onset first (the earliest sustained change), then
strength; a service whose error logs blame another is still handed on to it by
the log-based cascade in ``analysis``.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from diagnosis.evidence import vocab

from .analysis import (
    ONSET_MIN,
    Call,
    LogSignal,
    MetricSignal,
    Suspect,
    in_flight_load,
    metric_signals,
)
from .capacity import finite_number
from .kinds import client_gap_decide, kinds_decide

# Each kind of own symptom, and the callee kinds that can pass it up to a caller. Causal:
# a caller waits for its callee, so a slow or saturated callee makes it slow, and its
# timeouts and failures become the caller's errors; nothing a callee does consumes the
# caller's own CPU, memory or disk, so a caller's resource shift is its own.
INHERITS = {
    "latency": {"latency", "resource"},
    "errors": {"errors", "latency", "resource"},
    "resource": set(),  # a service's own saturation is its own, whoever it calls
}
MAX_PATH = 6  # services shown along a propagation path; longer paths are cut, not lost
# What a service passes on to the services that call it: a caller sees its callee only
# through its answers, slower or failed; a resource shift that stays inside it does not.
PROPAGATING = frozenset(k for k, passed in INHERITS.items() if passed)


@dataclass(frozen=True)
class Topology:
    """Known call edges, caller → callee."""

    edges: frozenset[tuple[str, str]] = frozenset()

    @property
    def known(self) -> bool:
        return bool(self.edges)

    def callees(self, service: str) -> list[str]:
        return sorted(b for a, b in self.edges if a == service)

    def callers(self, service: str) -> list[str]:
        return sorted(a for a, b in self.edges if b == service)

    def services(self) -> set[str]:
        return {s for edge in self.edges for s in edge}


def topology_build(
    *, declared: Iterable[tuple[str, str]] = (), calls: Iterable[Call] = ()
) -> Topology:
    """Declared edges plus the caller/callee pairs that the metrics' own labels name."""
    edges = {(a, b) for a, b in declared if a and b and a != b}
    for call in calls:
        if call.tool_name != "query_metrics":
            continue
        for signal in metric_signals(call):
            edges.update(vocab.call_label_pairs(signal.labels))
    return Topology(edges=frozenset(edges))


def log_call_edges(suspects: Iterable[Suspect], known: Iterable[str]) -> frozenset[tuple[str, str]]:
    """Caller → callee edges from log templates that report a call to a named service
    ("Call to X failed", "upstream X timed out": ``vocab.log_kind`` "dependency").

    Causal: a service that writes that it called X and the call failed did call X — the line
    is the caller's own record of the edge, and the direction is the line's writer to the
    name. X counts only as a service of the environment (``known``) matched as a whole token
    (``mentioned_services``): a word that merely looks like a service name is no edge.
    """
    names = {name.lower(): name for name in known}
    edges: set[tuple[str, str]] = set()
    for entry in suspects:
        for lg in entry.logs:
            if lg.kind != "dependency" or lg.injected:
                continue
            for mention in lg.mentions:
                callee = names.get(mention.lower())
                if callee and callee != entry.service:
                    edges.add((entry.service, callee))
    return frozenset(edges)


_TOKENS = re.compile(r"[^\w-]+")


def client_callee(signal: MetricSignal, known: dict[str, str], own: str) -> str:
    """The callee a caller's client-side latency series measures the wait on ("" if none).

    A label of ``vocab.PEER_LABELS`` whose value holds exactly one service of the environment as a
    whole token (``pay-db``, ``pay-db.prod.svc:5432``; not ``pay-db-replica``); an
    ambiguous value (two services) names none, a wrong edge being worse than a missing one.
    """
    if signal.kind != "latency":
        return ""
    labels = {k.lower().replace(".", "_"): v for k, v in signal.labels.items()}
    for label in vocab.PEER_LABELS:
        value = labels.get(label)
        if not isinstance(value, str):
            continue
        found = {known[t] for t in _TOKENS.split(value.lower()) if t in known}
        found.discard(own)
        if len(found) == 1:
            return found.pop()
    return ""


def client_call_edges(
    suspects: Iterable[Suspect], known: Iterable[str]
) -> frozenset[tuple[str, str]]:
    """Caller → callee edges from callers' client-side latency series labelled with the callee.

    Causal: a client span or timer measures the caller's wait on that callee, so the series
    exists only because the caller calls it; its owner (the series' ``service``) is the
    caller, the label's value the callee (``client_callee``).
    """
    names = {name.lower(): name for name in known}
    edges: set[tuple[str, str]] = set()
    for entry in suspects:
        for signal in entry.metrics:
            callee = client_callee(signal, names, entry.service)
            if callee:
                edges.add((entry.service, callee))
    return frozenset(edges)


def client_gaps(entry: Suspect, states: dict[str, ServiceState], observed: set[str]) -> list[str]:
    """The callees whose wait rose on the caller's client side while their own side did not.

    Causal: the client-side time is the callee's server-side time plus the way there and
    back (network, the caller's connection pool, its queue for one). When the client-side
    latency to X rose harmfully and X, observed (``observed``: it has data), shows no
    latency or saturation shift of its own, the added time was spent between them: the
    network or the caller's client pool, never X. An unobserved X proves nothing either way.
    """
    names = {name.lower(): name for name in states}
    gaps: set[str] = set()
    for signal in entry.metrics:
        callee = client_callee(signal, names, entry.service)
        if not callee or callee not in observed or not harmful(signal):
            continue
        if states[callee].symptoms.keys().isdisjoint({"latency", "resource"}):
            gaps.add(callee)
    return sorted(gaps)


def client_gap_waits(
    entry: Suspect, gaps: list[str], states: dict[str, ServiceState]
) -> list[MetricSignal]:
    """The caller's client-side series whose wait on one of ``gaps`` rose (client_gaps)."""
    names = {name.lower(): name for name in states}
    return [
        s for s in entry.metrics if harmful(s) and client_callee(s, names, entry.service) in gaps
    ]


def harmful(signal: MetricSignal) -> bool:
    """An abnormal shift in the direction that hurts: slower, more errors, less health."""
    if not signal.abnormal or finite_number(signal.window_mean) is None:
        return False  # a series that stopped reporting is a gap, not a symptom
    if signal.harm_direction:
        return signal.direction == signal.harm_direction
    if signal.kind == "restart":
        return True
    if signal.kind == "resource":
        # work in flight below capacity is the slowdown's echo, not a resource of its own;
        # a use short of its observed capacity is work done (capacity.spare)
        return signal.bad_direction and not in_flight_load(signal) and not signal.spare
    return False


def _symptom_kind(signal: MetricSignal) -> str:
    """The kind of symptom a harmful shift is, for what it passes on (``INHERITS``): a
    restart, and a failing network path of the service's own (retransmits, drops: neither
    a latency nor an error count of its requests), are the service's own mechanism, as a
    saturated resource is, and show in its callers as their latency or errors."""
    if signal.kind == "restart":
        return "resource"
    if signal.kind not in {"latency", "errors"} and signal.harm_direction:
        return "resource"
    return signal.kind


@dataclass
class Symptom:
    kind: str
    strength: float
    onset: datetime | None
    signal: MetricSignal
    log: LogSignal | None = None  # the log template behind a symptom with no series


@dataclass
class ServiceState:
    service: str
    symptoms: dict[str, Symptom] = field(default_factory=dict)
    all_latency: list[Symptom] = field(default_factory=list)
    shifts: list[Symptom] = field(default_factory=list)  # every harmful shift, dated or not
    traffic: float | None = None  # its usual request rate (baseline), when it reports one
    served: float | None = None  # the requests it served in the window (same series' level)
    traffic_rate: bool = False  # both read from a counter's per-second rate

    @property
    def anomalous(self) -> bool:
        return bool(self.symptoms)

    @property
    def strength(self) -> float:
        return max((s.strength for s in self.symptoms.values()), default=0.0)

    @property
    def onset(self) -> datetime | None:
        times = [s.onset for s in self.symptoms.values() if s.onset is not None]
        return min(times) if times else None


# Significance stops discriminating here. Whatever the baseline's distribution, at most
# 1/k² of its samples lie k robust scales from its median (Chebyshev); at k = 10 that is
# one in 100, about one sample of a two-hour baseline at one-minute samples: a shift this
# far is beyond anything the baseline shows, and a larger score only says its noise was
# smaller. Beyond it, what separates two candidates is the size of their change.
SIGNIFICANCE_CAP = 10.0
# Figures are compared to three significant digits (the tools print them so): a level
# under a thousandth of the other is zero to them, so no change counts beyond 1000×.
RESOLVABLE = 1e-3


def _levels(signal: MetricSignal) -> tuple[float | None, float | None]:
    """(baseline, window) levels: the tools' robust pair (baseline median, level of the
    shift) when reported, else the baseline mean and the window extreme."""
    base, level = finite_number(signal.baseline_median), finite_number(signal.window_level)
    if base is not None and level is not None:
        return base, level
    base = finite_number(signal.baseline_mean)
    extreme = signal.window_min if _falls(signal) else signal.window_max
    return base, finite_number(extreme)


def _falls(signal: MetricSignal) -> bool:
    return signal.direction == "down"


def relative_change(signal: MetricSignal) -> float:
    """How far the window went from the baseline, relative to it, in the harmful direction.

    A health series (availability, success rate) is read as its complement, the failure
    rate, so 100 → 98 % is "from no failures to 2 %", not a 2 % dip.
    """
    base, level = _levels(signal)
    if base is None or level is None:
        return 0.0
    if signal.kind == "errors" and signal.subkind == "health":
        cap = 100.0 if base > 1.0 else 1.0
        base_fail, fail = max(cap - base, 0.0), max(cap - level, 0.0)
        if fail <= base_fail:
            return 0.0
        # a share is resolved against the whole it is a share of (0.1 point of 100 %), so a
        # dip from exactly 100 % counts by its size: 99.99 % is not 98 %
        return (fail - base_fail) / max(base_fail, cap * RESOLVABLE)
    if _falls(signal):
        if base <= 0:
            return 0.0
        return (base - level) / max(level, base * RESOLVABLE)
    rise = max(level - base, 0.0)
    return rise / max(abs(base), abs(level) * RESOLVABLE, 1e-12)


def relative_failures(signal: MetricSignal | None) -> float | None:
    """The added failure share of a ratio-like error series (health read as its complement):
    comparable across services once weighted by their traffic. None for counts and rates,
    whose units differ from one service to another."""
    if signal is None:
        return None
    base, level = _levels(signal)
    if base is None or level is None:
        return None
    if signal.subkind == "health":
        cap = 100.0 if base > 1.0 else 1.0
        return max((cap - level) - (cap - base), 0.0) / cap
    if vocab.is_ratio_metric(signal.metric):
        cap = 100.0 if max(base, level) > 1.0 else 1.0
        return max(level - base, 0.0) / cap
    return None


def _strength(signal: MetricSignal) -> float:
    """Significance (the tool's robust score, capped) times effect size (log of the change).

    Both matter and neither is enough: a large score on a flat baseline may be a tiny
    change, a large change on a wild baseline may be noise. The logarithm makes the size
    count by orders of magnitude (a tenfold change is a tenfold change at any level), and
    with the two caps the two factors span comparable ranges (3–10 and 1–11).
    """
    significance = min(signal.anomaly, SIGNIFICANCE_CAP)
    return significance * (1.0 + math.log2(1.0 + relative_change(signal)))


def service_states(suspects: list[Suspect]) -> dict[str, ServiceState]:
    states: dict[str, ServiceState] = {}
    for entry in suspects:
        state = ServiceState(entry.service)
        for signal in entry.metrics:
            if not harmful(signal):
                continue
            found = Symptom(_symptom_kind(signal), _strength(signal), signal.onset, signal)
            kind = found.kind
            state.shifts.append(found)
            if kind == "latency":
                state.all_latency.append(found)
            current = state.symptoms.get(kind)
            if current is None or found.strength > current.strength:
                state.symptoms[kind] = found
        state.traffic, state.served, state.traffic_rate = _traffic(entry.metrics)
        for lg in entry.abnormal_logs:
            if lg.kind == "dependency" or lg.injected:
                continue
            kind = "resource" if lg.kind == "resource" else "errors"
            logged = Symptom(kind, 3.0, lg.onset, None, lg)  # type: ignore[arg-type]
            state.shifts.append(logged)
            if kind not in state.symptoms:
                state.symptoms[kind] = logged
        states[entry.service] = state
    return states


# A callee explains its caller's shift only if it carries the larger part of it: below
# half, the rest (the caller's own work, or another callee) accounts for more than it does,
# and the callee is at most one contributor among others, not the explanation.
ACCOUNTS_FOR = 0.5


def _delta(signal: MetricSignal | None) -> float | None:
    """The absolute shift of a latency series, in its own unit (seconds add up along calls)."""
    if signal is None:
        return None
    base, level = _levels(signal)
    return None if base is None or level is None else level - base


def _same_measure(a: MetricSignal, b: MetricSignal) -> bool:
    def shape(signal: MetricSignal) -> tuple[str, tuple[tuple[str, str], ...]]:
        labels = {k: v for k, v in signal.labels.items() if k not in vocab.INSTANCE_LABELS}
        return signal.metric, tuple(sorted(labels.items()))

    return shape(a) == shape(b)


def _coverage(
    callee: Symptom,
    caller: Symptom,
    callee_state: ServiceState,
    caller_state: ServiceState,
) -> float:
    """How much of the caller's strongest shift the callee's can account for, 0 to 1.

    Latency adds up along a call: the callee's added seconds on the same measure (else
    its largest), times the share of the caller's requests it served in the window (the
    ones its shift touched), against the caller's added seconds. Failure shares of
    ratio-like error series compare the same way; pairs without a common unit (a
    callee's latency or saturation against its caller's failures) by their significance
    (``_significance``) and the part of the caller's traffic the callee can carry
    (``_carried``). Below ACCOUNTS_FOR it does not account for it at all.
    """
    ratio: float | None = None
    served = _share(callee_state, caller_state, served=True)
    if caller.kind == "latency" and callee.kind == "latency" and caller.signal is not None:
        wanted = _delta(caller.signal)
        same = [
            _delta(sym.signal)
            for sym in callee_state.all_latency
            if sym.signal is not None and _same_measure(sym.signal, caller.signal)
        ]
        every = [_delta(sym.signal) for sym in callee_state.all_latency]
        pool = [d for d in same if d is not None] or [d for d in every if d is not None]
        if wanted is not None and wanted > 0 and pool:
            ratio = max(pool) * served / wanted
    elif caller.kind == "errors" and callee.kind == "errors":
        mine, theirs = relative_failures(caller.signal), relative_failures(callee.signal)
        if mine is not None and theirs is not None and mine > 0:
            ratio = theirs * served / mine
    if ratio is None:  # no common unit (latency passed on as errors, say)
        mine = _significance(caller)
        ratio = _significance(callee) / mine if mine > 0 else 1.0
        ratio = min(ratio, 1.0) * _carried(callee_state, caller_state, caller)
    return min(ratio, 1.0) if ratio >= ACCOUNTS_FOR else 0.0


def _carried(callee: ServiceState, caller: ServiceState, symptom: Symptom) -> float:
    """How much of the caller's shift the callee's part of its traffic can carry, 0 to 1.

    Causal, conservation of requests: a callee passes its trouble on only to the requests
    the caller sends it. A measure over all of the caller's requests (a latency, a failure
    share) therefore moves by at most the callee's share of them (``_share``). A count of
    the caller's failed requests is a part of its requests, not a measure over all of them:
    it can all have come through a callee whose share of the caller's requests is at least
    the failed requests' share (``_failed_share``), and only beyond that is it cut by the
    ratio of the two. No constant.
    """
    share = min(_share(callee, caller), 1.0)
    failed = _failed_share(symptom, caller)
    if failed is None:
        return share
    return 1.0 if failed <= share else share / failed


def _failed_share(symptom: Symptom, state: ServiceState) -> float | None:
    """The share of the service's requests in the window that its added failures are, where
    the symptom counts failed requests and both it and the service's traffic are counters'
    per-second rates (one unit: per second); None for a failure share, a log template or a
    count in another unit (a gauge's requests per scrape), whose share is not known."""
    signal = symptom.signal
    if symptom.kind != "errors" or signal is None or relative_failures(signal) is not None:
        return None
    added, served = _delta(signal), state.served
    if not (signal.rate and state.traffic_rate) or added is None or not served or served <= 0:
        return None
    return max(added, 0.0) / served


def _significance(symptom: Symptom) -> float:
    """How far beyond its own baseline's noise a symptom is, in that baseline's robust
    spreads (capped at SIGNIFICANCE_CAP); a log template's in the standard deviations its
    window count lies above what its baseline rate gives (``LogSignal.excess``, the log
    tool's own test of a surge), capped the same way: a new exception logged hundreds of
    times is as far beyond its baseline as any series can be, and three lines are not (a
    call that does not say its window and baseline: the threshold a log counts from, 3.0).

    Statistical: between two measures of different units (a caller's failure share, its
    callee's latency or CPU) only the significance compares: each is counted in its own
    baseline's spreads. Their relative sizes are not the same quantity — a failure share
    from 0 % has no relative size (it is as large as ``RESOLVABLE`` lets it be), a latency's
    is its factor — so ``_strength``, which multiplies the two, would let any dip in an
    availability outweigh any slowdown of what it calls. How many of the caller's failures
    a slow callee causes depends on the caller's timeouts, which no series shows.
    """
    excess = symptom.log.excess if symptom.log is not None else None
    if excess is not None:
        return min(excess, SIGNIFICANCE_CAP)
    if symptom.signal is None:
        return symptom.strength
    return min(symptom.signal.anomaly, SIGNIFICANCE_CAP)


def _traffic(signals: list[MetricSignal]) -> tuple[float | None, float | None, bool]:
    """The service's request rate, usual and in the window: its busiest traffic series'
    baseline level and its level in the window, and whether that is a counter's per-second
    rate."""
    found: list[tuple[float, float | None, bool]] = []
    for signal in signals:
        if signal.kind != "traffic":
            continue
        base = finite_number(signal.baseline_median)
        base = base if base is not None else finite_number(signal.baseline_mean)
        if base is not None and base > 0:
            level = finite_number(signal.window_level)
            level = level if level is not None else finite_number(signal.window_mean)
            found.append((base, level, signal.rate))
    if not found:
        return None, None, False
    return max(found, key=lambda item: item[0])


def _share(callee: ServiceState, caller: ServiceState, *, served: bool = False) -> float:
    """How much of the caller's traffic the callee's traffic is (1 when either is unknown):
    a callee serving a tenth of the caller's requests passes on a tenth of its shift.
    ``served``: the requests of the window, the ones its measured shift touched."""
    mine, theirs = (callee.served, caller.served) if served else (callee.traffic, caller.traffic)
    if served and (mine is None or theirs is None or theirs <= 0):
        return _share(callee, caller)
    if mine is None or theirs is None:
        return 1.0
    return min(mine / theirs, 10.0)


def _resolution(a: Symptom, b: Symptom) -> float:
    """How far apart two onsets may be dated and still be in either order: the coarser of
    the two series' resolutions (a log line's first time is stamped to the second)."""
    return max(
        a.signal.resolution_s if a.signal is not None else 1.0,
        b.signal.resolution_s if b.signal is not None else 1.0,
    )


def _explains(callee: ServiceState, caller: ServiceState, kind: str) -> float:
    """How well the callee's anomaly accounts for the caller's ``kind`` symptom (0: not at
    all): a compatible kind, a shift that started no later than the caller's, big enough.

    Causal: an effect does not precede its cause. A callee whose shift is dated later
    than its caller's by a full resolution of the coarser of the two series started
    later, whatever the stamps' convention, and cannot be why its caller changed. An
    earlier start can (a callee's latency creeping up, or its pool filling, shows in its
    callers once it crosses their noise), so there is no bound that way.
    """
    wanted = INHERITS.get(kind, set())
    mine = caller.symptoms[kind]
    best = 0.0
    for other_kind, symptom in callee.symptoms.items():
        if other_kind not in wanted:
            continue
        aligned = (
            mine.onset is None
            or symptom.onset is None
            or (symptom.onset - mine.onset).total_seconds() < _resolution(symptom, mine)
        )
        if aligned:
            best = max(best, _coverage(symptom, mine, callee, caller))
    return best


def _callers_through(links: dict[tuple[str, str], float], service: str) -> list[str]:
    return sorted(a for a, b in links if b == service)


def _ancestors(links: dict[tuple[str, str], float], start: str) -> dict[str, float]:
    """Services whose anomaly ``start`` explains (its inheriting callers, transitively),
    each with how much of it (the coverages multiplied along the way)."""
    found: dict[str, float] = {}
    queue = deque([(start, 1.0)])
    while queue:
        current, carried = queue.popleft()
        for caller in _callers_through(links, current):
            share = carried * links[(caller, current)]
            if caller != start and share > found.get(caller, 0.0):
                found[caller] = share
                queue.append((caller, share))
    return found


def _path(links: dict[tuple[str, str], float], root: str, symptoms: list[str]) -> list[str]:
    """The propagation path seen: from a named symptom service (else the farthest
    inheriting caller) down the inheriting calls to ``root``."""
    parents: dict[str, str] = {}
    seen = {root}
    queue = deque([root])
    while queue:
        current = queue.popleft()
        for caller in _callers_through(links, current):
            if caller not in seen:
                seen.add(caller)
                parents[caller] = current
                queue.append(caller)
    targets = [s for s in symptoms if s in parents] or list(parents)[-1:]
    if not targets:
        return [root]
    path = [targets[0]]
    while path[-1] != root and len(path) < MAX_PATH:
        path.append(parents[path[-1]])
    return path if path[-1] == root else [root]


def _unseen(symptom: Symptom) -> float:
    """Seconds before the symptom's onset no sample covered (0 for a log line's first time)."""
    return symptom.signal.onset_unseen_s if symptom.signal is not None else 0.0


def _anchors(
    states: dict[str, ServiceState], symptoms: list[str], reported: datetime | None
) -> list[tuple[datetime, float]]:
    """When the trouble the question is about began: each shift the named services show
    (one may have had an unrelated blip before the trouble; the cause began with one of
    their shifts, not necessarily the first), and the time the question reports; each
    with the seconds before it no sample covered (the trouble may have begun that early).

    The reported time counts even where the named services show shifts: the series that
    would show the trouble itself may be missing (a metric family not collected, an
    exporter down), and what is not observed is a gap, not a sign that the trouble began
    at the time of whatever else those services show.
    """
    found = {
        (symptom.onset, _unseen(symptom))
        for name in symptoms
        if name in states
        for symptom in states[name].symptoms.values()
        if symptom.onset is not None
    }
    if reported is not None:
        found.add((reported, 0.0))
    return sorted(found)


def _began_with(state: ServiceState, anchors: list[tuple[datetime, float]], slack_s: float) -> bool:
    """Its latency or errors began with one of the trouble's shifts (its resources may
    lead, never lag).

    Each onset is known to within ``slack_s`` and, where samples were missing right before
    it, that gap too (``onset_unseen_s``: the change lies somewhere in it, the onset is
    only where the first sample after it showed): two onsets began together if some
    times within those bounds are within ``slack_s`` of each other.
    """
    for kind, symptom in state.symptoms.items():
        if symptom.onset is None:
            return True
        for anchor, anchor_unseen in anchors:
            gap = (symptom.onset - anchor).total_seconds()
            # the real gap lies in [gap - own unseen, gap + the anchor's unseen]
            low, high = gap - _unseen(symptom), gap + anchor_unseen
            if (low <= slack_s and high >= -slack_s) or (kind == "resource" and low <= slack_s):
                return True
    return False


def localise(
    suspects: list[Suspect],
    topology: Topology,
    *,
    symptoms: list[str],
    slack_s: float,
    reported: datetime | None = None,
    looked_at: Iterable[str] = (),
) -> list[Suspect]:
    """Re-rank ``suspects`` along the call graph; returns them most-likely cause first.

    ``slack_s`` is how finely the session's data dates an onset (gather's
    ``_slack_seconds``): a candidate whose latency or errors began further than that from
    when the trouble began (the named services' own onsets, and ``reported``, the time
    the question or alert gives) is another event (``mistimed``) and ranks in a lower
    tier. Whether a callee explains a caller is judged per pair, on the two series' own
    resolutions (``_explains``). ``looked_at``: the services the evidence asked about
    (those without any data among them are unobserved, ``unobserved_callees``).
    """
    # the kind each service's own evidence shows, with or without call edges
    kinds_decide(suspects, strength=_strength, slack_s=slack_s)
    if not topology.known:
        return without_calls(suspects, service_states(suspects))
    states = service_states(suspects)
    by_name = {s.service: s for s in suspects}
    anomalous = {name for name, state in states.items() if state.anomalous}
    # (caller, callee) -> how much of the caller's anomaly the callee accounts for
    links: dict[tuple[str, str], float] = {}
    for name in sorted(anomalous):
        state = states[name]
        explained: set[str] = set()
        for callee in topology.callees(name):
            other = states.get(callee)
            if other is None or not other.anomalous:
                continue
            covered = {k: _explains(other, state, k) for k in state.symptoms}
            kinds = [k for k, value in covered.items() if value > 0]
            if kinds:
                links[(name, callee)] = max(covered.values())
                explained.update(kinds)
        if explained and explained >= set(state.symptoms):
            by_name[name].inherited_from = sorted(c for a, c in links if a == name)
    anchors = _anchors(states, symptoms, reported)
    unobserved = {s for s in looked_at if s not in by_name or not by_name[s].has_data}
    observed = {s.service for s in suspects if s.has_data}
    for name in anomalous:
        entry = by_name[name]
        strength = states[name].strength + entry.score
        if entry.inherited_from:
            entry.graph_score = strength
            entry.kind, entry.subkind = "dependency", ""
            continue
        explained_by_it = _ancestors(links, name)
        entry.explains = sorted(explained_by_it, key=lambda n: (-explained_by_it[n], n))
        entry.path = _path(links, name, symptoms)
        reach = sum(explained_by_it.values())
        entry.graph_score = strength * (1.0 + reach)
        entry.mistimed = bool(anchors) and not _began_with(states[name], anchors, slack_s)
        entry.unobserved_callees = unobserved_callees(states[name], topology, unobserved)
        entry.client_gaps = client_gaps(entry, states, observed)
        client_gap_decide(entry, client_gap_waits(entry, entry.client_gaps, states))
    return sorted(suspects, key=lambda s: (*rank_key(s, states.get(s.service)), s.service))


def follows_earlier(state: ServiceState, other: ServiceState) -> bool:
    """Whether every shift of ``state``'s service began after ``other``'s first slowdown or
    failure by more than the two onsets can be misdated.

    Causal, for services whose calls are unknown: an effect does not precede its cause, and
    a service reaches the services that call it only through its answers (``PROPAGATING``:
    its latency and errors). A service whose every harmful shift (each series and log
    template, not only the strongest of each kind; resources included) began after another's
    first dated slowdown or failure (``_dates_a_start``) may be that one's effect, and the
    earlier one cannot be the later one's. Statistical: each onset may be a resolution off
    either way (``_dating``), so the order is known only past both together, and past any
    samples missing right before the later one (its change may lie that much earlier,
    ``_unseen``). It proves no call between them, so it orders and links nothing; the answer
    says the calls were unknown. No constant beyond the series' own resolutions."""
    leads = [
        (s.onset, s)
        for s in other.shifts
        if s.kind in PROPAGATING and s.onset is not None and _dates_a_start(s)
    ]
    mine = state.shifts
    if not leads or not mine:
        return False
    began, first = min(leads, key=lambda pair: pair[0])
    for symptom in mine:
        if symptom.onset is None:
            return False
        gap = (symptom.onset - began).total_seconds() - _unseen(symptom)
        if gap < _dating(symptom) + _dating(first):
            return False
    return True


def _dating(symptom: Symptom) -> float:
    """How far a symptom's onset may lie from where it is dated, either way: its series'
    resolution (the change lies between two samples, and under noise the change statistic
    may place it a sample early or late); a log line's first time to the second."""
    return symptom.signal.resolution_s if symptom.signal is not None else 1.0


def _dates_a_start(symptom: Symptom) -> bool:
    """Statistical: only a shift beyond its baseline's reach (``ONSET_MIN`` robust scales, as
    for ``Suspect.onset``) dates when another service's trouble began; a log line's first
    time does (it is a new template or a surge the log tool has tested)."""
    return symptom.signal is None or symptom.signal.anomaly >= ONSET_MIN


def without_calls(suspects: list[Suspect], states: dict[str, ServiceState]) -> list[Suspect]:
    """The ranking when no call between the services is known: the order of their own
    evidence (``analysis.suspects_rank``), unchanged; the candidates that began only after the
    leader's slowdown or failures (``follows_earlier``) are marked as possibly its effects.

    The order of onsets is not made a ranking rule: without calls, a service that began
    later than another need not depend on it (unrelated services shift too, and on coarse
    samples their shifts may be dated before the root's), so an onset is no evidence of a
    call. It only words the answer: what began after the leader may be its effect, and the
    calls that would settle it are unknown (CHANGELOG, session 11: what was tried)."""
    ranked = [s for s in suspects if s.score > 0 or s.graph_score > 0]
    leader = ranked[0] if ranked else None
    if leader is None or leader.service not in states or not states[leader.service].anomalous:
        return suspects
    for entry in ranked[1:]:
        state = states.get(entry.service)
        if state is not None and state.anomalous:
            if follows_earlier(state, states[leader.service]):
                entry.follows = [leader.service]
    return suspects


def unobserved_callees(state: ServiceState, topology: Topology, unobserved: set[str]) -> list[str]:
    """The callees of ``state``'s service that were looked at and showed no data at all, where its
    symptoms are of a kind a callee passes on (``INHERITS``: latency and errors; a service's
    own resource shift is its own, whoever it calls).

    Causal: a service's anomaly is its own only when its callees are seen not to account for
    it. A callee without any data cannot be seen either way, so the evidence does not settle
    whether the fault is in the service or past it, in that callee: an answer that names the
    service as the cause would go past what was observed. No constant: one such callee is
    enough, as one unseen path is enough to carry the fault.
    """
    if not any(INHERITS[kind] for kind in state.symptoms):
        return []
    return [callee for callee in topology.callees(state.service) if callee in unobserved]


def rank_key(entry: Suspect, state: ServiceState | None) -> tuple[float, ...]:
    """Most likely cause first: causes before effects, then strength, then evidence.

    Tiers, not factors: a service whose every symptom a callee accounts for is an effect,
    and one whose symptoms began at another time than the trouble asked about is another
    event; no strength makes either the cause of this one, so each ranks after every
    candidate that is neither (both: after those too). Within a tier the graph score
    (own strength times the callers explained) decides; equal scores go to the earlier
    onset (causes precede), then the stronger own shift, then the more services
    explained. Only then the name, so that the order is stable: leaders equal on all of
    that are a tie the answer reports (``leaders_tied``), not a ranking.
    """
    if state is None or not state.anomalous:
        return (3.0, 0.0, math.inf, -entry.score, 0.0)
    tier = float(bool(entry.inherited_from)) + float(entry.mistimed)
    onset = state.onset.timestamp() if state.onset is not None else math.inf
    return (tier, -round(entry.graph_score, 6), onset, -round(entry.score, 6), -len(entry.explains))


def _evidence(entry: Suspect) -> tuple[object, ...]:
    """What orders two candidates, the name left out."""
    tier = bool(entry.inherited_from) + entry.mistimed + bool(entry.follows)
    return (
        tier,
        round(entry.graph_score, 6),
        round(entry.score, 6),
        entry.onset,
        len(entry.explains),
    )


def leaders_tied(ranked: list[Suspect]) -> list[Suspect]:
    """The leading candidates no evidence orders (two or more), else none.

    Equal tier, scores, onset and reach: whichever came first came first by name, and a
    name is no evidence. The answer then says the root cause is undetermined between them.
    """
    if len(ranked) < 2:
        return []
    lead = _evidence(ranked[0])
    tied = [entry for entry in ranked if _evidence(entry) == lead]
    return tied if len(tied) > 1 else []
