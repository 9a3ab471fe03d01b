"""The fault kind of a root cause, from the evidence on that service itself.

A service is a root cause because its own series and log templates changed; what kind
of fault it is follows from *which* of them changed first and most, read by what each
series measures (its name's words and its declared unit), never by the service's name
or by the words of the question:

- CPU use or throttling → ``cpu``; memory, GC, OOM → ``memory``; disk, filesystem →
  ``disk``; network counters, retransmits, DNS, connection errors → ``network``; an
  exhausted pool, thread pool, file-descriptor table or queue → ``resource_exhaustion``.
- latency rising with no resource change on the service → ``latency``; error responses
  → ``errors``, or ``code`` where new exception templates point at the code.
- a deploy or a configuration change right before the onset → ``configuration`` (or
  ``code`` for a release followed by new exceptions).

The principle is causal order. An effect cannot precede its cause, so the family that
changed first (within the resolution of the data) is the mechanism; when several
changed together, a resource is the mechanism and latency or errors are what its
saturation does to requests (a saturated CPU or a full heap slows and fails requests;
slow requests do not raise CPU use of the service that serves them slowly). Among
families of the same tier that changed together, the larger shift leads — and when
the runner-up is about as large, the evidence cannot tell the two apart and the
verdict names both (``Ambiguity.TOGETHER``).

A verdict also names a second kind when the deciding family is what a fault of that kind
shows too and nothing observed tells which (``Ambiguity.SHARED``, ``SHARED_KINDS``): a
delay on the way to or from a service is only time added to its requests where no network
counter of its own is observed, and a code fault that logs no exception (an early return,
a wrong status) is only error responses. A verdict names at most two kinds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from diagnosis.evidence import families, vocab

from .analysis import RESOURCE_MIN, LogSignal, MetricSignal, Suspect, in_flight_load
from .capacity import cpu_saturated, metric_family, near_capacity

Signal = MetricSignal | LogSignal

RESOURCE_FAMILIES = ("cpu", "memory", "disk", "network", "resource_exhaustion")
_CONFIG_WORDS = ("config", "feature flag", "flag", "setting", "配置", "开关")
# A change counts as the trigger when it lies at most this long before the onset: the
# same lead the engine gives a change before new errors (analysis.CHANGE_LEAD_S).
CHANGE_LEAD_S = 20 * 60
# Two families of one tier whose shifts started together are told apart only when the
# leader's strength is more than this many times the runner-up's. The strength is a
# robust score (capped at 10) times 1 + log2 of the relative change, so a factor of 1.5
# is, at equal significance, the leader's relative change being about the square of the
# runner-up's (1 + log2(1 + r) grown by half) — less than that is within what the same
# fault shows on one service from one incident to the next.
DISTINCT_FACTOR = 1.5
# One family changed *first* only when its onset leads by more than this many resolutions
# of the data (one sample interval and one grid step each): the tools date a shift at the
# first of a run of points at least half their threshold away, so a date can sit a few
# noisy samples early (seen: four 1-minute samples before a clean step), and a lead
# shorter than that is no order.
LEAD_RESOLUTIONS = 3
# A log template that was absent from the baseline, or surged, is as significant as a
# series shift is ever scored (localise.SIGNIFICANCE_CAP): it did not happen before.
LOG_SIGNIFICANCE = 10.0


# The deciding family -> the other kind whose fault shows on the service as that family
# alone. Causal: a delay added between a service and its peers (a slow link, packet loss
# resent) moves no series of the service but its latency, unless it exports network
# counters (retransmits, drops, round-trip time, DNS failures) — a network series of its
# own that stayed flat rules the network out, a missing one cannot; a CPU, memory or disk
# fault moves that resource's own series, and a missing resource series is a gap the
# answer lists (``need_resource``), not a second kind. A code fault that fails requests
# without an exception leaves error responses only, and no series can rule it out; one
# that throws leaves its exception template, which decides ``code`` itself.
SHARED_KINDS = {"latency": "network", "errors": "code"}


class Ambiguity(StrEnum):
    """Why a verdict's evidence cannot tell its kind from its alternative."""

    TOGETHER = "together"  # two families of one tier began together at comparable strength
    SHARED = "shared"  # the deciding family is what a fault of the other kind shows too


@dataclass(frozen=True)
class KindEvidence:
    family: str
    strength: float
    onset: datetime | None
    signal: Signal


@dataclass(frozen=True)
class KindVerdict:
    """The kind, the evidence that decided it, and the one kind it cannot be told from
    (with that kind's own evidence where it has some: ``TOGETHER``; none for ``SHARED``,
    whose alternative is what the deciding evidence shows too) and why."""

    kind: str
    evidence: Signal | None = None
    alternative: str = ""
    alternative_evidence: Signal | None = None
    ambiguity: Ambiguity | None = None


