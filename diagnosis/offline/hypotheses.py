"""Hypotheses and recommended actions for the suspects, each with its basis in words."""

from __future__ import annotations

from diagnosis.contracts import EvidenceBinding, Hypothesis, RecommendedAction
from diagnosis.evidence import vocab

from .analysis import LogSignal, MetricSignal, Suspect, instances_shifted
from .excerpts import from_zero, ratio_text
from .kinds import Ambiguity, metric_family
from .knowledge import Chunk
from .symptoms import metric_relevance
from .texts import kind_names, subkind_names, texts
from .wording import kind_alternative, kind_said, labels_text, list_join, log_message

BASIS_CHARS = 100
MAX_HYPOTHESES = 5


def _metric_basis(signal: MetricSignal, lang: str) -> str:
    """How far a series moved, in words, with the ratio only as the tool itself wrote it."""
    t = texts(lang)
    name = f"{signal.metric}{labels_text(signal)}"
    evidence = signal.line or ""
    if evidence and from_zero(signal, evidence):
        return t["basis_from_zero"].format(metric=name)
    if not signal.strong:
        return t["basis_slight"].format(metric=name)
    direction = {"up": "up", "down": "down"}.get(signal.direction, "level")
    ratio = ratio_text(signal, evidence) if evidence else None
    if ratio is not None and direction != "level":
        form = "level" if signal.window_level is not None else "ratio"
        return t[f"basis_{direction}_{form}"].format(metric=name, ratio=ratio)
    return t[f"basis_{direction}"].format(metric=name)


def _signal_basis(signal: MetricSignal | LogSignal, lang: str) -> str:
    if isinstance(signal, MetricSignal):
        return _metric_basis(signal, lang)
    t = texts(lang)
    if signal.samples and not signal.injected:
        return t["basis_logs_quote"].format(n=1, message=log_message(signal, BASIS_CHARS))
    return t["basis_logs"].format(n=1)


def _shown(signal: MetricSignal | LogSignal, entry: Suspect) -> MetricSignal | LogSignal:
    """The series of the deciding family that the answer's symptoms state (the most telling
    one, as ``symptoms`` orders them), so the basis and the symptoms cite one series."""
    if not isinstance(signal, MetricSignal):
        return signal
    family = metric_family(signal)
    same = [m for m in _telling(entry) if metric_family(m) == family and m.line]
    return same[0] if same else signal


def _telling(entry: Suspect) -> list[MetricSignal]:
    """Its shifts that can show a fault (``Suspect.own_metrics``), most telling first: a basis
    never cites a series that eased (fewer failures, more success) as a cause's evidence."""
    return sorted(entry.own_metrics, key=lambda m: (not m.strong, -metric_relevance(m), m.metric))


def _kind_signals(entry: Suspect) -> list[MetricSignal | LogSignal]:
    """The evidence that decided the service's fault kind (and the kind it cannot be told
    from), cited first: the basis shows what the kind says. Else its most telling shift."""
    decided = [s for s in (entry.fault_evidence, entry.fault_alternative_evidence) if s]
    if decided:
        return [_shown(signal, entry) for signal in decided]
    return list(_telling(entry)[:1])


def _basis(entry: Suspect, lang: str) -> str:
    t = texts(lang)
    cited = _kind_signals(entry)
    parts = [_signal_basis(signal, lang) for signal in cited]
    if cited and isinstance(cited[0], MetricSignal):
        spread = instances_shifted(entry, cited[0])
        if spread is not None and len(spread[0]) < spread[1]:
            names = list_join(spread[0][:3], lang)
            parts.append(
                t["basis_instances"].format(n=len(spread[0]), total=spread[1], names=names)
            )
    for m in entry.resource_metrics:
        if m.at_limit:
            key = "basis_free" if vocab.is_free_metric(m.metric) else "basis_limit"
            parts.append(t[key].format(metric=m.metric))
            break
    change = entry.change_before_errors
    if change is not None:
        parts.append(t["basis_change"])
    if entry.downstream_of:
        parts.append(t["basis_downstream"].format(services=list_join(entry.downstream_of, lang)))
    if entry.inherited_from:
        parts.append(t["basis_inherited"].format(services=list_join(entry.inherited_from, lang)))
    elif entry.unobserved_callees:
        names = list_join(entry.unobserved_callees, lang)
        parts.append(t["basis_unobserved"].format(services=names))
    if entry.client_gaps:
        parts.append(t["basis_client_gap"].format(services=list_join(entry.client_gaps, lang)))
    if not entry.inherited_from and entry.graph_score > 0:
        if not entry.unobserved_callees:
            parts.append(t["basis_localised"])
        if entry.explains:
            parts.append(t["basis_explains"].format(services=list_join(entry.explains[:4], lang)))
    if entry.resource_logs:
        sub = subkind_names(lang).get(entry.resource_logs[0].subkind, subkind_names(lang)[""])
        parts.append(t["basis_resource_log"].format(sub=sub))
    logs = [lg for lg in entry.abnormal_logs if lg.kind != "dependency"]
    if logs:
        quotable = [lg for lg in logs if not lg.injected and lg.samples]
        if quotable and not entry.resource_logs:
            message = log_message(quotable[0], BASIS_CHARS)
            parts.append(t["basis_logs_quote"].format(n=len(logs), message=message))
        else:
            parts.append(t["basis_logs"].format(n=len(logs)))
    if entry.earliest and entry.onset is not None:
        parts.append(t["basis_early"].format(time=entry.onset.strftime("%H:%M:%S")))
    if entry.blamed_by:
        parts.append(t["basis_blamed"].format(services=list_join(entry.blamed_by, lang)))
    if entry.victim:
        parts.append(t["basis_victim"])
    if not parts:
        parts.append(t["basis_none"])
    # the evidence that decided the kind may be the log the logs' line quotes: said once
    return t["basis_sep"].join(dict.fromkeys(parts))


