"""Offline Executor: gather evidence like a careful SRE, rank suspects, write executor_evidence_v2.

Every excerpt is a string the tool summary promises to be in the output, and is
checked against the output before it is used; every number a claim states is
checked to occur in its excerpts, or left out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from diagnosis.contracts import (
    Claim,
    EvidenceBinding,
    ExecutorEvidenceV2,
    Hypothesis,
    RecommendedAction,
)
from diagnosis.llm.base import ExecutorRequest, ToolRunner

from . import vocab
from .analysis import (
    STRONG_FACTOR,
    Call,
    LogSignal,
    MetricSignal,
    Suspect,
    mentioned_services,
    root_cause_evidence,
    suspects_rank,
)
from .common import lang_key, numbers_covered, time_parse
from .localise import Topology, localise, topology_build
from .planner import services_from_text, window_from_question
from .texts import KIND, SUBKIND, T

MAX_DRILL = 8  # services looked at one by one after the fleet view, whatever the fleet's size
MAX_NEIGHBOURS = 6  # callees and callers of the leading candidates per round: who explains whom
NEIGHBOUR_ROUNDS = 2
LEADING = 4
MAX_DISCOVERED = 3
RESOLUTIONS_S = (60, 120, 300, 600, 900)  # usual scrape and aggregation intervals
RESOURCE_FOLLOW_UPS = 3
MAX_TOOL_CALLS = 38  # the whole first attempt, one lookup_knowledge included
MAX_CLAIMS = 10
MAX_SYMPTOMS = 6  # symptom claims: the ones that matter, not every series that moved
MAX_HYPOTHESES = 5
MIN_EXCERPT = 20
KNOWLEDGE_K = 3
TEMPLATE_CHARS = 160  # a log message is quoted whole up to this, else cut at a word
BASIS_CHARS = 100
WORD_CUT_MIN = 0.6  # a word boundary is used when it keeps at least this share of the limit
CHANGE_CHARS = 160
MAX_CASCADE_EDGES = 3
# The fleet view on a metrics backend that still wants a service or a metric: every series
# that carries a service label (the same ranking, one query).
FLEET_SELECTOR = '{service=~".+"}'


@dataclass
class Evidence:
    calls: list[Call] = field(default_factory=list)
    queried: list[str] = field(default_factory=list)
    superseded: list[Call] = field(default_factory=list)  # failed calls a fallback answered
    logs_available: bool = True
    topology: Topology = field(default_factory=Topology)

    def room(self, reserve: int = 1) -> bool:
        return len(self.calls) + reserve < MAX_TOOL_CALLS


def _call(tools: ToolRunner, evidence: Evidence, name: str, arguments: dict[str, Any]) -> Call:
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
    _call(tools, evidence, "query_metrics", {"service": service})
    if evidence.logs_available:
        # every level: ERROR, WARN, and the FATAL/PANIC/CRITICAL some systems log instead
        _call(tools, evidence, "query_logs", {"service": service})


def _fleet_view(tools: ToolRunner, evidence: Evidence) -> None:
    """The whole environment at once: the most anomalous series and log templates of all
    services (the tools rank across the fleet when no service is given)."""
    first = _call(tools, evidence, "query_metrics", {})
    if first.status == "error":
        fallback = _call(tools, evidence, "query_metrics", {"metric": FLEET_SELECTOR})
        if fallback.status != "error":
            evidence.superseded.append(first)
    every = _call(tools, evidence, "query_logs", {})
    if not every.summary.get("templates"):
        # no log source, or nothing logged at all: no per-service log query can find more
        evidence.logs_available = False
        return
    _call(tools, evidence, "query_logs", {"level": "ERROR"})


def _planned(request: ExecutorRequest) -> list[str]:
    known = {s.lower() for s in request.services}
    planned = [s for s in request.plan.get("services") or [] if isinstance(s, str) and s]
    # a name the environment lacks is asked about anyway: the answer says it found nothing
    return [s for s in planned if s.lower() in known or not known][:3] + [
        s for s in planned if known and s.lower() not in known
    ][:1]


def evidence_gather(request: ExecutorRequest, tools: ToolRunner) -> Evidence:
    """Fleet view first, then the leading suspects one by one: the cost does not grow
    with the number of services."""
    evidence = Evidence()
    _fleet_view(tools, evidence)
    known = sorted({*request.services})
    planned = _planned(request)
    evidence.topology = topology_build(declared=request.call_edges, calls=evidence.calls)

    def ranked() -> list[Suspect]:
        found = suspects_rank(evidence.calls, sorted({*known, *evidence.queried}), focus=planned)
        return localise(
            found,
            evidence.topology,
            symptoms=planned,
            slack_s=_slack_seconds(evidence.calls),
            reported=_reported(request),
        )

    preliminary = [s for s in ranked() if s.score > 0 or s.graph_score > 0]
    drill: list[str] = []
    for name in [*planned, *(s.service for s in preliminary)]:
        if name not in drill and len(drill) < MAX_DRILL:
            drill.append(name)
    for service in drill:
        _service_round(tools, evidence, service)

    # Along the calls: what the leading candidates call. A candidate whose callees are
    # quiet keeps the blame; one whose callee moved too hands it on.
    if evidence.topology.known:
        # And what calls them: the more anomalous callers one explains, the likelier it is.
        # Two rounds, so that a candidate the first round brought up is checked too.
        for _ in range(NEIGHBOUR_ROUNDS):
            neighbours: list[str] = []
            leading = [s for s in ranked() if s.graph_score > 0][:LEADING]
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

    # Services named in error logs that nobody listed (a dependency): look at them too.
    everyone = sorted({*known, *evidence.queried})
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
    for name in sorted(discovered)[:MAX_DISCOVERED]:
        _service_round(tools, evidence, name)

    # The leading suspects' resource metrics, when their first answer was cut short.
    for entry in [s for s in ranked() if s.score > 0][:RESOURCE_FOLLOW_UPS]:
        first = next(
            (
                c
                for c in evidence.calls
                if c.tool_name == "query_metrics"
                and c.arguments.get("service") == entry.service
                and c.ok
            ),
            None,
        )
        omitted = first.summary.get("omitted") if first else None
        if isinstance(omitted, int) and omitted > 0:
            for selector in (vocab.RESOURCE_SELECTOR, vocab.LIMIT_SELECTOR):
                if evidence.room():
                    _call(
                        tools,
                        evidence,
                        "query_metrics",
                        {"service": entry.service, "metric": selector},
                    )
        # What changed there: deploys, versions, configuration.
        if evidence.room():
            _call(
                tools,
                evidence,
                "query_metrics",
                {"service": entry.service, "metric": vocab.CHANGE_SELECTOR},
            )
        if evidence.logs_available and evidence.room():
            _call(
                tools,
                evidence,
                "query_logs",
                {"service": entry.service, "query": vocab.CHANGE_LOG_QUERY},
            )

    if request.retry_context:
        _retry_queries(request, tools, evidence)
    return evidence


def _reported(request: ExecutorRequest) -> datetime | None:
    """When the question (or the plan it led to) says the trouble began."""
    now = time_parse(request.now)
    if now is None:
        return None
    parsed = window_from_question(request.question, now)
    return parsed[2] if parsed is not None else None


def _slack_seconds(calls: list[Call]) -> float:
    """How far apart a caller's and a callee's changes may start and still be one event:
    the resolution of the data itself, at least the query step.

    Samples every 5 minutes on a 60 s grid put (nearly) every change point on a 5-minute
    mark: the coarsest usual sampling interval that most change points fall on.
    """
    steps: list[float] = []
    points: list[int] = []  # one per series: each series votes
    for call in calls:
        if not call.ok:
            continue
        step = call.summary.get("step")
        if isinstance(step, str):
            match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", step.strip())
            if match:
                unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]
                steps.append(float(match.group(1)) * unit)
        for item in call.summary.get("series") or []:
            at = time_parse(item.get("change_point")) if isinstance(item, dict) else None
            if at is not None:
                points.append(int(at.timestamp()))
    step = max([60.0, *steps])
    if len(set(points)) < 3:
        return step
    # the coarsest common sampling interval that most change points fall on
    first = min(points)  # samples may sit at any offset: compare the points with each other
    fitting = [
        r
        for r in RESOLUTIONS_S
        if r >= step and sum((p - first) % r == 0 for p in points) >= 0.8 * len(points)
    ]
    return float(max(fitting, default=step))


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
                _call(tools, evidence, "query_logs", {"service": service})
            if (
                wants_metrics
                and f"metrics:{service}" not in done
                and service not in evidence.queried
            ):
                done.add(f"metrics:{service}")
                _call(tools, evidence, "query_metrics", {"service": service})
        if wants_docs and "docs" not in done:
            done.add("docs")
            _call(tools, evidence, "lookup_knowledge", {"query": text[:200], "k": KNOWLEDGE_K})


# --- knowledge ----------------------------------------------------------------


@dataclass
class Chunk:
    call: Call
    chunk_id: str
    title: str
    heading: str
    header: str


def _knowledge_query(top: Suspect | None, suspects: list[Suspect], plan: dict[str, Any]) -> str:
    words: list[str] = []
    if top is not None:
        if top.subkind:
            words += [SUBKIND["zh"][top.subkind], SUBKIND["en"][top.subkind]]
        for metric in top.abnormal_metrics[:2]:
            words.append(metric.metric)
        for lg in top.abnormal_logs[:2]:
            words.append(_short(lg.template, 60))
    for symptom in plan.get("symptoms") or []:
        if isinstance(symptom, str):
            words.append(symptom)
    if not words:
        words = [s.service for s in suspects[:2]] or ["incident"]
    query = " ".join(w for w in words if w)
    return query[:200]


def knowledge_lookup(tools: ToolRunner, evidence: Evidence, query: str) -> list[Chunk]:
    call = _call(tools, evidence, "lookup_knowledge", {"query": query, "k": KNOWLEDGE_K})
    return chunks_of(call)


def chunks_of(call: Call) -> list[Chunk]:
    if not call.ok:
        return []
    chunks = []
    for item in call.summary.get("chunks") or []:
        if not isinstance(item, dict):
            continue
        chunk_id = str(item.get("chunk_id") or "")
        title = str(item.get("document_title") or "")
        heading = str(item.get("heading") or "")
        if not chunk_id or vocab.looks_like_instruction(f"{title} {heading}"):
            continue
        header = f"{chunk_id} | {title}"
        if not call.contains(header):
            header = chunk_id if call.contains(chunk_id) and len(chunk_id) >= 8 else ""
        chunks.append(
            Chunk(call=call, chunk_id=chunk_id, title=title, heading=heading, header=header)
        )
    return chunks


# --- wording helpers ------------------------------------------------------------


def _short(text: str, limit: int = TEMPLATE_CHARS) -> str:
    """``text`` on one line, cut at a word boundary (never inside a number) when too long."""
    flat = re.sub(r"\s+", " ", text or "").strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * WORD_CUT_MIN:
        cut = cut[:space]
    else:
        number = "0123456789."
        while cut and cut[-1] in number and flat[len(cut)] in number:
            cut = cut[:-1]
    return cut.rstrip(" ,;:-—(=") + "…"


def _value_in(value: Any, evidence: str) -> str | None:
    """How ``value`` is written in ``evidence``, if it is written there at all."""
    if value is None or isinstance(value, bool):
        return None
    candidates: list[str] = []
    if isinstance(value, int | float):
        number = float(value)
        if number.is_integer():
            candidates.append(str(int(number)))
        candidates += [
            str(value),
            f"{number:g}",
            f"{number:.1f}",
            f"{number:.2f}",
            f"{number:.3f}",
            f"{number:.3g}",
            f"{number:.4g}",
        ]
    else:
        candidates.append(str(value))
    for text in candidates:
        if text and re.search(rf"(?<![\d.]){re.escape(text)}(?![\d])", evidence):
            return text
    return None


def _time_in(value: str, evidence: str, short: bool = False) -> str | None:
    """How the time ``value`` is written in ``evidence``; clock time only when ``short``."""
    if not value:
        return None
    parsed = time_parse(value)
    candidates = [value]
    if parsed is not None:
        candidates += [
            parsed.strftime("%Y-%m-%dT%H:%M:%SZ"),
            parsed.strftime("%Y-%m-%d %H:%M:%S"),
            parsed.strftime("%H:%M:%S"),
            parsed.strftime("%H:%M"),
        ]
        if short:
            clock = "%H:%M" if parsed.second == 0 and parsed.microsecond == 0 else "%H:%M:%S"
            candidates.insert(0, parsed.strftime(clock))
    for text in candidates:
        if text and text in evidence:
            return text
    return None


def _labels(signal: MetricSignal) -> str:
    extra = {k: v for k, v in sorted(signal.labels.items()) if k not in vocab.INSTANCE_LABELS}
    if not extra:
        return ""
    return "{" + ",".join(f"{k}={v}" for k, v in extra.items()) + "}"


def _binding(call: Call, excerpt: str) -> EvidenceBinding:
    return EvidenceBinding(
        source_type="tool_trace",
        source_id=call.trace_ref,
        tool_name=call.tool_name,
        source_invocation_ids=[call.invocation_id] if call.invocation_id is not None else [],
        evidence_excerpt=excerpt,
    )


def _usable(text: str, call: Call) -> bool:
    return len(text.strip()) >= MIN_EXCERPT and call.contains(text)


def _log_excerpts(lg: LogSignal) -> list[str]:
    excerpts = []
    if lg.line and _usable(lg.line, lg.call):
        excerpts.append(lg.line)
    for sample in lg.samples:
        if _usable(sample, lg.call) and not vocab.looks_like_instruction(sample):
            excerpts.append(sample)
            break
    return excerpts


# --- claims ---------------------------------------------------------------------------


@dataclass
class Draft:
    claim_type: str
    text: str
    entity: str
    bindings: list[EvidenceBinding]
    support: str = "direct"
    kind: str | None = None  # root_cause_kind, for root-cause drafts


def _one_day(call: Call) -> bool:
    """The call's window lies within one day, so a clock time names a moment unambiguously."""
    window = call.summary.get("window")
    if not isinstance(window, dict):
        return False
    start, end = time_parse(window.get("start")), time_parse(window.get("end"))
    return bool(start and end and start.date() == end.date())


