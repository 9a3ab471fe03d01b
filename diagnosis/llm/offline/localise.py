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
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from . import vocab
from .analysis import Call, MetricSignal, Suspect, metric_signals

# Each kind of own symptom, and the callee kinds that can pass it up to a caller.
INHERITS = {
    "latency": {"latency", "resource"},
    "errors": {"errors", "latency", "resource"},
    "resource": set(),  # a service's own saturation is its own, whoever it calls
}
SYMPTOM_KINDS = ("latency", "errors", "resource")
EXPLAINED_FACTOR = 0.25  # what is left of an inheriting caller's score
MAX_PATH = 6


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


def harmful(signal: MetricSignal) -> bool:
    """An abnormal shift in the direction that hurts: slower, more errors, less health."""
    if not signal.abnormal or _num(signal.window_mean) is None:
        return False  # a series that stopped reporting is a gap, not a symptom
    if signal.kind == "errors":
        return signal.direction == ("down" if signal.subkind == "health" else "up")
    if signal.kind == "latency":
        return signal.direction == "up"
    if signal.kind in {"resource", "restart"}:
        return signal.bad_direction or signal.kind == "restart"
    return False


@dataclass
class Symptom:
    kind: str
    strength: float
    onset: datetime | None
    signal: MetricSignal


@dataclass
class ServiceState:
    service: str
    symptoms: dict[str, Symptom] = field(default_factory=dict)
    all_latency: list[Symptom] = field(default_factory=list)

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


SIGNIFICANCE_CAP = 10.0  # beyond this robust score a shift is simply significant
CHANGE_CAP = 1000.0