def _needed(entry: Suspect, lang: str) -> list[str]:
    t = texts(lang)
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


def is_secondary(entry: Suspect, root: str | None) -> bool:
    """The service only suffers from another one: downstream of it (by its logs or along the
    calls), or beside a found root."""
    own_cause = bool(entry.resource_metrics) or entry.kind in {"change", "code"}
    inherits = bool(entry.downstream_of or entry.inherited_from or entry.follows)
    return inherits or bool(root and entry.service != root and not own_cause)


def hypothesis_build(entry: Suspect, lang: str, root: str | None) -> Hypothesis:
    t = texts(lang)
    svc = entry.service
    sub = subkind_names(lang).get(entry.subkind, subkind_names(lang)[""])
    if entry.downstream_of:
        text = t["hyp_secondary"].format(svc=svc, root=list_join(entry.downstream_of, lang))
    elif entry.inherited_from:
        text = t["hyp_secondary"].format(svc=svc, root=list_join(entry.inherited_from, lang))
    elif entry.follows:  # no call known: it began only after these (localise.without_calls)
        text = t["hyp_secondary"].format(svc=svc, root=list_join(entry.follows, lang))
    elif is_secondary(entry, root):
        text = t["hyp_secondary"].format(svc=svc, root=root)
    elif entry.kind == "resource":
        text = t["hyp_resource"].format(svc=svc, sub=sub)
    elif entry.kind == "dependency" and _dependency_targets(entry):
        targets = _dependency_targets(entry)
        text = t["hyp_dependency"].format(svc=svc, targets=list_join(targets, lang))
    elif entry.kind == "dependency_target":
        text = t["hyp_dependency_target"].format(svc=svc, blamers=list_join(entry.blamed_by, lang))
    elif entry.kind in {"latency", "errors", "other", "dependency"} and entry.fault_kind:
        # the kind its own evidence shows words the hypothesis (a failed call that names no
        # other service is its own evidence too)
        key = f"hyp_{entry.fault_kind}"
        names = kind_names(lang)
        text = (t[key] if key in t else t["hyp_fault"]).format(
            svc=svc, kind=names.get(entry.fault_kind, entry.fault_kind)
        )
    elif entry.kind == "dependency":
        text = t["hyp_errors"].format(svc=svc)
    else:
        text = t.get(f"hyp_{entry.kind}", t["hyp_other"]).format(svc=svc)
    kind: str | None = None
    if entry.root_kind and not (
        entry.inherited_from or entry.downstream_of or is_secondary(entry, root)
    ):
        kind = entry.root_kind
        text += kind_said(entry, lang)
        if len(entry.path) > 1:
            text += t["hyp_path"].format(path=t["path_sep"].join(entry.path))
    return Hypothesis(
        hypothesis_text=text,
        entity=svc,
        root_cause_kind=kind,
        root_cause_kind_alternative=kind_alternative(entry) if kind else None,
        basis=_kind_basis(entry, lang) if kind else _basis(entry, lang),
        needed_evidence=_needed(entry, lang),
    )


def _kind_basis(entry: Suspect, lang: str) -> str:
    """The basis of a statement of the service's kind: its evidence, and where the verdict
    names a second kind that evidence shows too (``Ambiguity.SHARED``), what was not there
    to rule that kind out (no network counter; nothing that excludes a code fault)."""
    t = texts(lang)
    basis = _basis(entry, lang)
    other = kind_alternative(entry)
    absent = t.get(f"basis_alt_{other}") if entry.fault_ambiguity == Ambiguity.SHARED else None
    return t["basis_sep"].join([basis, absent.format(svc=entry.service)]) if absent else basis


def alternative_hypothesis(entry: Suspect, lang: str) -> Hypothesis | None:
    """The other kind of an ambiguous verdict as a hypothesis of its own, on the same
    evidence (and, where that kind's fault shows only as the deciding family, the absence
    of the series that could rule it out)."""
    other = kind_alternative(entry)
    if other is None:
        return None
    t = texts(lang)
    names = kind_names(lang)
    kind = entry.root_kind
    text = t["hyp_alternative"].format(
        svc=entry.service, other=names.get(other, other), kind=names.get(kind, kind)
    )
    return Hypothesis(
        hypothesis_text=text,
        entity=entry.service,
        root_cause_kind=other,
        root_cause_kind_alternative=kind,
        basis=_kind_basis(entry, lang),
        needed_evidence=_needed(entry, lang),
    )