def _fitting(parts: list[str], evidence: str) -> list[str]:
    """The parts whose numbers all occur in the evidence."""
    return [part for part in parts if part and numbers_covered(part, evidence)]


def _from_zero(signal: MetricSignal, evidence: str) -> bool:
    """The series was zero throughout the baseline and shows up in the window."""
    return (
        signal.direction == "up"
        and _value_in(signal.baseline_mean, evidence) == "0"
        and math.isinf(signal.factor)
    )


def _ratio_text(signal: MetricSignal, evidence: str) -> str | None:
    """The window/baseline ratio as the tool wrote it, for a real shift."""
    if signal.ratio is None or signal.factor < STRONG_FACTOR:
        return None
    return _value_in(signal.ratio, evidence)


def _metric_claim(signal: MetricSignal, lang: str) -> Draft | None:
    if not signal.line or not _usable(signal.line, signal.call):
        return None
    t = T[lang]
    evidence = signal.line
    short = _one_day(signal.call)
    down = signal.direction == "down"
    head_key = "metric_down" if down else "metric_up"
    if signal.direction not in {"up", "down"}:
        head_key = "metric_level"
    head = t[head_key].format(svc=signal.service, metric=signal.metric, labels=_labels(signal))
    if not numbers_covered(head, evidence):
        head = t[head_key].format(svc=signal.service, metric=signal.metric, labels="")
        if not numbers_covered(head, evidence):
            return None
    qualifiers: list[str] = []
    if signal.at_limit:
        qualifiers.append(t["near_empty"] if vocab.is_free_metric(signal.metric) else t["at_limit"])
    from_zero = _from_zero(signal, evidence)
    if from_zero:
        qualifiers.append(t["from_zero"])
    else:
        ratio = _ratio_text(signal, evidence)
        if ratio is not None:
            # the tools' ratio is of the shifted level to the baseline median, when they
            # report those; of the means otherwise
            key = "ratio_level" if signal.window_level is not None else "ratio"
            qualifiers.append(t[key].format(value=ratio))
    details: list[str] = []
    median = None if from_zero else _value_in(signal.baseline_median, evidence)
    base = None if from_zero or median else _value_in(signal.baseline_mean, evidence)
    if median is not None:
        details.append(t["baseline_median"].format(value=median))
    elif base is not None:
        details.append(t["baseline"].format(value=base))
    extreme = _value_in(signal.window_min if down else signal.window_max, evidence)
    if extreme is not None:
        peak = t["low" if down else "peak"].format(value=extreme)
        at = None if down else _time_in(signal.window_max_at, evidence, short)
        if at:
            peak += t["at"].format(value=at)
        details.append(peak)
    since = _time_in(signal.change_point, evidence, short)
    if since:
        details.append(t["since"].format(value=since))
    text = t["qualifier_sep"].join([head, *_fitting(qualifiers, evidence)])
    details = _fitting(details, evidence)
    if details:
        text += t["details_sep"] + t["detail_sep"].join(details)
    return Draft("symptom", text + t["end"], signal.service, [_binding(signal.call, evidence)])


