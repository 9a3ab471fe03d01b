"""Traces in the offline Executor: the spans' fleet view first when the environment has
traces, the leaders drilled into, the call graph from the spans, and what the spans say
about who is slow or failing by its own doing.

The principle is causal and holds on any system: a request's time is the sum of what each
service spends itself and what it waits for its callees. A service whose own (self) time
or own errors rose while what it calls did not is where the change is; a caller whose
latency rose while its own time stayed flat, or whose errors all began in a callee's spans,
is explained by that callee. ``query_traces`` measures both per service (self time, errors
that originate in its spans), so this module only reads its summary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from diagnosis.i18n import language_override

from .analysis import Call, Suspect
from .claims import Draft
from .excerpts import binding, usable

TRACE_LEADERS = 2  # services drilled into after the fleet view: the leading own changes
# The tool's scores are robust shift scores (3 = a shift, capped at 1000; noise-free
# baselines at 100): a service that changed by its own doing leads the ranking.
OWN_MIN = 3.0
MAX_WAITING_CLAIMED = 3

ToolCaller = Callable[[str, dict[str, Any]], Call]


@dataclass(frozen=True)
class TraceVerdict:
    """What the spans say of one service."""

    service: str
    own: float  # score of its own rise (self time, or errors that begin in its spans)
    waiting: bool  # latency up, own time flat
    carried: bool  # errors up, none begin in its spans
    kind: str  # latency | errors: what rose by its own doing ("" when nothing did)
    line: str
    call: Call

    @property
    def explained(self) -> bool:
        return self.own < OWN_MIN and (self.waiting or self.carried)


def _fleet_calls(calls: Iterable[Call]) -> list[Call]:
    return [
        c
        for c in calls
        if c.tool_name == "query_traces"
        and c.ok
        and not c.arguments.get("service")
        and not c.arguments.get("trace_id")
    ]


def traces_gather(has_traces: bool, call: ToolCaller) -> list[Call]:
    """The fleet view, then each leader's own view and its slowest trace; no call at all
    when the environment has no traces."""
    if not has_traces:
        return []
    fleet = call("query_traces", {})
    made = [fleet]
    if not fleet.ok:
        return made
    leaders = [v.service for v in _verdicts(fleet).values() if v.own >= OWN_MIN]
    for service in leaders[:TRACE_LEADERS]:
        view = call("query_traces", {"service": service})
        made.append(view)
        traces = view.summary.get("traces") if view.ok else None
        if service == leaders[0] and isinstance(traces, list) and traces:
            trace_id = traces[0].get("trace_id") if isinstance(traces[0], dict) else None
            if isinstance(trace_id, str) and trace_id:
                made.append(call("query_traces", {"trace_id": trace_id}))
    return made


def _verdicts(call: Call) -> dict[str, TraceVerdict]:
    out: dict[str, TraceVerdict] = {}
    for item in call.summary.get("services") or []:
        if not isinstance(item, dict) or not isinstance(item.get("service"), str):
            continue
        changes = item.get("changes")
        if not isinstance(changes, dict):
            changes = {}
        rose = {
            m: float(c.get("score") or 0)
            for m, c in changes.items()
            if isinstance(c, dict) and c.get("direction") == "up"
        }
        own_errors = bool(item.get("own_errors_window"))
        own = {"latency": rose.get("self", 0.0), "errors": rose.get("errors", 0.0) * own_errors}
        kind = max(own, key=lambda k: (own[k], k == "latency"))
        out[item["service"]] = TraceVerdict(
            service=item["service"],
            own=own[kind],
            waiting=bool(item.get("waiting")),
            carried=rose.get("errors", 0.0) >= OWN_MIN and not own_errors,
            kind=kind if own[kind] >= OWN_MIN else "",
            line=str(item.get("line") or ""),
            call=call,
        )
    return out


def trace_verdicts(calls: Iterable[Call]) -> dict[str, TraceVerdict]:
    """Each service's verdict from the first fleet view of the spans (none without one)."""
    fleet = _fleet_calls(calls)
    return _verdicts(fleet[0]) if fleet else {}


def trace_edges(calls: Iterable[Call]) -> set[tuple[str, str]]:
    """The call edges the spans show (caller, callee), from every view that lists them."""
    edges: set[tuple[str, str]] = set()
    for call in calls:
        if call.tool_name != "query_traces" or not call.ok:
            continue
        for item in call.summary.get("graph") or []:
            if isinstance(item, dict) and isinstance(item.get("caller"), str):
                for callee in item.get("callees") or []:
                    if isinstance(callee, str) and callee != item["caller"]:
                        edges.add((item["caller"], callee))
        for item in call.summary.get("edges") or []:
            if isinstance(item, dict) and item.get("caller") and item.get("callee"):
                edges.add((str(item["caller"]), str(item["callee"])))
    return edges