# The fault kinds whose action is what an SRE does about that kind whatever the cause's
# wording: the kind the answer gives decides what to check (texts ``act_<kind>``).
# A code fault that came with a deploy keeps the deploy's action (roll it back).
_KIND_ACTIONS = ("cpu", "memory", "disk", "network", "configuration", "code")


def action_build(entry: Suspect, lang: str, reason_key: str) -> RecommendedAction:
    """What to do about the cause: the action of the kind its own evidence shows where that
    kind has one of its own (``_KIND_ACTIONS``: a network root's network path, a
    configuration root's change), else the action of what made it the cause (the resource
    that ran out, its change, its code, its callees)."""
    t = texts(lang)
    if entry.fault_kind in _KIND_ACTIONS and not (
        entry.fault_kind == "code" and entry.kind == "change"
    ):
        key = f"act_{entry.fault_kind}"
    elif entry.kind == "resource":
        key = (
            f"act_{entry.subkind}"
            if entry.subkind and f"act_{entry.subkind}" in t
            else "act_resource"
        )
    elif entry.kind == "dependency_target":
        key = "act_latency"
    elif entry.kind == "dependency" and not _dependency_targets(entry):
        # no callee named: what its own evidence shows says what to look at
        wanted = {"resource_exhaustion": "act_resource"}.get(
            entry.fault_kind, f"act_{entry.fault_kind}"
        )
        key = wanted if entry.fault_kind and wanted in t else "act_errors"
    else:
        key = f"act_{entry.kind}" if f"act_{entry.kind}" in t else "act_other"
    text = t[key].format(svc=entry.service, targets=list_join(_dependency_targets(entry), lang))
    return RecommendedAction(action_text=text, reason=t[reason_key].format(svc=entry.service))


def hypotheses_write(
    notable: list[Suspect], root: str | None, top: Suspect | None, chunks: list[Chunk], lang: str
) -> list[Hypothesis]:
    """A hypothesis for each notable service but the confirmed cause, then the runbooks."""
    hypotheses: list[Hypothesis] = []
    for entry in notable:
        # the cause's kind the evidence cannot tell from another: that kind, right after it
        alternative = alternative_hypothesis(entry, lang) if entry is top else None
        if entry.service == root:
            hypotheses += [alternative] if alternative else []
            continue
        if len(hypotheses) >= MAX_HYPOTHESES:
            break
        hypothesis = hypothesis_build(entry, lang, root)
        hypotheses.append(hypothesis)
        if alternative and hypothesis.root_cause_kind_alternative:
            hypotheses.append(alternative)
    focus = root or (top.service if top else None)
    return hypotheses + (_runbook_hypotheses(chunks, focus, lang) if focus else [])


def _runbook_hypotheses(chunks: list[Chunk], service: str, lang: str) -> list[Hypothesis]:
    """At most two runbooks among the first three chunks, one hypothesis each."""
    t = texts(lang)
    hypotheses: list[Hypothesis] = []
    titles: set[str] = set()
    for chunk in chunks[:3]:
        if (chunk.title or chunk.chunk_id) in titles or len(titles) >= 2:
            continue
        titles.add(chunk.title or chunk.chunk_id)
        hypotheses.append(
            Hypothesis(
                hypothesis_text=t["hyp_runbook"].format(
                    title=chunk.title or chunk.chunk_id, svc=service
                ),
                entity=service,
                basis=t["basis_runbook"].format(heading=chunk.heading or chunk.title),
                needed_evidence=[],
            )
        )
    return hypotheses


def actions_write(
    top: Suspect | None, notable: list[Suspect], root: str | None, chunks: list[Chunk], lang: str
) -> list[RecommendedAction]:
    """What to do about the suspect and the next two notable services, then the runbook."""
    actions: list[RecommendedAction] = []
    if top is not None:
        actions.append(action_build(top, lang, "reason_root" if root else "reason_hyp"))
    for entry in notable[1:3]:
        # A service that only suffers from another needs no investigation of its own.
        if not entry.victim and not is_secondary(entry, root):
            actions.append(action_build(entry, lang, "reason_hyp"))
    return actions + [_runbook_action(chunk, lang) for chunk in chunks[:1]]


def _runbook_action(chunk: Chunk, lang: str) -> RecommendedAction:
    t = texts(lang)
    bindings = []
    if chunk.header:
        ids = [chunk.call.invocation_id] if chunk.call.invocation_id is not None else []
        bindings.append(
            EvidenceBinding(
                source_type="lookup_evidence_block",
                source_id=chunk.chunk_id,
                tool_name="lookup_knowledge",
                source_invocation_ids=ids,
                evidence_excerpt=chunk.header,
            )
        )
    return RecommendedAction(
        action_text=t["act_runbook"].format(title=chunk.title or chunk.chunk_id),
        reason=t["reason_runbook"],
        evidence_bindings=bindings,
    )