def _message(lg: LogSignal, limit: int = TEMPLATE_CHARS) -> str:
    """The log message as logged (first sample, without time/service/level), else the template."""
    for sample in lg.samples:
        if vocab.looks_like_instruction(sample):
            continue
        for marker in (f" {lg.level} ", f" {lg.level.lower()} ", f"[{lg.level}]"):
            if lg.level and marker in sample:
                return _short(_untagged(sample.split(marker, 1)[1], lg.service), limit)
        if lg.service and f"{lg.service} " in sample:
            return _short(sample.split(f"{lg.service} ", 1)[1], limit)
        head, _, rest = sample.partition(" ")
        if rest and time_parse(head) is not None:  # a plain log line: drop its timestamp
            return _short(_untagged(rest, lg.service), limit)
    return _short(lg.template, limit)


def _untagged(message: str, service: str) -> str:
    """``message`` without a leading ``[pod-name]`` tag that only repeats the service."""
    match = re.match(r"\s*\[([^\]\s]+)\]\s+(\S.*)", message)
    if match and service and match.group(1).lower().startswith(service.lower()):
        return match.group(2)
    return message


def _log_claim(lg: LogSignal, lang: str) -> Draft | None:
    if lg.injected:
        return None
    excerpts = _log_excerpts(lg)
    if not excerpts:
        return None
    t = T[lang]
    evidence = "\n".join(excerpts)
    level = lg.level.upper() or "ERROR"
    template = _message(lg)
    key = "log_new" if lg.is_new else "log_surge"
    head = t[key].format(svc=lg.service, level=level, template=template)
    if not numbers_covered(head, evidence):
        return None
    parts: list[str] = []
    count = _value_in(lg.count_window, evidence)
    if count is not None:
        parts.append(t["count"].format(value=count))
    first = _time_in(lg.first_seen, evidence, _one_day(lg.call))
    if first:
        parts.append(t["first"].format(value=first))
    text = head + "".join(_fitting(parts, evidence))
    bindings = [_binding(lg.call, excerpt) for excerpt in excerpts]
    return Draft("symptom", text + t["end"], lg.service, bindings)


