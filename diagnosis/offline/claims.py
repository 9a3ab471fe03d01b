"""Facts to claims: each a sentence whose numbers occur in the excerpts it binds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from diagnosis.contracts import EvidenceBinding
from diagnosis.evidence import vocab

from .analysis import Call, LogSignal, MetricSignal, Suspect, root_cause_evidence
from .common import numbers_covered, time_parse
from .excerpts import (
    binding,
    fitting,
    from_zero,
    log_excerpts,
    one_day,
    ratio_text,
    time_in,
    usable,
    value_in,
)
from .localise import client_callee
from .texts import subkind_names, texts
from .wording import kind_alternative, kind_said, labels_text, list_join, log_message

CHANGE_CHARS = 160
MAX_CASCADE_EDGES = 3
LATEST = datetime.max.replace(tzinfo=UTC)


@dataclass
class Draft:
    claim_type: str
    text: str
    entity: str
    bindings: list[EvidenceBinding]
    support: str = "direct"
    kind: str | None = None  # root_cause_kind, for root-cause drafts
    alternative: str | None = None  # the kind the evidence cannot tell ``kind`` from


def _peak_before_onset(signal: MetricSignal) -> bool:
    peak, onset = time_parse(signal.window_max_at), time_parse(signal.change_point)
    return peak is not None and onset is not None and peak < onset


def _extreme_text(signal: MetricSignal, evidence: str, t: dict[str, str], short: bool) -> str:
    """The series' extreme as the line states it: the shift's own (from its onset on, the
    tool's ``shift_peak``) when the tool reports it; else the window's, and a window maximum
    from before the change says so (it is not the change's peak)."""
    down = signal.direction == "down"
    key = "low" if down else "peak"
    own = value_in(signal.shift_peak, evidence)
    window_extreme = signal.window_min if down else signal.window_max
    moved = signal.shift_peak != window_extreme or (
        not down and signal.shift_peak_at != signal.window_max_at
    )
    if own is not None and moved:
        at = time_in(signal.shift_peak_at, evidence, short)
        text = t[f"shift_{key}"].format(value=own)
        return text + (t["at"].format(value=at) if at else "")
    extreme = value_in(signal.window_min if down else signal.window_max, evidence)
    if extreme is None:
        return ""
    at = None if down else time_in(signal.window_max_at, evidence, short)
    if not at:
        return t[key].format(value=extreme)
    return t[key].format(value=extreme) + t[
        "at_before" if _peak_before_onset(signal) else "at"
    ].format(value=at)


def metric_claim(signal: MetricSignal, lang: str) -> Draft | None:
    if not signal.line or not usable(signal.line, signal.call):
        return None
    t = texts(lang)
    evidence = signal.line
    short = one_day(signal.call)
    down = signal.direction == "down"
    head_key = "metric_down" if down else "metric_up"
    if signal.direction not in {"up", "down"}:
        head_key = "metric_level"
    head = t[head_key].format(svc=signal.service, metric=signal.metric, labels=labels_text(signal))
    if not numbers_covered(head, evidence):
        head = t[head_key].format(svc=signal.service, metric=signal.metric, labels="")
        if not numbers_covered(head, evidence):
            return None
    qualifiers: list[str] = []
    if signal.at_limit:
        qualifiers.append(t["near_empty"] if vocab.is_free_metric(signal.metric) else t["at_limit"])
    zero_baseline = from_zero(signal, evidence)
    if zero_baseline:
        qualifiers.append(t["from_zero"])
    else:
        ratio = ratio_text(signal, evidence)
        if ratio is not None:
            # the tools' ratio is of the shifted level to the baseline median, when they
            # report those; of the means otherwise
            key = "ratio_level" if signal.window_level is not None else "ratio"
            qualifiers.append(t[key].format(value=ratio))
    details: list[str] = []
    median = None if zero_baseline else value_in(signal.baseline_median, evidence)
    base = None if zero_baseline or median else value_in(signal.baseline_mean, evidence)
    if median is not None:
        details.append(t["baseline_median"].format(value=median))
    elif base is not None:
        details.append(t["baseline"].format(value=base))
    peak = _extreme_text(signal, evidence, t, short)
    if peak:
        details.append(peak)
    since = time_in(signal.change_point, evidence, short)
    if since:
        details.append(t["since"].format(value=since))
    text = t["qualifier_sep"].join([head, *fitting(qualifiers, evidence)])
    details = fitting(details, evidence)
    if details:
        text += t["details_sep"] + t["detail_sep"].join(details)
    return Draft("symptom", text + t["end"], signal.service, [binding(signal.call, evidence)])


def log_claim(lg: LogSignal, lang: str) -> Draft | None:
    if lg.injected:
        return None
    excerpts = log_excerpts(lg)
    if not excerpts:
        return None
    t = texts(lang)
    evidence = "\n".join(excerpts)
    level = lg.level.upper() or "ERROR"
    template = log_message(lg)
    key = "log_new" if lg.is_new else "log_surge"
    head = t[key].format(svc=lg.service, level=level, template=template)
    if not numbers_covered(head, evidence):
        return None
    parts: list[str] = []
    count = value_in(lg.count_window, evidence)
    if count is not None:
        parts.append(t["count"].format(value=count))
    first = time_in(lg.first_seen, evidence, one_day(lg.call))
    if first:
        parts.append(t["first"].format(value=first))
    text = head + "".join(fitting(parts, evidence))
    bindings = [binding(lg.call, excerpt) for excerpt in excerpts]
    return Draft("symptom", text + t["end"], lg.service, bindings)


def root_claim(
    entry: Suspect, lang: str, victims: bool = True
) -> tuple[Draft, MetricSignal, LogSignal] | None:
    pair = root_cause_evidence(entry)
    if pair is None:
        return None
    metric, lg = pair
    own_excerpts = log_excerpts(lg)
    if not own_excerpts or lg.injected:
        return None
    t = texts(lang)
    sub = subkind_names(lang).get(entry.subkind or metric.subkind, subkind_names(lang)[""])
    evidence = "\n".join([metric.line, *own_excerpts])
    if metric.at_limit and vocab.is_free_metric(metric.metric):
        low = value_in(metric.window_min, metric.line)
        state = t["root_state_free"].format(value=low) if low else t["near_empty_state"]
    elif metric.at_limit:
        state = t["root_state_limit"]
    elif metric.direction == "down":
        state = t["root_state_down"]
    else:
        # one peak per series: the shift's own when the tool reports it (as metric_claim)
        peak = value_in(metric.shift_peak, metric.line) or value_in(metric.window_max, metric.line)
        state = t["root_state_peak"].format(value=peak) if peak else t["root_state_up"]
    text = t["root"].format(
        svc=entry.service, sub=sub, metric=metric.metric, state=state, template=log_message(lg)
    )
    if entry.blamed_by and victims:
        text += t["root_victims"].format(
            victims=list_join(entry.blamed_by, lang), svc=entry.service
        )
    if not numbers_covered(text, evidence):
        return None
    alternative = kind_alternative(entry)
    if alternative:
        text += kind_said(entry, lang)  # the conclusion says which two, and what would tell
    bindings = [binding(metric.call, metric.line)]
    if metric.at_limit and metric.limit_value is not None:
        for other in entry.metrics:
            if (
                other is not metric
                and vocab.is_limit_metric(other.metric)
                and other.subkind == metric.subkind
                and other.line
                and other.window_max == metric.limit_value
            ):
                bindings.append(binding(other.call, other.line))
                break
    bindings += [binding(lg.call, excerpt) for excerpt in own_excerpts]
    draft = Draft(
        "root_cause",
        text + t["end"],
        entry.service,
        bindings,
        kind=entry.root_kind,
        alternative=alternative,
    )
    return draft, metric, lg


def _change_excerpts(signal: MetricSignal | LogSignal) -> tuple[Call, list[str]]:
    if isinstance(signal, LogSignal):
        return signal.call, log_excerpts(signal)
    ok = bool(signal.line) and usable(signal.line, signal.call)
    return signal.call, [signal.line] if ok else []


def _change_text(signal: MetricSignal | LogSignal) -> str:
    if isinstance(signal, LogSignal):
        return log_message(signal, CHANGE_CHARS)
    return f"{signal.metric}{labels_text(signal)}"


def _change_when(signal: MetricSignal | LogSignal, excerpts: list[str], t: dict[str, str]) -> str:
    """The "at <time>" phrase for a log change whose excerpts show its first-seen time."""
    if not isinstance(signal, LogSignal):
        return ""
    when = time_in(signal.first_seen, "\n".join(excerpts), one_day(signal.call))
    return t["change_when"].format(value=when) if when else ""


def _inferred_root(
    entry: Suspect, text: str, bindings: list[EvidenceBinding], alternative: str | None = None
) -> Draft:
    """A root cause worded as an inference (its support indirect), with the entry's kind."""
    return Draft(
        "root_cause",
        text,
        entry.service,
        bindings,
        support="indirect",
        kind=entry.root_kind,
        alternative=alternative,
    )


def change_root_claim(entry: Suspect, lang: str) -> Draft | None:
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
    errors = [lg for lg in errors if log_excerpts(lg)]
    if not change_excerpts or not errors:
        return None
    error = errors[0]
    error_excerpts = log_excerpts(error)
    rate = next(
        (
            m
            for m in entry.abnormal_metrics
            if m.kind == "errors" and m.direction == "up" and m.line
        ),
        None,
    )
    t = texts(lang)
    evidence = "\n".join([*change_excerpts, *error_excerpts, *([rate.line] if rate else [])])
    text = t["change_root"].format(
        svc=entry.service,
        when=_change_when(change, change_excerpts, t),
        change=_change_text(change),
        error=log_message(error),
    )
    if rate is not None:
        text += t["change_rate"].format(metric=f"{rate.metric}{labels_text(rate)}")
    text += t["change_verdict"]
    if not numbers_covered(text, evidence):
        return None
    # the change's line and the sample its message is quoted from
    bindings = [binding(change_call, e) for e in change_excerpts]
    bindings += [binding(error.call, e) for e in error_excerpts]
    if rate is not None:
        bindings.append(binding(rate.call, rate.line))
    return _inferred_root(entry, text + t["end"], bindings)


def change_claim(entry: Suspect, lang: str) -> Draft | None:
    if not entry.changes:
        return None
    _, change = entry.changes[-1]
    call, excerpts = _change_excerpts(change)
    if not excerpts:
        return None
    t = texts(lang)
    text = t["change_seen"].format(
        svc=entry.service,
        when=_change_when(change, excerpts, t),
        change=_change_text(change),
    )
    if not numbers_covered(text, "\n".join(excerpts)):
        return None
    return Draft("timeline", text + t["end"], entry.service, [binding(call, excerpts[0])])


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
                        and log_excerpts(lg)
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


def cascade_claim(edges: list[tuple[Suspect, str, LogSignal]], lang: str) -> Draft | None:
    """Who failed calling whom, in one line; the logs that say so are its bindings."""
    t = texts(lang)
    parts: list[str] = []
    bindings: list[EvidenceBinding] = []
    for caller, target, lg in edges:
        text = " ".join([lg.template, *lg.samples]).lower()
        key = "cascade_timeout" if any(w in text for w in vocab.TIMEOUT_LOG) else "cascade_error"
        parts.append(t[key].format(src=caller.service, dst=target))
        bindings += [binding(lg.call, excerpt) for excerpt in log_excerpts(lg)]
    if not parts:
        return None
    text = t["cascade"].format(edges=t["cascade_sep"].join(parts))
    return Draft("impact", text + t["end"], edges[0][0].service, bindings)


def client_gap_claim(entry: Suspect, suspects: list[Suspect], lang: str) -> Draft | None:
    """The way between a caller and a flat callee as the cause, an inference bound to the
    caller's client-side series that rose and the callee's own latency series that did not
    (kinds.client_gap_decide: the network between them, or the caller's client pool)."""
    wait = entry.fault_evidence
    if entry.fault_kind != "network" or not isinstance(wait, MetricSignal):
        return None
    by_name = {s.service: s for s in suspects}
    names = {name.lower(): name for name in by_name}
    callee = client_callee(wait, names, entry.service)
    if callee not in entry.client_gaps or not wait.line or not usable(wait.line, wait.call):
        return None
    flat = sorted(
        (
            m
            for m in by_name[callee].metrics
            if m.kind == "latency" and not m.abnormal and m.line and usable(m.line, m.call)
        ),
        key=lambda m: (m.metric, m.line),
    )
    if not flat:
        return None
    t = texts(lang)
    text = t["client_gap"].format(
        svc=entry.service,
        callee=callee,
        wait=f"{wait.metric}{labels_text(wait)}",
        flat=f"{flat[0].metric}{labels_text(flat[0])}",
    )
    if not numbers_covered(text, "\n".join([wait.line, flat[0].line])):
        return None
    text += kind_said(entry, lang)
    bindings = [binding(wait.call, wait.line), binding(flat[0].call, flat[0].line)]
    return _inferred_root(entry, text + t["end"], bindings, alternative=kind_alternative(entry))