def _num(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def relative_change(signal: MetricSignal) -> float:
    """How far the window went from the baseline, relative to it, in the harmful direction.

    A health series (availability, success rate) is read as its complement, the failure
    rate, so 100 → 98 % is "from no failures to 2 %", not a 2 % dip.
    """
    base = _num(signal.baseline_mean)
    if base is None:
        return 0.0
    if signal.kind == "errors" and signal.subkind == "health":
        low = _num(signal.window_min)
        if low is None:
            return 0.0
        cap = 100.0 if base > 1.0 else 1.0
        base_fail, peak_fail = max(cap - base, 0.0), max(cap - low, 0.0)
        if peak_fail <= base_fail:
            return 0.0
        return min((peak_fail - base_fail) / max(base_fail, cap * 1e-3), CHANGE_CAP)
    if signal.direction == "down":
        low = _num(signal.window_min)
        if low is None or base <= 0:
            return 0.0
        return min((base - low) / max(low, base * 1e-3), CHANGE_CAP)
    peak = _num(signal.window_max)
    if peak is None:
        return 0.0
    return min(max(peak - base, 0.0) / max(abs(base), 1e-9), CHANGE_CAP)


def _strength(signal: MetricSignal) -> float:
    """Significance (the tool's robust score, capped) times effect size (log of the change)."""
    significance = min(signal.anomaly, SIGNIFICANCE_CAP)
    return significance * (1.0 + math.log2(1.0 + relative_change(signal)))


def service_states(suspects: list[Suspect]) -> dict[str, ServiceState]:
    states: dict[str, ServiceState] = {}
    for entry in suspects:
        state = ServiceState(entry.service)
        for signal in entry.metrics:
            if not harmful(signal):
                continue
            kind = "resource" if signal.kind == "restart" else signal.kind
            found = Symptom(kind, _strength(signal), signal.onset, signal)
            if kind == "latency":
                state.all_latency.append(found)
            current = state.symptoms.get(kind)
            if current is None or found.strength > current.strength:
                state.symptoms[kind] = found
        for lg in entry.abnormal_logs:
            if lg.kind == "dependency" or lg.injected:
                continue
            kind = "resource" if lg.kind == "resource" else "errors"
            if kind not in state.symptoms:
                state.symptoms[kind] = Symptom(kind, 3.0, lg.onset, None)  # type: ignore[arg-type]
        states[entry.service] = state
    return states


ACCOUNTS_FOR = 0.5  # a callee must carry at least this share of its caller's shift


def _delta(signal: MetricSignal | None) -> float | None:
    """The absolute shift of a latency series, in its own unit (seconds add up along calls)."""
    if signal is None:
        return None
    base, peak = _num(signal.baseline_mean), _num(signal.window_max)
    return None if base is None or peak is None else peak - base


def _same_measure(a: MetricSignal, b: MetricSignal) -> bool:
    def shape(signal: MetricSignal) -> tuple[str, tuple[tuple[str, str], ...]]:
        labels = {k: v for k, v in signal.labels.items() if k not in vocab.INSTANCE_LABELS}
        return signal.metric, tuple(sorted(labels.items()))

    return shape(a) == shape(b)


def _accounts_for(callee: Symptom, caller: Symptom, callee_state: ServiceState) -> bool:
    """The callee's shift is big enough to be the caller's: latency adds up along a call,
    so the callee's added seconds must be a good share of the caller's (same measure when
    both have it); an error shift must be comparably strong."""
    if caller.kind == "latency" and callee.kind == "latency":
        mine = caller.signal
        theirs = callee.signal
        if mine is not None:
            same = [
                sym.signal
                for sym in callee_state.all_latency
                if sym.signal is not None and _same_measure(sym.signal, mine)
            ]
            theirs = same[0] if same else theirs
        wanted, got = _delta(mine), _delta(theirs)
        if wanted is not None and got is not None and wanted > 0:
            return got >= ACCOUNTS_FOR * wanted
        return True
    return callee.strength >= ACCOUNTS_FOR * caller.strength


def _explains(callee: ServiceState, caller: ServiceState, kind: str, slack_s: float) -> bool:
    """The callee's anomaly can account for the caller's ``kind`` symptom: a compatible
    kind, started together (within the data's resolution), and big enough."""
    wanted = INHERITS.get(kind, set())
    mine = caller.symptoms[kind]
    for other_kind, symptom in callee.symptoms.items():
        if other_kind not in wanted:
            continue
        aligned = (
            mine.onset is None
            or symptom.onset is None
            or abs((symptom.onset - mine.onset).total_seconds()) <= slack_s
        )
        if aligned and _accounts_for(symptom, mine, callee):
            return True
    return False


def _callers_through(links: set[tuple[str, str]], service: str) -> list[str]:
    return sorted(a for a, b in links if b == service)


def _ancestors(links: set[tuple[str, str]], start: str) -> list[str]:
    """Services whose anomaly ``start`` explains: its inheriting callers, transitively."""
    seen = {start}
    order: list[str] = []
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for caller in _callers_through(links, current):
            if caller not in seen:
                seen.add(caller)
                order.append(caller)
                queue.append(caller)
    return order


def _path(links: set[tuple[str, str]], root: str, symptoms: list[str]) -> list[str]:
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


def localise(
    suspects: list[Suspect],
    topology: Topology,
    *,
    symptoms: list[str],
    slack_s: float,
) -> list[Suspect]:
    """Re-rank ``suspects`` along the call graph; returns them most-likely cause first.

    ``slack_s`` is how far apart a caller's and a callee's onsets may lie for one to
    explain the other (the data's own resolution: one sample step).
    """
    if not topology.known:
        return suspects
    states = service_states(suspects)
    by_name = {s.service: s for s in suspects}
    anomalous = {name for name, state in states.items() if state.anomalous}
    links: set[tuple[str, str]] = set()  # (caller, callee): the callee explains the caller
    for name in sorted(anomalous):
        state = states[name]
        explained: set[str] = set()
        for callee in topology.callees(name):
            other = states.get(callee)
            if other is None or not other.anomalous:
                continue
            kinds = [k for k in state.symptoms if _explains(other, state, k, slack_s)]
            if kinds:
                links.add((name, callee))
                explained.update(kinds)
        if explained and explained >= set(state.symptoms):
            by_name[name].inherited_from = sorted(c for a, c in links if a == name)
    for name in anomalous:
        entry = by_name[name]
        strength = states[name].strength + entry.score
        if entry.inherited_from:
            entry.graph_score = strength * EXPLAINED_FACTOR
            entry.kind, entry.subkind = "dependency", ""
            continue
        entry.explains = _ancestors(links, name)
        entry.path = _path(links, name, symptoms)
        entry.graph_score = strength * (1.0 + len(entry.explains))
        if any(s in entry.explains for s in symptoms):
            entry.graph_score *= 2.0  # it explains what the question is about
    return sorted(
        suspects,
        key=lambda s: (
            -(s.graph_score if s.service in anomalous else 0.0),
            -round(s.score, 6),
            s.service,
        ),
    )