def _root_claim(
    entry: Suspect, lang: str, victims: bool = True
) -> tuple[Draft, MetricSignal, LogSignal] | None:
    pair = root_cause_evidence(entry)
    if pair is None:
        return None
    metric, lg = pair
    log_excerpts = _log_excerpts(lg)
    if not log_excerpts or lg.injected:
        return None
    t = T[lang]
    sub = SUBKIND[lang].get(entry.subkind or metric.subkind, SUBKIND[lang][""])
    evidence = "\n".join([metric.line, *log_excerpts])
    if metric.at_limit and vocab.is_free_metric(metric.metric):
        low = _value_in(metric.window_min, metric.line)
        state = t["root_state_free"].format(value=low) if low else t["near_empty_state"]
    elif metric.at_limit:
        state = t["root_state_limit"]
    elif metric.direction == "down":
        state = t["root_state_down"]
    else:
        peak = _value_in(metric.window_max, metric.line)
        state = t["root_state_peak"].format(value=peak) if peak else t["root_state_up"]
    text = t["root"].format(
        svc=entry.service, sub=sub, metric=metric.metric, state=state, template=_message(lg)
    )
    if entry.blamed_by and victims:
        text += t["root_victims"].format(victims=_join(entry.blamed_by, lang), svc=entry.service)
    if not numbers_covered(text, evidence):
        return None
    bindings = [_binding(metric.call, metric.line)]
    if metric.at_limit and metric.limit_value is not None:
        for other in entry.metrics:
            if (
                other is not metric
                and vocab.is_limit_metric(other.metric)
                and other.subkind == metric.subkind
                and other.line
                and other.window_max == metric.limit_value
            ):
                bindings.append(_binding(other.call, other.line))
                break
    bindings += [_binding(lg.call, excerpt) for excerpt in log_excerpts]
    draft = Draft("root_cause", text + t["end"], entry.service, bindings, kind=entry.root_kind)
    return draft, metric, lg


def _change_excerpts(signal: MetricSignal | LogSignal) -> tuple[Call, list[str]]:
    if isinstance(signal, LogSignal):
        return signal.call, _log_excerpts(signal)
    ok = bool(signal.line) and _usable(signal.line, signal.call)
    return signal.call, [signal.line] if ok else []


