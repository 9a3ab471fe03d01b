"""The family a series or a log template belongs to, and which families show a fault kind.

One rule for the engine and the checks: the offline engine reads a service's fault kind from
the family of the evidence that changed first and most on it (``offline.kinds``), and the
Gatekeeper accepts a stated kind only where a bound excerpt holds evidence of that family
(``kind_evidenced``). A family is read from a series' name and labels or a template's words
(``vocab``), never from a service's name or the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnosis.evidence import vocab

# What ran out, by the vocabulary's resource subkinds: a pool, threads, descriptors or a
# queue all have a fixed capacity that can be used up.
EXHAUSTIBLE = frozenset({"pool", "threads", "fd", "queue"})
_CONNECTION_WORDS = frozenset({"connection", "connections", "connect", "conn"})
# The words that make a network series a symptom: failures, losses and delays. Bytes and
# packets moved are load, not a fault, whichever way they go.
NETWORK_FAULT = re.compile(
    r"err|drop|retrans|fail|timeout|reset|refus|loss|lost|rtt|latency|duration|seconds|nxdomain"
)
_NETWORK_LOG = (
    "dns",
    "name resolution",
    "no such host",
    "nxdomain",
    "network is unreachable",
    "no route to host",
    "connection reset",
    "broken pipe",
    "packet loss",
    "tcp",
    "socket",
    "网络",
    "域名解析",
)
_GC_LOG = ("[gc", "gc pause", "pause full", "pause young", "full gc", "garbage collect")
# A template that reports its own slowness is a latency symptom, not an error.
_SLOW_LOG = ("slow", "took too long", "latency", "慢", "耗时")


def series_family(metric: str, labels: dict[str, str] | None = None) -> str:
    """What a series measures, by its name's words and labels: cpu, memory, disk, network,
    resource_exhaustion, errors, latency, change, or "" (traffic, versions, anything else).

    The words are the name's whatever its convention joins them by (``vocab.name_words``:
    ``_``, ``.``, ``-``, capitals), so ``jvm.gc.duration`` reads as ``jvm_gc_duration`` does.

    A network series counts only as a failure, loss or delay (``NETWORK_FAULT``): bytes and
    packets moved are load. An OOM kill is memory; a pool's connections are the pool's.
    """
    # matched on the words rejoined by ``_``, so that no fragment spans two camelCase words
    name = vocab.name_padded(metric)
    words = set(vocab.name_words(metric))
    kind, subkind = vocab.metric_kind(metric, labels)
    if kind == "change":
        return "change"
    if kind == "restart":
        return "memory" if subkind == "memory" else ""
    if kind == "resource" and subkind == "pool":
        return "resource_exhaustion"  # connections of a pool: what ran out is the pool
    if words & vocab.NETWORK_WORDS or (
        words & _CONNECTION_WORDS and re.search(r"err|fail|refus|reset|timeout", name)
    ):
        return "network" if NETWORK_FAULT.search(name) else ""
    if kind == "resource":
        if subkind in EXHAUSTIBLE:
            return "resource_exhaustion"
        return subkind if subkind in {"cpu", "memory", "disk"} else ""
    if kind == "errors":
        return "errors"
    if kind == "latency":
        return "latency"
    return ""


def template_family(text: str, kind: str, subkind: str, mentions: bool) -> str:
    """What a log template reports (``text``: the template and its samples; ``kind`` and
    ``subkind`` as ``vocab.log_kind`` reads it; ``mentions``: it names another service), in
    the families of the series; "" for a failed call to another service (evidence about
    that one, not this) and for nothing a family names."""
    lowered = (text or "").lower()
    if kind == "change":
        return "change"
    if kind == "resource":
        if subkind in EXHAUSTIBLE:
            return "resource_exhaustion"
        return subkind if subkind in {"cpu", "memory", "disk"} else "resource_exhaustion"
    if any(w in lowered for w in _GC_LOG):
        return "memory"  # the collector working hard is memory running short
    if any(w in lowered for w in _NETWORK_LOG) and not mentions:
        return "network"
    if kind == "dependency":
        return ""
    if kind == "code":
        return "code"
    return "latency" if any(w in lowered for w in _SLOW_LOG) else "errors"


# --- the evidence that shows a stated kind --------------------------------------------
# The families each root_cause_kind is read from (offline.kinds.kind_decide): a resource's
# own family; a release or setting change for ``configuration``; an exception template for
# ``code``. ``dependency`` (a failed call to a named callee) has no family of its own: its
# words decide (``vocab.kind_shown``).
KIND_FAMILIES = {
    "cpu": {"cpu"},
    "memory": {"memory"},
    "disk": {"disk"},
    "network": {"network"},
    "resource_exhaustion": {"resource_exhaustion"},
    "latency": {"latency"},
    "errors": {"errors"},
    "code": {"code"},
    "configuration": {"change"},
}
# In ``text_normalize``d tool output: a series statement ("<service> <metric>{labels}: up
# since …", or its trend line), a fleet view's top series ("top <metric> up anomaly score"),
# a log template ("<service> ERROR template \"…\": 12 in window"). Each runs to the next. A
# counter's identity ends " per-second rate" (query_metrics' ``SeriesFacts.identity``).
# Case-insensitive: the text may keep its capitals (``facts.text_normalize_cased``), which
# separate a name's words (``memUsedPercent``) as ``vocab.name_words`` reads them.
_SERIES = re.compile(
    r"(?:^|(?<=\s))(?:\S+ )?(?P<metric>[a-z_:][a-z0-9_:.]*)(?P<labels>\{[^{}]*\})?"
    r"(?: per-second rate)?(?:: (?P<rest>(?:new[^,]*, )?(?:up|down)\b|new\b)?| trend, )",
    re.IGNORECASE,
)
_FLEET_TOP = re.compile(
    r"top (?P<metric>[a-z_:][a-z0-9_:.]*)(?P<labels>\{[^{}]*\})? (?:up|down) anomaly score",
    re.IGNORECASE,
)
_TEMPLATE = re.compile(
    r'(?:^|(?<=\s))(?:(?P<service>\S+) (?:\S+ )?)?template "(?P<template>.*?)": \d+ in window',
    re.IGNORECASE,
)
_CAMEL_INSIDE = re.compile(r"[a-z0-9][A-Z]")
_LABEL = re.compile(r'([a-z_][a-z0-9_.]*)="((?:[^"\\]|\\.)*)"', re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    """One series or template statement of a tool output: where it runs (``start`` to the
    next statement) and the kinds it shows."""

    start: int
    end: int
    shows: frozenset[str]


def _labels(text: str | None) -> dict[str, str]:
    """A statement's labels, their names in lower case (as the vocabulary spells them)."""
    return {k.lower(): v for k, v in _LABEL.findall(text or "")}