def _harmful(signal: MetricSignal, family: str, metrics: list[MetricSignal]) -> bool:
    """A sustained shift of this family in the direction that hurts, large enough to be a
    change of state: for resources at their limit, half their level again (the engine's
    strong factor) or ten robust widths (RESOURCE_MIN); load drift is neither. CPU must
    also be near its capacity: below that, more CPU use is more work done, not a fault."""
    if not signal.abnormal or signal.window_mean is None:
        return False
    if family == "change":
        return True
    if family in {"cpu", "memory", "disk", "resource_exhaustion"}:
        if signal.kind == "restart":
            return True
        if vocab.is_limit_metric(signal.metric):
            return False  # a capacity, not a use of it
        if family == "cpu" and not cpu_saturated(signal, metrics):
            return False
        if family in {"memory", "disk"} and near_capacity(signal, family, metrics) is False:
            return False
        if in_flight_load(signal):
            return False
        return signal.bad_direction and (
            signal.at_limit or signal.strong or signal.anomaly >= RESOURCE_MIN
        )
    if family == "errors":
        return signal.direction == signal.harm_direction
    return signal.direction == "up"  # latency, and network failures, losses and delays


def log_family(lg: LogSignal) -> str:
    """What a log template reports (``families.template_family``)."""
    text = " ".join([lg.template, *lg.samples])
    return families.template_family(text, lg.kind, lg.subkind, bool(lg.mentions))


def kind_evidence(entry: Suspect, strength: Callable[[MetricSignal], float]) -> list[KindEvidence]:
    """Every own shift of the service that belongs to a family, with its strength and onset."""
    found: list[KindEvidence] = []
    for signal in entry.metrics:
        family = metric_family(signal)
        if family and _harmful(signal, family, entry.metrics):
            found.append(KindEvidence(family, strength(signal), signal.onset, signal))
    for lg in entry.logs:
        if lg.kind == "change" and lg.count_window > 0 and lg.is_new and not lg.injected:
            found.append(KindEvidence("change", LOG_SIGNIFICANCE, lg.onset, lg))
            continue
        if not (lg.abnormal and lg.severe) or lg.injected:
            continue
        family = log_family(lg)
        if family:
            surge = float(lg.count_window) if lg.is_new else max(lg.surge, 0.0)
            weight = LOG_SIGNIFICANCE * (1.0 + math.log2(1.0 + surge))
            found.append(KindEvidence(family, weight, lg.onset, lg))
    return found


def _tier(family: str) -> int:
    """Resources are the mechanism; exceptions point at code; latency and errors are what
    requests suffer, whatever caused it."""
    if family in RESOURCE_FAMILIES:
        return 0
    return 1 if family == "code" else 2


def _gap(later: datetime | None, earlier: datetime | None) -> float:
    if later is None or earlier is None:
        return 0.0
    return (later - earlier).total_seconds()


def _change_text(signal: Signal) -> str:
    if isinstance(signal, LogSignal):
        return " ".join([signal.template, *signal.samples]).lower()
    return f"{signal.metric} {' '.join(signal.labels.values())}".lower()


def _change_kind(changes: list[KindEvidence], items: list[KindEvidence]) -> str:
    """A release followed by new exceptions: the new code fails (``code``). Otherwise the
    change of settings is the cause (``configuration``), whatever it then broke."""
    release = any(not any(w in _change_text(c.signal) for w in _CONFIG_WORDS) for c in changes)
    return "code" if release and any(i.family == "code" for i in items) else "configuration"


def _triggers(
    changes: list[KindEvidence], onset: datetime | None, slack_s: float
) -> list[KindEvidence]:
    """The changes right before the onset (within CHANGE_LEAD_S), latest first."""
    fitting = [
        c
        for c in changes
        if onset is None
        or c.onset is None
        or -slack_s <= _gap(onset, c.onset) <= CHANGE_LEAD_S + slack_s
    ]
    return sorted(fitting, key=lambda c: _gap(onset, c.onset))


def kinds_decide(
    suspects: list[Suspect], *, strength: Callable[[MetricSignal], float], slack_s: float
) -> None:
    """Give every suspect the kind its own evidence shows (``Suspect.fault_kind``)."""
    for entry in suspects:
        verdict = kind_decide(entry, strength=strength, slack_s=slack_s)
        entry.fault_kind = verdict.kind
        entry.fault_evidence = verdict.evidence
        entry.fault_alternative = verdict.alternative
        entry.fault_alternative_evidence = verdict.alternative_evidence
        entry.fault_ambiguity = verdict.ambiguity.value if verdict.ambiguity else ""