def _change_text(signal: MetricSignal | LogSignal) -> str:
    if isinstance(signal, LogSignal):
        return _message(signal, CHANGE_CHARS)
    return f"{signal.metric}{_labels(signal)}"


def _change_when(signal: MetricSignal | LogSignal, excerpts: list[str], t: dict[str, str]) -> str:
    """The "at <time>" phrase for a log change whose excerpts show its first-seen time."""
    if not isinstance(signal, LogSignal):
        return ""
    when = _time_in(signal.first_seen, "\n".join(excerpts), _one_day(signal.call))
    return t["change_when"].format(value=when) if when else ""


def _change_root_claim(entry: Suspect, lang: str) -> Draft | None:
    """A change right before a service's new errors: a cause worded as an inference."""
    found = entry.change_before_errors
    if found is None or entry.downstream_of:
        return None
    at, change = found
    change_call, change_excerpts = _change_excerpts(change)
    errors = [
        lg
        for lg in entry.abnormal_logs
        if lg.kind not in {"change", "dependency"}
        and (at is None or lg.onset is None or (lg.onset - at).total_seconds() >= -60)
    ]
    errors = [lg for lg in errors if _log_excerpts(lg)]
    if not change_excerpts or not errors:
        return None
    error = errors[0]
    error_excerpts = _log_excerpts(error)
    rate = next(
        (
            m
            for m in entry.abnormal_metrics
            if m.kind == "errors" and m.direction == "up" and m.line
        ),
        None,
    )
    t = T[lang]
    evidence = "\n".join([*change_excerpts, *error_excerpts, *([rate.line] if rate else [])])
    text = t["change_root"].format(
        svc=entry.service,
        when=_change_when(change, change_excerpts, t),
        change=_change_text(change),
        error=_message(error),
    )
    if rate is not None:
        text += t["change_rate"].format(metric=f"{rate.metric}{_labels(rate)}")
    text += t["change_verdict"]
    if not numbers_covered(text, evidence):
        return None
    bindings = [_binding(change_call, e) for e in change_excerpts[:1]]
    bindings += [_binding(error.call, e) for e in error_excerpts]
    if rate is not None:
        bindings.append(_binding(rate.call, rate.line))
    return Draft(
        "root_cause",
        text + t["end"],
        entry.service,
        bindings,
        support="indirect",
        kind=entry.root_kind,
    )


def _change_claim(entry: Suspect, lang: str) -> Draft | None:
    if not entry.changes:
        return None
    _, change = entry.changes[-1]
    call, excerpts = _change_excerpts(change)
    if not excerpts:
        return None
    t = T[lang]
    text = t["change_seen"].format(
        svc=entry.service,
        when=_change_when(change, excerpts, t),
        change=_change_text(change),
    )
    if not numbers_covered(text, "\n".join(excerpts)):
        return None
    return Draft("timeline", text + t["end"], entry.service, [_binding(call, excerpts[0])])


# --- which facts matter ------------------------------------------------------------------

# How much a kind of signal tells an SRE about an incident (before its strength counts).
METRIC_WEIGHT = {"errors": 3.0, "latency": 3.0, "resource": 3.0, "restart": 3.0, "traffic": 1.5}
LOG_WEIGHT = {"resource": 3.5, "code": 3.0, "change": 2.5, "other": 2.5, "dependency": 2.5}
SAME_FAMILY_PENALTY = 3.0  # p50, p90 and _sum of one histogram tell one story
SAME_KIND_PENALTY = 1.5
SAME_LOG_KIND_PENALTY = 1.0
EARLY_BONUS = 1.0  # a signal that starts with the service's anomaly is closest to its cause
EARLY_S = 60
FILL_MIN = 2.0  # beyond each service's best fact, only facts at least this telling
LATEST = datetime.max.replace(tzinfo=UTC)


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


def _metric_groups(signal: MetricSignal) -> tuple[tuple[str, ...], ...]:
    return (("family", _family(signal.metric)), ("kind", signal.kind, signal.subkind))


def _log_groups(lg: LogSignal) -> tuple[tuple[str, ...], ...]:
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
        key = f"{signal.service}|{signal.metric}|{_labels(signal)}"
        if not signal.strong or key in seen or key in used or signal.line in used:
            continue
        seen.add(key)
        draft = _metric_claim(signal, lang)
        if draft:
            found.append(
                Candidate(
                    draft,
                    entry.service,
                    metric_relevance(signal) + (_early(entry, signal.onset) if suspect else 0.0),
                    _metric_groups(signal),
                    (signal.line, key),
                )
            )
    for lg in entry.abnormal_logs:
        if lg.line and lg.line in used:
            continue
        draft = _log_claim(lg, lang)
        if draft:
            found.append(
                Candidate(
                    draft,
                    entry.service,
                    log_relevance(lg) + (_early(entry, lg.onset) if suspect else 0.0),
                    _log_groups(lg),
                    (lg.line,),
                )
            )
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


def cascade_edges(suspects: list[Suspect], start: str) -> list[tuple[Suspect, str, LogSignal]]:
    """Who failed calling whom, walking outward from ``start``, each with the log that says so."""
    by_name = {s.service: s for s in suspects}
    reached = {start}
    frontier = [start]
    edges: list[tuple[Suspect, str, LogSignal]] = []
    while frontier and len(edges) < MAX_CASCADE_EDGES:
        following: list[str] = []
        for target in frontier:
            callers = sorted(
                (s for s in by_name.values() if target in s.downstream_of),
                key=lambda s: (s.onset or LATEST, s.service),
            )
            for caller in callers:
                if caller.service in reached or len(edges) >= MAX_CASCADE_EDGES:
                    continue
                log = next(
                    (
                        lg
                        for lg in caller.abnormal_logs
                        if lg.kind == "dependency"
                        and target in lg.mentions
                        and not lg.injected
                        and _log_excerpts(lg)
                    ),
                    None,
                )
                if log is None:
                    continue
                edges.append((caller, target, log))
                reached.add(caller.service)
                following.append(caller.service)
        frontier = following
    return edges