def _series_shows(kind: str, metric: str, labels: dict[str, str]) -> bool:
    family = series_family(metric, labels)
    if family in KIND_FAMILIES[kind]:
        return True
    histogram, suffix = vocab.histogram_part(metric)
    if kind == "latency" and suffix == "_bucket":
        # a latency histogram's buckets are where its tail shows (analysis.histogram_tails)
        return series_family(histogram, labels) == "latency"
    # a caller's client-side wait on a peer: the time between the two ends of a call, where
    # the network is (offline.kinds.client_gap_decide reads it as network)
    peers = {k.replace(".", "_") for k in labels} & set(vocab.PEER_LABELS)
    return kind == "network" and family == "latency" and bool(peers)


def _series_kinds(metric: str, labels: str | None) -> frozenset[str]:
    parsed = _labels(labels)
    return frozenset(k for k in KIND_FAMILIES if _series_shows(k, metric, parsed))


def _template_kinds(template: str, own: str, services: tuple[str, ...]) -> frozenset[str]:
    lowered, own = template.lower(), own.lower()
    mentions = any(s and s != own and s in lowered for s in services)
    log_kind, subkind = vocab.log_kind(template, mentions)
    family = template_family(template, log_kind, subkind, mentions)
    return frozenset(k for k, shown in KIND_FAMILIES.items() if family in shown)


def statements_read(text: str, *, services: tuple[str, ...] = ()) -> list[Statement]:
    """The series and template statements of the normalised tool output ``text``, in order
    (``services``: the environment's normalised service names, so that a template naming
    another service than its own is read as a call to it). ``text`` is ``text_normalize``d,
    or ``text_normalize_cased`` (the same positions, its capitals kept: they separate the
    words of a name such as ``memUsedPercent``, as the engine reads it).

    A series shows its family's kinds only when it reports a shift (up, down, new): a
    series that held its baseline is evidence against its kind, and a trend line dates
    nothing. A word before a colon with neither an underscore, labels nor a capital inside
    it ("totals:") is no series name."""
    found: list[tuple[int, frozenset[str]]] = []
    for match in _SERIES.finditer(text):
        metric = match.group("metric")
        if "_" not in metric and not match.group("labels") and not _CAMEL_INSIDE.search(metric):
            continue
        shifted = bool(match.group("rest"))
        found.append(
            (match.start(), _series_kinds(metric, match["labels"]) if shifted else frozenset())
        )
    for match in _FLEET_TOP.finditer(text):
        found.append((match.start(), _series_kinds(match["metric"], match["labels"])))
    for match in _TEMPLATE.finditer(text):
        kinds = _template_kinds(match["template"], match["service"] or "", services)
        found.append((match.start(), kinds))
    found.sort(key=lambda pair: pair[0])
    ends = [start for start, _ in found[1:]] + [len(text)] * bool(found)
    return [Statement(start, end, kinds) for (start, kinds), end in zip(found, ends, strict=True)]


def kind_evidenced(
    kind: str | None, text: str, region: tuple[int, int], statements: list[Statement]
) -> bool:
    """Whether the ``region`` (start, end) of the normalised tool output ``text`` shows
    evidence of ``kind`` (``statements``: ``statements_read(text)``).

    Where the region touches series or template statements, those decide, read by the rule
    the engine reads kinds by (``series_family``, ``template_family``): a series of another
    family that merely shares a word with the kind ("_seconds" in a CPU counter,
    "connection" in a refused call) does not show it, nor does a series of the kind that
    held its baseline; quoting a statement's first words reads the whole statement. A
    region that touches none (a header, trace lines) is read by its words
    (``vocab.kind_shown``); the kind a statement names of itself is never evidence.
    """
    if kind not in KIND_FAMILIES:
        return vocab.kind_shown(kind, text[region[0] : region[1]])
    start, end = region
    touched = [s for s in statements if s.start < end and s.end > start]
    if touched:
        return any(kind in s.shows for s in touched)
    return vocab.kind_shown(kind, text[start:end])