def kind_decide(
    entry: Suspect, *, strength: Callable[[MetricSignal], float], slack_s: float
) -> KindVerdict:
    """The kind of fault ``entry`` shows, from the family that changed first and most.

    ``slack_s`` is the data's resolution (one sample interval and one grid step): onsets
    closer than LEAD_RESOLUTIONS of it are simultaneous. A resource at its limit is the
    failure's mechanism whatever triggered it; otherwise a change right before the onset
    is the trigger.
    """
    items = kind_evidence(entry, strength)
    changes = [i for i in items if i.family == "change"]
    shifts = [i for i in items if i.family != "change"]
    if not shifts:
        return KindVerdict("")
    onsets = [i.onset for i in shifts if i.onset is not None]
    exhausted = any(isinstance(i.signal, MetricSignal) and i.signal.at_limit for i in shifts)
    triggers = _triggers(changes, min(onsets) if onsets else None, slack_s)
    if triggers and not exhausted:
        kind = _change_kind(triggers, shifts)
        code = [i for i in shifts if i.family == "code"]
        shown = max(code, key=lambda i: i.strength) if kind == "code" else triggers[0]
        return KindVerdict(kind, shown.signal)
    # Each family dated by its clearest series (a change point is located the more
    # precisely the larger the shift is against the series' noise) or by its earliest log
    # template (a line is stamped when written: its first occurrence dates it exactly).
    strongest: dict[str, KindEvidence] = {}
    for item in sorted(shifts, key=lambda i: -i.strength):
        # of equally clear series, the earliest dates the family
        best = strongest.get(item.family)
        if best is None or (item.strength == best.strength and _gap(item.onset, best.onset) < 0):
            strongest[item.family] = item
    dated = {family: item.onset for family, item in strongest.items()}
    for item in shifts:
        when = dated[item.family]
        if isinstance(item.signal, LogSignal) and item.onset is not None:
            if when is None or item.onset < when:
                dated[item.family] = item.onset
    onsets = [when for when in dated.values() if when is not None]
    first = min(onsets) if onsets else None
    leading = [
        strongest[family]
        for family, when in dated.items()
        if _gap(when, first) <= LEAD_RESOLUTIONS * slack_s
    ]
    tier = min(_tier(i.family) for i in leading)
    contenders = {i.family: i for i in leading if _tier(i.family) == tier}
    ranked = sorted(contenders.values(), key=lambda i: (-i.strength, i.family))
    top = ranked[0]
    if len(ranked) > 1 and ranked[1].strength * DISTINCT_FACTOR >= top.strength:
        runner_up = ranked[1]
        return KindVerdict(
            top.family, top.signal, runner_up.family, runner_up.signal, Ambiguity.TOGETHER
        )
    shared = shared_kind(top.family, entry)
    if shared:
        return KindVerdict(top.family, top.signal, shared, None, Ambiguity.SHARED)
    return KindVerdict(top.family, top.signal)


def shared_kind(family: str, entry: Suspect) -> str:
    """The other kind whose fault shows on ``entry`` as ``family`` alone (``SHARED_KINDS``),
    unless a series of that kind's own family was observed there and did not show it (a
    network fault's template, had one been logged, would have decided the kind itself;
    "": none)."""
    other = SHARED_KINDS.get(family, "")
    if other == "network" and any(metric_family(m) == "network" for m in entry.metrics):
        return ""
    return other


def client_gap_decide(entry: Suspect, waits: list[MetricSignal]) -> None:
    """The kind of a caller whose client-side wait on an observed callee rose while that
    callee's own side stayed flat (``waits``: those client series; localise.client_gaps).

    Causal: the client's time is the callee's server time plus the way there and back and
    the client's wait for a pooled connection; with the callee flat, the added time is the
    way (``network``) or the pool (``resource_exhaustion``), and that one wait is all either
    leaves — both are named, the pool only while no pool series of the caller's own was
    observed to rule it out. Only where no resource of the caller's own decided its kind
    (it is latency, or nothing): a saturated CPU or a full pool there is its own mechanism.
    """
    if not waits or entry.fault_kind not in {"", "latency"}:
        return
    wait = max(waits, key=lambda s: (s.anomaly, s.metric))
    pooled = any(metric_family(m) == "resource_exhaustion" for m in entry.metrics)
    entry.fault_kind = "network"
    entry.fault_evidence = wait
    entry.fault_alternative = "" if pooled else "resource_exhaustion"
    entry.fault_alternative_evidence = None
    entry.fault_ambiguity = "" if pooled else Ambiguity.SHARED.value