def _cascade_claim(edges: list[tuple[Suspect, str, LogSignal]], lang: str) -> Draft | None:
    """Who failed calling whom, in one line; the logs that say so are its bindings."""
    t = T[lang]
    parts: list[str] = []
    bindings: list[EvidenceBinding] = []
    for caller, target, lg in edges:
        text = " ".join([lg.template, *lg.samples]).lower()
        key = "cascade_timeout" if any(w in text for w in vocab.TIMEOUT_LOG) else "cascade_error"
        parts.append(t[key].format(src=caller.service, dst=target))
        bindings += [_binding(lg.call, excerpt) for excerpt in _log_excerpts(lg)]
    if not parts:
        return None
    text = t["cascade"].format(edges=t["cascade_sep"].join(parts))
    return Draft("impact", text + t["end"], edges[0][0].service, bindings)


# --- hypotheses, actions, gaps ----------------------------------------------------------


def _join(items: list[str], lang: str) -> str:
    return ("、" if lang == "zh" else ", ").join(items)


def _metric_basis(signal: MetricSignal, lang: str) -> str:
    """How far a series moved, in words, with the ratio only as the tool itself wrote it."""
    t = T[lang]
    name = f"{signal.metric}{_labels(signal)}"
    evidence = signal.line or ""
    if evidence and _from_zero(signal, evidence):
        return t["basis_from_zero"].format(metric=name)
    if not signal.strong:
        return t["basis_slight"].format(metric=name)
    direction = {"up": "up", "down": "down"}.get(signal.direction, "level")
    ratio = _ratio_text(signal, evidence) if evidence else None
    if ratio is not None and direction != "level":
        form = "level" if signal.window_level is not None else "ratio"
        return t[f"basis_{direction}_{form}"].format(metric=name, ratio=ratio)
    return t[f"basis_{direction}"].format(metric=name)


def _basis(entry: Suspect, lang: str) -> str:
    t = T[lang]
    parts = []
    metrics = sorted(
        entry.abnormal_metrics, key=lambda m: (not m.strong, -metric_relevance(m), m.metric)
    )
    if metrics:
        parts.append(_metric_basis(metrics[0], lang))
    for m in entry.resource_metrics:
        if m.at_limit:
            key = "basis_free" if vocab.is_free_metric(m.metric) else "basis_limit"
            parts.append(t[key].format(metric=m.metric))
            break
    change = entry.change_before_errors
    if change is not None:
        parts.append(t["basis_change"])
    if entry.downstream_of:
        parts.append(t["basis_downstream"].format(services=_join(entry.downstream_of, lang)))
    if entry.inherited_from:
        parts.append(t["basis_inherited"].format(services=_join(entry.inherited_from, lang)))
    elif entry.graph_score > 0:
        parts.append(t["basis_localised"])
        if entry.explains:
            parts.append(t["basis_explains"].format(services=_join(entry.explains[:4], lang)))
    if entry.resource_logs:
        sub = SUBKIND[lang].get(entry.resource_logs[0].subkind, SUBKIND[lang][""])
        parts.append(t["basis_resource_log"].format(sub=sub))
    logs = [lg for lg in entry.abnormal_logs if lg.kind != "dependency"]
    if logs:
        quotable = [lg for lg in logs if not lg.injected and lg.samples]
        if quotable and not entry.resource_logs:
            message = _message(quotable[0], BASIS_CHARS)
            parts.append(t["basis_logs_quote"].format(n=len(logs), message=message))
        else:
            parts.append(t["basis_logs"].format(n=len(logs)))
    if entry.earliest and entry.onset is not None:
        parts.append(t["basis_early"].format(time=entry.onset.strftime("%H:%M:%S")))
    if entry.blamed_by:
        parts.append(t["basis_blamed"].format(services=_join(entry.blamed_by, lang)))
    if entry.victim:
        parts.append(t["basis_victim"])
    if not parts:
        parts.append(t["basis_none"])
    return ("；" if lang == "zh" else "; ").join(parts)


def _needed(entry: Suspect, lang: str) -> list[str]:
    t = T[lang]
    svc = entry.service
    needed = []
    if not entry.resource_metrics:
        needed.append(t["need_resource"].format(svc=svc))
    if not entry.abnormal_logs:
        needed.append(t["need_logs"].format(svc=svc))
    if entry.kind in {"change", "code"}:
        needed.append(t["need_change"].format(svc=svc))
    if entry.kind in {"latency", "dependency", "dependency_target"} or entry.blamed_by:
        needed.append(t["need_trace"].format(svc=svc))
    if not entry.metrics:
        needed.append(t["need_metrics"].format(svc=svc))
    return needed


def _dependency_targets(entry: Suspect) -> list[str]:
    targets: set[str] = set()
    for lg in entry.abnormal_logs:
        if lg.kind == "dependency":
            targets.update(lg.mentions)
    return sorted(targets)


