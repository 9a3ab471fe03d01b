"""Which facts matter: at most a few symptom claims, the most telling first, no repeats."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from diagnosis.evidence import vocab

from .analysis import LogSignal, MetricSignal, Suspect
from .claims import Draft, log_claim, metric_claim
from .wording import labels_text

MAX_SYMPTOMS = 6  # symptom claims: the ones that matter, not every series that moved
# How much a kind of signal tells an SRE about an incident (before its strength counts).
METRIC_WEIGHT = {"errors": 3.0, "latency": 3.0, "resource": 3.0, "restart": 3.0, "traffic": 1.5}
LOG_WEIGHT = {"resource": 3.5, "code": 3.0, "change": 2.5, "other": 2.5, "dependency": 2.5}
SAME_FAMILY_PENALTY = 3.0  # p50, p90 and _sum of one histogram tell one story
SAME_KIND_PENALTY = 1.5
SAME_LOG_KIND_PENALTY = 1.0
EARLY_BONUS = 1.0  # a signal that starts with the service's anomaly is closest to its cause
EARLY_S = 60
FILL_MIN = 2.0  # beyond each service's best fact, only facts at least this telling


def _family(metric: str) -> str:
    return re.sub(r"_(sum|count|bucket|total)$", "", metric)


def metric_relevance(signal: MetricSignal) -> float:
    weight = METRIC_WEIGHT.get(signal.kind, 1.0)
    if signal.kind == "resource" and not signal.bad_direction:
        weight = 1.0  # spare capacity growing is rarely the story
    if signal.kind in {"errors", "latency", "restart"} and signal.direction != "up":
        weight = 1.0  # fewer errors or faster answers are no symptom
    if signal.at_limit:
        weight += 1.0
    return weight + min(math.log10(signal.factor), 3.0) / 3.0


def log_relevance(lg: LogSignal) -> float:
    weight = LOG_WEIGHT.get(lg.kind, 2.0)
    if lg.level.upper() in vocab.ERROR_LEVELS:
        weight += 0.5
    return weight + min(math.log10(max(lg.count_window, 1)), 3.0) / 3.0


@dataclass
class Candidate:
    """A symptom claim that could be written, with what it repeats and how much it tells."""

    draft: Draft
    service: str
    relevance: float
    groups: tuple[tuple[str, ...], ...]
    lines: tuple[str, ...]


def metric_groups(signal: MetricSignal) -> tuple[tuple[str, ...], ...]:
    return (("family", _family(signal.metric)), ("kind", signal.kind, signal.subkind))


def log_groups(lg: LogSignal) -> tuple[tuple[str, ...], ...]:
    return (("log", lg.kind),)


def _penalty(groups: tuple[tuple[str, ...], ...], taken: dict[tuple[str, ...], int]) -> float:
    per_group = {"family": SAME_FAMILY_PENALTY, "kind": SAME_KIND_PENALTY}
    return sum(per_group.get(g[0], SAME_LOG_KIND_PENALTY) * taken.get(g, 0) for g in groups)


def _early(entry: Suspect, onset: datetime | None) -> float:
    start = entry.onset
    if start is None or onset is None:
        return 0.0
    return EARLY_BONUS if (onset - start).total_seconds() <= EARLY_S else 0.0


def _candidates_of(entry: Suspect, lang: str, used: set[str], suspect: bool) -> list[Candidate]:
    """The service's strong signals as claims: weak drifts are no symptom worth confirming.

    For the suspect itself, what started first is closest to the cause and counts more.
    """
    found: list[Candidate] = []
    seen: set[str] = set()
    metrics = [*entry.abnormal_metrics, *(m for m in entry.resource_metrics if not m.abnormal)]
    for signal in metrics:
        key = f"{signal.service}|{signal.metric}|{labels_text(signal)}"
        if not signal.strong or key in seen or key in used or signal.line in used:
            continue
        seen.add(key)
        draft = metric_claim(signal, lang)
        if draft:
            relevance = metric_relevance(signal) + (_early(entry, signal.onset) if suspect else 0.0)
            found.append(
                Candidate(
                    draft, entry.service, relevance, metric_groups(signal), (signal.line, key)
                )
            )
    for lg in entry.abnormal_logs:
        if lg.line and lg.line in used:
            continue
        draft = log_claim(lg, lang)
        if draft:
            relevance = log_relevance(lg) + (_early(entry, lg.onset) if suspect else 0.0)
            found.append(Candidate(draft, entry.service, relevance, log_groups(lg), (lg.line,)))
    return found


def symptoms_select(
    tiers: list[tuple[Suspect, int]], lang: str, used: set[str], seed: list[tuple[str, ...]]
) -> list[Draft]:
    """At most MAX_SYMPTOMS claims: each affected service's best, then the most telling rest.

    ``tiers`` lists the services worth describing, closest to the cause first; ``seed``
    names what the cause's own claims already say, so symptoms add to it, not repeat it.
    """
    pools: dict[str, list[Candidate]] = {}
    tier_of: dict[str, tuple[int, int]] = {}
    for rank, (entry, tier) in enumerate(tiers):
        pools[entry.service] = _candidates_of(entry, lang, used, suspect=tier == 0)
        tier_of[entry.service] = (tier, rank)
    caps = {name: 4 if tier_of[name][0] == 0 else 2 for name in pools}
    taken: dict[str, dict[tuple[str, ...], int]] = {name: {} for name in pools}
    for name in pools:
        for group in seed if tier_of[name][0] == 0 else []:
            taken[name][group] = taken[name].get(group, 0) + 1
    chosen: list[tuple[tuple[int, int], int, Candidate]] = []

    def best(name: str) -> Candidate | None:
        options = [c for c in pools[name] if not (set(c.lines) & used)]
        if not options:
            return None
        return max(options, key=lambda c: c.relevance - _penalty(c.groups, taken[name]))

    def take(candidate: Candidate) -> None:
        name = candidate.service
        chosen.append((tier_of[name], len(chosen), candidate))
        pools[name].remove(candidate)
        used.update(candidate.lines)
        for group in candidate.groups:
            taken[name][group] = taken[name].get(group, 0) + 1

    for name in pools:  # every affected service once, closest first
        if len(chosen) >= MAX_SYMPTOMS:
            break
        pick = best(name)
        if pick is not None:
            take(pick)
    while len(chosen) < MAX_SYMPTOMS:
        options = []
        for name in pools:
            if sum(1 for _, _, c in chosen if c.service == name) >= caps[name]:
                continue
            pick = best(name)
            if pick is not None:
                score = pick.relevance - _penalty(pick.groups, taken[name])
                if score >= FILL_MIN:
                    options.append((tier_of[name][0], -score, tier_of[name][1], pick))
        if not options:
            break
        take(min(options, key=lambda o: o[:3])[3])
    return [c.draft for _, _, c in sorted(chosen, key=lambda item: (item[0], item[1]))]