def _blamed(
    service: str, verdicts: dict[str, TraceVerdict], edges: set[tuple[str, str]]
) -> list[str]:
    """The services below ``service`` whose own change explains it (nearest first)."""
    found: list[str] = []
    frontier = [service]
    seen = {service}
    while frontier:
        nxt: list[str] = []
        for name in frontier:
            for caller, callee in sorted(edges):
                if caller != name or callee in seen:
                    continue
                seen.add(callee)
                verdict = verdicts.get(callee)
                if verdict is not None and verdict.own >= OWN_MIN:
                    found.append(callee)
                elif verdict is not None and verdict.explained:
                    nxt.append(callee)
        frontier = nxt
    return found


def traces_rerank(
    suspects: list[Suspect], verdicts: dict[str, TraceVerdict], edges: set[tuple[str, str]]
) -> list[Suspect]:
    """``suspects`` re-ranked by what the spans say: first the services that changed by
    their own doing (in the order the rest of the evidence gives them), then those the
    spans say nothing about, then those the spans show only waiting on (or carrying the
    errors of) a callee. A service only the spans show changed becomes a suspect."""
    if not verdicts:
        return suspects
    by_name = {s.service: s for s in suspects}
    out = list(suspects)
    for name, found in verdicts.items():
        if found.own >= OWN_MIN and name not in by_name:
            by_name[name] = Suspect(service=name, has_data=True)
            out.append(by_name[name])
    for entry in out:
        verdict = verdicts.get(entry.service)
        if verdict is None:
            continue
        if verdict.own >= OWN_MIN:
            entry.graph_score = max(entry.graph_score, entry.score) + verdict.own / 100.0
            if entry.kind in {"dependency", "other", "dependency_target", "latency", "errors"}:
                entry.kind, entry.subkind, entry.inherited_from = verdict.kind, "", []
            # the kind its own metrics and logs show stands (a resource at its limit, a
            # change); where they show none, the spans say latency or errors
            if entry.fault_kind in {"", "dependency", "latency", "errors"}:
                entry.fault_kind = verdict.kind
        elif verdict.explained:
            blamed = _blamed(entry.service, verdicts, edges)
            if blamed:
                entry.inherited_from = blamed
                entry.kind, entry.subkind = "dependency", ""

    def tier(entry: Suspect) -> int:
        verdict = verdicts.get(entry.service)
        if verdict is not None and verdict.own >= OWN_MIN:
            return 0
        return 2 if verdict is not None and entry.inherited_from and verdict.explained else 1

    return sorted(
        out,
        key=lambda s: (tier(s), -max(s.graph_score, s.score), -round(s.score, 6), s.service),
    )


def _texts(lang: str) -> dict[str, str]:
    with language_override(lang):
        return {
            "own_latency": _("链路追踪显示 {svc} 自身耗时（不含等待下游调用的时间）相对基线升高"),
            "own_errors": _("链路追踪显示 {svc} 的错误始于它自己的 span，而不是下游传来的"),
            "waiting": _("链路追踪显示 {svc} 的延迟升高来自等待下游调用，其自身耗时平稳"),
            "carried": _("链路追踪显示 {svc} 的错误来自下游调用，没有一个始于它自己的 span"),
            "end": _("。"),
        }


def trace_drafts(top: Suspect | None, calls: list[Call], lang: str) -> list[Draft]:
    """The claims the spans support, each quoting its service's line of the fleet view:
    the suspect's own change, then the callers it explains."""
    verdicts = trace_verdicts(calls)
    if top is None or top.service not in verdicts:
        return []
    t = _texts(lang)
    drafts: list[Draft] = []
    leader = verdicts[top.service]
    if leader.own >= OWN_MIN and usable(leader.line, leader.call):
        key = "own_errors" if leader.kind == "errors" else "own_latency"
        drafts.append(
            Draft(
                "symptom",
                t[key].format(svc=top.service) + t["end"],
                top.service,
                [binding(leader.call, leader.line)],
            )
        )
    edges = trace_edges(calls)
    explained = [
        v
        for v in verdicts.values()
        if v.explained
        and v.service != top.service
        and usable(v.line, v.call)
        and top.service in _blamed(v.service, verdicts, edges)
    ]
    for verdict in explained[:MAX_WAITING_CLAIMED]:
        key = "waiting" if verdict.waiting else "carried"
        drafts.append(
            Draft(
                "impact",
                t[key].format(svc=verdict.service) + t["end"],
                verdict.service,
                [binding(verdict.call, verdict.line)],
            )
        )
    return drafts