def _secondary(entry: Suspect, root: str | None) -> bool:
    """The service only suffers from another one: downstream of it (by its logs or along the
    calls), or beside a found root."""
    own_cause = bool(entry.resource_metrics) or entry.kind in {"change", "code"}
    inherits = bool(entry.downstream_of or entry.inherited_from)
    return inherits or bool(root and entry.service != root and not own_cause)


def _hypothesis(entry: Suspect, lang: str, root: str | None) -> Hypothesis:
    t = T[lang]
    svc = entry.service
    sub = SUBKIND[lang].get(entry.subkind, SUBKIND[lang][""])
    if entry.downstream_of:
        text = t["hyp_secondary"].format(svc=svc, root=_join(entry.downstream_of, lang))
    elif entry.inherited_from:
        text = t["hyp_secondary"].format(svc=svc, root=_join(entry.inherited_from, lang))
    elif _secondary(entry, root):
        text = t["hyp_secondary"].format(svc=svc, root=root)
    elif entry.kind == "resource":
        text = t["hyp_resource"].format(svc=svc, sub=sub)
    elif entry.kind == "dependency":
        targets = _dependency_targets(entry)
        text = (
            t["hyp_dependency"].format(svc=svc, targets=_join(targets, lang))
            if targets
            else t["hyp_errors"].format(svc=svc)
        )
    elif entry.kind == "dependency_target":
        text = t["hyp_dependency_target"].format(svc=svc, blamers=_join(entry.blamed_by, lang))
    elif entry.kind in {"latency", "errors", "other"} and entry.symptom_kind in {
        "latency",
        "errors",
    }:
        text = t[f"hyp_{entry.symptom_kind}"].format(svc=svc)
    else:
        text = t.get(f"hyp_{entry.kind}", t["hyp_other"]).format(svc=svc)
    kind: str | None = None
    if not entry.inherited_from and not entry.downstream_of and not _secondary(entry, root):
        kind = entry.root_kind
        text += t["hyp_kind"].format(kind=KIND[lang].get(kind, kind))
        if len(entry.path) > 1:
            text += t["hyp_path"].format(path=t["path_sep"].join(entry.path))
    return Hypothesis(
        hypothesis_text=text,
        entity=svc,
        root_cause_kind=kind,
        basis=_basis(entry, lang),
        needed_evidence=_needed(entry, lang),
    )


def _action(entry: Suspect, lang: str, reason_key: str) -> RecommendedAction:
    t = T[lang]
    if entry.kind == "resource":
        key = (
            f"act_{entry.subkind}"
            if entry.subkind and f"act_{entry.subkind}" in t
            else "act_resource"
        )
    elif entry.kind == "dependency_target":
        key = "act_latency"
    else:
        key = f"act_{entry.kind}" if f"act_{entry.kind}" in t else "act_other"
    text = t[key].format(svc=entry.service, targets=_join(_dependency_targets(entry), lang))
    return RecommendedAction(action_text=text, reason=t[reason_key].format(svc=entry.service))


def _call_target(call: Call, lang: str) -> str:
    args = call.arguments
    if args.get("service"):
        return str(args["service"])
    if args.get("query"):
        return _short(str(args["query"]), 40)
    return T[lang]["all_services"]


# --- retry ------------------------------------------------------------------------------


def _flagged(retry_context: dict[str, Any] | None) -> set[str]:
    """Claim ids the Gatekeeper demoted or the Verifier flagged on the previous attempt.

    The engine is deterministic, so the same draft gets the same claim id again.
    """
    ids: set[str] = set()
    if not retry_context:
        return ids
    # The router's retry_context: Gatekeeper-demoted claims and Verifier-flagged ones.
    for key in ("demoted_claims", "flagged_claims"):
        items = retry_context.get(key) or []
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, dict) and item.get("claim_id"):
                ids.add(str(item["claim_id"]))
    return ids


# --- the whole Executor --------------------------------------------------------------


