"""Evidence gathering: which services and tools, in what order, within a call budget."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from diagnosis.evidence import vocab
from diagnosis.llm.base import ExecutorRequest, ToolRunner

from .analysis import (
    Call,
    Suspect,
    mentioned_services,
    sample_interval,
    step_seconds,
    suspects_rank,
)
from .common import time_parse
from .localise import Topology, client_call_edges, localise, log_call_edges, topology_build
from .planner import services_from_text, window_from_question
from .traces import trace_edges, trace_verdicts, traces_gather, traces_rerank

MAX_DRILL = 8  # services looked at one by one after the fleet view, whatever the fleet's size
MAX_NEIGHBOURS = 6  # callees and callers of the leading candidates per round: who explains whom
NEIGHBOUR_ROUNDS = 2
LEADING = 4
MAX_DISCOVERED = 3
RESOLUTIONS_S = (60, 120, 300, 600, 900)  # usual scrape and aggregation intervals
RESOURCE_FOLLOW_UPS = 3
KNOWLEDGE_K = 3
MAX_TOOL_CALLS = 38  # the whole first attempt, one lookup_knowledge included
# The fleet view on a metrics backend that still wants a service or a metric: every series
# that carries a service label (the same ranking, one query).
FLEET_SELECTOR = '{service=~".+"}'
# A service's series but its histograms' buckets, once the environment shows it has
# histograms (``_buckets_seen``).
NO_BUCKETS_SELECTOR = '{__name__!~".+_bucket"}'


@dataclass
class Evidence:
    calls: list[Call] = field(default_factory=list)
    queried: list[str] = field(default_factory=list)
    superseded: list[Call] = field(default_factory=list)  # failed calls a fallback answered
    logs_available: bool = True
    topology: Topology = field(default_factory=Topology)
    # call edges found other than declared or on metric labels (traces, say), caller first:
    # merged into the call graph with the declared ones
    extra_edges: list[tuple[str, str]] = field(default_factory=list)
    buckets: bool = False  # some answer showed a latency histogram's buckets

    def room(self, reserve: int = 1) -> bool:
        return len(self.calls) + reserve < MAX_TOOL_CALLS


def tool_call(tools: ToolRunner, evidence: Evidence, name: str, arguments: dict[str, Any]) -> Call:
    try:
        result = tools(name, dict(arguments))
    except Exception as exc:  # a tool runner must not take the Executor down with it
        result = {
            "invocation_id": None,
            "trace_ref": "",
            "tool_name": name,
            "status": "error",
            "output": "",
            "summary": {"error": type(exc).__name__},
        }
    call = Call.from_result(name, arguments, result)
    evidence.calls.append(call)
    return call


def _service_round(tools: ToolRunner, evidence: Evidence, service: str) -> None:
    if service in evidence.queried or not evidence.room(reserve=2):
        return
    evidence.queried.append(service)
    arguments = {"service": service}
    if evidence.buckets:
        arguments["metric"] = NO_BUCKETS_SELECTOR
    # a backend that refuses the selector is asked for the service alone
    _metrics_ask(tools, evidence, arguments, {"service": service})
    evidence.buckets = evidence.buckets or _buckets_seen(evidence.calls[-1:])
    if evidence.logs_available:
        # every level: ERROR, WARN, and the FATAL/PANIC/CRITICAL some systems log instead
        tool_call(tools, evidence, "query_logs", {"service": service})


def _fleet_view(tools: ToolRunner, evidence: Evidence) -> None:
    """The whole environment at once: the most anomalous series and log templates of all
    services (the tools rank across the fleet when no service is given)."""
    _metrics_ask(tools, evidence, {}, {"metric": FLEET_SELECTOR})
    evidence.buckets = _buckets_seen(evidence.calls)
    every = tool_call(tools, evidence, "query_logs", {})
    if not every.summary.get("templates"):
        # no log source, or nothing logged at all: no per-service log query can find more
        evidence.logs_available = False
        return
    tool_call(tools, evidence, "query_logs", {"level": "ERROR"})


def _metrics_ask(
    tools: ToolRunner, evidence: Evidence, arguments: dict[str, Any], fallback: dict[str, Any]
) -> None:
    """``query_metrics`` with ``arguments``; on an error, once more with ``fallback`` (a
    backend that wants other arguments), the failed call superseded if that one answers."""
    first = tool_call(tools, evidence, "query_metrics", arguments)
    if first.status == "error" and arguments != fallback:
        again = tool_call(tools, evidence, "query_metrics", fallback)
        if again.status != "error":
            evidence.superseded.append(first)


def _buckets_seen(calls: list[Call]) -> bool:
    """Whether the environment has latency histograms: some answer shows their buckets.

    A histogram's buckets count the same requests as its ``_count``, split by duration
    (``vocab.metric_kind``): one slowdown moves them all at once, and with the ``_sum`` and
    ``_count`` beside them they add the shape of the tail only. In an answer that shows a
    service's most anomalous series up to a cap, a dozen buckets take the places of its
    other families — its CPU, memory or errors, the evidence that tells a fault's kind
    and whether it is the service's own. A service is then asked for its series without
    them: one series per measure.
    """
    return any(
        isinstance(item, dict)
        and vocab.metric_kind(str(item.get("metric") or ""))[1] == vocab.HISTOGRAM_BUCKET
        for call in calls
        if call.tool_name == "query_metrics" and call.ok
        for item in call.summary.get("series") or []
    )


def _planned(request: ExecutorRequest) -> list[str]:
    known = {s.lower() for s in request.services}
    planned = [s for s in request.plan.get("services") or [] if isinstance(s, str) and s]
    # a name the environment lacks is asked about anyway: the answer says it found nothing
    return [s for s in planned if s.lower() in known or not known][:3] + [
        s for s in planned if known and s.lower() not in known
    ][:1]


def suspects_localise(
    request: ExecutorRequest, evidence: Evidence, planned: list[str]
) -> list[Suspect]:
    """Every service seen so far, ranked against its baseline and placed along the calls."""
    known = sorted({*request.services, *evidence.queried})
    ranked = suspects_rank(evidence.calls, known, focus=planned)
    # the calls the callers' own logs and client-side latency series record, beside the
    # declared and measured ones
    measured = log_call_edges(ranked, known) | client_call_edges(ranked, known)
    topology = Topology(edges=evidence.topology.edges | measured)
    localised = localise(
        ranked,
        topology,
        symptoms=planned,
        slack_s=_slack_seconds(evidence.calls),
        reported=_reported(request),
        looked_at=evidence.queried,
    )
    # what the spans say of who changed by its own doing (none without traces)
    edges = trace_edges(evidence.calls)
    return traces_rerank(localised, trace_verdicts(evidence.calls), edges)


def evidence_gather(request: ExecutorRequest, tools: ToolRunner) -> Evidence:
    """Fleet view first, then the leading suspects one by one: the cost does not grow
    with the number of services."""
    evidence = Evidence()
    traces_gather(request.has_traces, lambda name, args: tool_call(tools, evidence, name, args))
    _fleet_view(tools, evidence)
    planned = _planned(request)
    declared = [*request.call_edges, *evidence.extra_edges, *sorted(trace_edges(evidence.calls))]
    evidence.topology = topology_build(declared=declared, calls=evidence.calls)
    drill = _drill_list(planned, suspects_localise(request, evidence, planned))
    for service in drill:
        _service_round(tools, evidence, service)
    # Along the calls: what the leading candidates call. A candidate whose callees are
    # quiet keeps the blame; one whose callee moved too hands it on.
    if evidence.topology.known:
        _neighbour_rounds(request, tools, evidence, planned)
    # Services named in error logs that nobody listed (a dependency): look at them too.
    everyone = sorted({*request.services, *evidence.queried})
    for name in sorted(_discovered(evidence, everyone, drill))[:MAX_DISCOVERED]:
        _service_round(tools, evidence, name)
    # The leading suspects' resource metrics and changes.
    leading = [s for s in suspects_localise(request, evidence, planned) if s.score > 0]
    for entry in leading[:RESOURCE_FOLLOW_UPS]:
        _follow_up(tools, evidence, entry.service)
    if request.retry_context:
        _retry_queries(request, tools, evidence)
    return evidence


def _drill_list(planned: list[str], ranked: list[Suspect]) -> list[str]:
    """The planned services, then the preliminary suspects: at most MAX_DRILL."""
    preliminary = [s for s in ranked if s.score > 0 or s.graph_score > 0]
    for entry in sorted((s for s in ranked if _tail_unread(s)), key=_tail_strength):
        # where its buckets' shift would score, among the services that scored
        at = next((i for i, s in enumerate(preliminary) if s.score < -_tail_strength(entry)), None)
        preliminary.insert(len(preliminary) if at is None else at, entry)
    drill: list[str] = []
    for name in [*planned, *(s.service for s in preliminary)]:
        if name not in drill and len(drill) < MAX_DRILL:
            drill.append(name)
    return drill


def _tail_unread(entry: Suspect) -> bool:
    """Whether a latency histogram's buckets moved on this service while its latency was not
    read: the tail share needs the histogram's count (``analysis.histogram_tails``), which a
    fleet view that lists only the series that moved leaves out when the traffic held. Its
    own answer holds the count; until then, a slowdown there shows only as buckets."""
    return any(
        m.subkind == vocab.HISTOGRAM_BUCKET and m.abnormal for m in entry.metrics
    ) and not any(m.kind == "latency" for m in entry.metrics)


def _tail_strength(entry: Suspect) -> float:
    """Minus the points its buckets' shift would score as its first series (``analysis._score``:
    the robust score, capped at 30, over 3), for sorting."""
    moved = [m.anomaly for m in entry.metrics if m.subkind == vocab.HISTOGRAM_BUCKET and m.abnormal]
    return -min(max(moved, default=0.0), 30.0) / 3.0


def _neighbour_rounds(
    request: ExecutorRequest, tools: ToolRunner, evidence: Evidence, planned: list[str]
) -> None:
    """The callees and callers of the leading candidates: the more anomalous callers one
    explains, the likelier it is. Two rounds, so that a candidate the first round brought
    up is checked too."""
    for _ in range(NEIGHBOUR_ROUNDS):
        ranked = suspects_localise(request, evidence, planned)
        leading = [s for s in ranked if s.graph_score > 0][:LEADING]
        neighbours: list[str] = []
        for entry in leading:
            for callee in evidence.topology.callees(entry.service):
                if callee not in evidence.queried and callee not in neighbours:
                    neighbours.append(callee)
        for entry in leading:
            for caller in evidence.topology.callers(entry.service):
                if caller not in evidence.queried and caller not in neighbours:
                    neighbours.append(caller)
        if not neighbours:
            break
        for service in neighbours[:MAX_NEIGHBOURS]:
            _service_round(tools, evidence, service)


def _discovered(evidence: Evidence, everyone: list[str], drill: list[str]) -> list[str]:
    """Services the error logs name that were not queried yet, in the order they appear."""
    discovered: list[str] = []
    for call in evidence.calls:
        if call.tool_name != "query_logs" or not call.ok:
            continue
        for item in call.summary.get("templates") or []:
            if not isinstance(item, dict):
                continue
            text = " ".join([str(item.get("template") or ""), *map(str, item.get("samples") or [])])
            if vocab.looks_like_instruction(text):
                continue
            own = str(item.get("service") or call.arguments.get("service") or "")
            if own and own not in evidence.queried and own in drill:
                continue
            for name in mentioned_services(text, everyone, own):
                if name not in evidence.queried and name not in discovered:
                    discovered.append(name)
    return discovered


def _follow_up(tools: ToolRunner, evidence: Evidence, service: str) -> None:
    """A suspect's resource metrics, when its first answer was cut short, and what changed
    there: deploys, versions, configuration."""
    first = next(
        (
            c
            for c in evidence.calls
            if c.tool_name == "query_metrics" and c.arguments.get("service") == service and c.ok
        ),
        None,
    )
    omitted = first.summary.get("omitted") if first else None
    if isinstance(omitted, int) and omitted > 0:
        for selector in (vocab.RESOURCE_SELECTOR, vocab.LIMIT_SELECTOR):
            if evidence.room():
                tool_call(
                    tools, evidence, "query_metrics", {"service": service, "metric": selector}
                )
    if evidence.room():
        arguments = {"service": service, "metric": vocab.CHANGE_SELECTOR}
        tool_call(tools, evidence, "query_metrics", arguments)
    if evidence.logs_available and evidence.room():
        arguments = {"service": service, "query": vocab.CHANGE_LOG_QUERY}
        tool_call(tools, evidence, "query_logs", arguments)


def _reported(request: ExecutorRequest) -> datetime | None:
    """When the question (or the plan it led to) says the trouble began."""
    now = time_parse(request.now)
    if now is None:
        return None
    parsed = window_from_question(request.question, now)
    return parsed[2] if parsed is not None else None


def _slack_seconds(calls: list[Call]) -> float:
    """How finely this session's data dates an onset: the resolution of the data itself,
    at least the query step. A candidate whose symptoms began further than this from the
    trouble asked about is another event (``localise``); whether a callee explains its
    caller is judged per pair instead, on the two series' own resolutions.

    Samples every 5 minutes on a 60 s grid put (nearly) every change point on a 5-minute
    mark: the coarsest usual sampling interval that most change points fall on. Samples
    coarser than the grid date a change only to within one sample interval, and the grid
    moves it up to one more step: two series that changed together may show onsets that
    far apart (the typical series' interval, so a few sparse series do not widen it).

    Where most series' own sample interval is measured (``sample_interval``), that is the
    resolution, and where the change points happen to fall says nothing more: changes on
    5-minute samples land on a 10-minute mark one time in two, so with the few change
    points a noisy session keeps, 80 % of them on 10-minute marks is chance (four of five:
    about one session in five), and a slack of 10 minutes would make a candidate one
    sample off the trouble its contemporary. The marks decide only for series sampled at
    the grid, whose interval cannot be counted from repeated values.
    """
    steps: list[float] = []
    points: list[int] = []  # one per series: each series votes
    intervals: list[float] = []
    series = 0
    for call in calls:
        if not call.ok:
            continue
        step = step_seconds(call.summary)
        if step is not None:
            steps.append(step)
        for item in call.summary.get("series") or []:
            if not isinstance(item, dict):
                continue
            series += 1
            at = time_parse(item.get("change_point"))
            if at is not None:
                points.append(int(at.timestamp()))
            interval = sample_interval(step, item) if step is not None else None
            if interval is not None:
                intervals.append(interval)
    step = max([60.0, *steps])
    coarse = statistics.median(intervals) + step if len(intervals) * 2 > series else 0.0
    if coarse or len(set(points)) < 3:
        return max(step, coarse)
    # the coarsest common sampling interval that most change points fall on
    first = min(points)  # samples may sit at any offset: compare the points with each other
    fitting = [
        r
        for r in RESOLUTIONS_S
        if r >= step and sum((p - first) % r == 0 for p in points) >= 0.8 * len(points)
    ]
    return max(float(max(fitting, default=step)), coarse)


def _retry_queries(request: ExecutorRequest, tools: ToolRunner, evidence: Evidence) -> None:
    context = request.retry_context or {}
    wanted = [str(x) for x in context.get("missing_evidence") or [] if x]
    if context.get("instructions"):
        wanted.append(str(context["instructions"]))
    known = sorted({*evidence.queried, *request.services})
    done: set[str] = set()
    for text in wanted:
        lowered = text.lower()
        services = services_from_text(text, known) or evidence.queried[:2]
        wants_logs = any(w in lowered for w in ("log", "日志", "error", "错误", "模板"))
        wants_metrics = any(
            w in lowered
            for w in (
                "metric",
                "指标",
                "latency",
                "延迟",
                "cpu",
                "内存",
                "memory",
                "磁盘",
                "disk",
                "连接",
                "pool",
            )
        )
        wants_docs = any(w in lowered for w in ("runbook", "手册", "知识", "knowledge", "文档"))
        if not (wants_logs or wants_metrics or wants_docs):
            wants_logs = wants_metrics = True
        for service in services:
            if wants_logs and f"logs:{service}" not in done:
                done.add(f"logs:{service}")
                tool_call(tools, evidence, "query_logs", {"service": service})
            if (
                wants_metrics
                and f"metrics:{service}" not in done
                and service not in evidence.queried
            ):
                done.add(f"metrics:{service}")
                arguments: dict[str, Any] = {"service": service}
                if evidence.buckets:  # as in a service's first round (``_buckets_seen``)
                    arguments["metric"] = NO_BUCKETS_SELECTOR
                _metrics_ask(tools, evidence, arguments, {"service": service})
        if wants_docs and "docs" not in done:
            done.add("docs")
            tool_call(tools, evidence, "lookup_knowledge", {"query": text[:200], "k": KNOWLEDGE_K})