def evidence_write(
    request: ExecutorRequest, evidence: Evidence, suspects: list[Suspect], chunks: list[Chunk]
) -> ExecutorEvidenceV2:
    lang = lang_key(request.language)
    t = T[lang]
    flagged_ids = _flagged(request.retry_context)
    ranked = [s for s in suspects if s.score > 0 or s.graph_score > 0]
    top = ranked[0] if ranked else None

    focus = top.service if top is not None else None
    edges = cascade_edges(suspects, focus) if focus else []
    cascade = _cascade_claim(edges, lang) if edges else None

    drafts: list[Draft] = []
    used_lines: set[str] = set()
    seed: list[tuple[str, ...]] = []  # what the cause's own claims already say
    root_entity: str | None = None
    if top is not None and top.kind == "change":
        change_root = _change_root_claim(top, lang)
        if change_root is not None:
            drafts.append(change_root)
            root_entity = top.service
            used_lines.update(b.evidence_excerpt for b in change_root.bindings)
    if top is not None and root_entity is None:
        root = _root_claim(top, lang, victims=cascade is None)
        if root is not None:
            draft, metric, lg = root
            drafts.append(draft)
            root_entity = top.service
            used_lines.update(
                {metric.line, lg.line, f"{metric.service}|{metric.metric}|{_labels(metric)}"}
            )
            seed += [*_metric_groups(metric), *_log_groups(lg)]
    if top is not None and root_entity is None:
        change_draft = _change_claim(top, lang)
        if change_draft is not None:
            drafts.append(change_draft)
    if cascade is not None:
        drafts.append(cascade)
        used_lines.update(b.evidence_excerpt for b in cascade.bindings)
        used_lines.update(lg.line for _, _, lg in edges if lg.line)

    # The services worth describing: the suspect, the call chain, then other real anomalies.
    on_path = {caller.service for caller, _, _ in edges}
    tiers: list[tuple[Suspect, int]] = []
    for entry in ranked:
        if entry is top:
            tiers.append((entry, 0))
        elif entry.service in on_path or (focus and focus in entry.downstream_of):
            tiers.append((entry, 1))
        elif entry.notable:
            tiers.append((entry, 2))
    tiers.sort(key=lambda item: item[1])
    drafts += symptoms_select(tiers, lang, used_lines, seed)

    claims: list[Claim] = []
    for number, draft in enumerate(drafts[:MAX_CLAIMS], start=1):
        claim_id = f"claim-{number}"
        if claim_id in flagged_ids:
            continue
        claims.append(
            Claim(
                claim_id=claim_id,
                claim_type=draft.claim_type,
                claim_text=draft.text,
                entity=draft.entity,
                support_level=draft.support,
                evidence_bindings=draft.bindings,
                root_cause_kind=draft.kind if draft.claim_type == "root_cause" else None,
            )
        )

    notable = [e for e, _ in tiers]
    weak = [e.service for e in ranked if e not in notable]
    hypotheses: list[Hypothesis] = []
    for entry in notable:
        if entry.service == root_entity:
            continue
        if len(hypotheses) >= MAX_HYPOTHESES:
            break
        hypotheses.append(_hypothesis(entry, lang, root_entity))
    focus_service = root_entity or (top.service if top else None)
    titles: set[str] = set()
    if focus_service:
        for chunk in chunks[:3]:
            if (chunk.title or chunk.chunk_id) in titles or len(titles) >= 2:
                continue
            titles.add(chunk.title or chunk.chunk_id)
            hypotheses.append(
                Hypothesis(
                    hypothesis_text=t["hyp_runbook"].format(
                        title=chunk.title or chunk.chunk_id, svc=focus_service
                    ),
                    entity=focus_service,
                    basis=t["basis_runbook"].format(heading=chunk.heading or chunk.title),
                    needed_evidence=[],
                )
            )

    actions: list[RecommendedAction] = []
    if top is not None:
        actions.append(_action(top, lang, "reason_root" if root_entity else "reason_hyp"))
    for entry in notable[1:3]:
        # A service that only suffers from another needs no investigation of its own.
        if not entry.victim and not _secondary(entry, root_entity):
            actions.append(_action(entry, lang, "reason_hyp"))
    for chunk in chunks[:1]:
        actions.append(
            RecommendedAction(
                action_text=t["act_runbook"].format(title=chunk.title or chunk.chunk_id),
                reason=t["reason_runbook"],
                evidence_bindings=[
                    EvidenceBinding(
                        source_type="lookup_evidence_block",
                        source_id=chunk.chunk_id,
                        tool_name="lookup_knowledge",
                        source_invocation_ids=[chunk.call.invocation_id]
                        if chunk.call.invocation_id is not None
                        else [],
                        evidence_excerpt=chunk.header,
                    )
                ]
                if chunk.header
                else [],
            )
        )

    missing: list[str] = []
    for call in evidence.calls:
        if call in evidence.superseded:
            continue
        # no_data is an answer (nothing logged at that level), not a gap
        if call.status in {"error", "timeout"} or not call.trace_ref:
            missing.append(
                t["miss_call"].format(
                    tool=call.tool_name, target=_call_target(call, lang), status=call.status
                )
            )
    with_data = {s.service for s in suspects if s.has_data}
    for service in evidence.queried:
        if service not in with_data:
            missing.append(t["miss_nodata"].format(svc=service))
    if not ranked:
        missing.append(t["miss_no_anomaly"])
    elif root_entity is None:
        missing.append(t["miss_no_root"])
    if weak and (top is None or not top.notable):
        # Only small drifts anywhere: say what was seen, in one line.
        missing.append(t["miss_weak"].format(services=_join(weak, lang)))
    if not chunks:
        missing.append(t["miss_knowledge"])

    return ExecutorEvidenceV2(
        claims=claims,
        hypotheses=hypotheses,
        recommended_actions=actions,
        missing_info=list(dict.fromkeys(missing)),
    )


def execute_run(request: ExecutorRequest, tools: ToolRunner) -> tuple[ExecutorEvidenceV2, Evidence]:
    evidence = evidence_gather(request, tools)
    known = sorted({*request.services, *evidence.queried})
    planned = [s for s in request.plan.get("services") or [] if isinstance(s, str)]
    suspects = localise(
        suspects_rank(evidence.calls, known, focus=planned),
        evidence.topology,
        symptoms=planned,
        slack_s=_slack_seconds(evidence.calls),
        reported=_reported(request),
    )
    ranked = [s for s in suspects if s.score > 0 or s.graph_score > 0]
    query = _knowledge_query(ranked[0] if ranked else None, ranked, request.plan)
    chunks = knowledge_lookup(tools, evidence, query)
    for call in evidence.calls:  # a retry may have asked for runbooks too
        if call.tool_name == "lookup_knowledge" and call is not chunks_call(chunks):
            for chunk in chunks_of(call):
                if chunk.chunk_id not in {c.chunk_id for c in chunks}:
                    chunks.append(chunk)
    output = evidence_write(request, evidence, suspects, chunks)
    return output, evidence


def chunks_call(chunks: list[Chunk]) -> Call | None:
    return chunks[0].call if chunks else None
