"""What the answer lacks: failed calls, services without data, no anomaly, no cause."""

from __future__ import annotations

from .analysis import Call, Suspect
from .gather import Evidence
from .texts import texts
from .wording import list_join, short_text

MAX_NAMED = 4  # services a missing-info line names (the ranking lists them all)


def missing_write(
    evidence: Evidence,
    suspects: list[Suspect],
    root: str | None,
    weak: list[str],
    has_chunks: bool,
    lang: str,
    *,
    tied: list[Suspect] | None = None,
) -> list[str]:
    """The missing-info lines, each once, in the order an SRE would check them."""
    t = texts(lang)
    ranked = [s for s in suspects if s.score > 0 or s.graph_score > 0]
    top = ranked[0] if ranked else None
    missing = _failed_calls(evidence, lang)
    with_data = {s.service for s in suspects if s.has_data}
    for service in evidence.queried:
        if service not in with_data:
            missing.append(t["miss_nodata"].format(svc=service))
    if not ranked:
        missing += [t["miss_no_anomaly"], t["miss_no_signal"]]
    elif tied:
        names = list_join([s.service for s in tied], lang)
        missing.append(t["miss_tied"].format(services=names))
    elif top is not None and top.unobserved_callees:
        names = list_join(top.unobserved_callees, lang)
        missing.append(t["miss_unobserved"].format(svc=top.service, services=names))
    elif root is None:
        missing.append(t["miss_no_root"])
    followers = [s.service for s in ranked if top is not None and top.service in s.follows]
    if top is not None and followers and not tied:
        # no call was known: the later services began after it, nothing links them to it
        names = list_join(followers[:MAX_NAMED], lang)
        missing.append(t["miss_calls_unknown"].format(svc=top.service, services=names))
    if weak and (top is None or not top.notable):
        # Only small drifts anywhere: say what was seen, in one line.
        missing.append(t["miss_weak"].format(services=list_join(weak, lang)))
    if not has_chunks:
        missing.append(t["miss_knowledge"])
    return list(dict.fromkeys(missing))


def _failed_calls(evidence: Evidence, lang: str) -> list[str]:
    t = texts(lang)
    missing: list[str] = []
    for call in evidence.calls:
        if call in evidence.superseded:
            continue
        # no_data is an answer (nothing logged at that level), not a gap
        if call.status in {"error", "timeout"} or not call.trace_ref:
            target = _call_target(call, lang)
            missing.append(
                t["miss_call"].format(tool=call.tool_name, target=target, status=call.status)
            )
    return missing


def _call_target(call: Call, lang: str) -> str:
    args = call.arguments
    if args.get("service"):
        return str(args["service"])
    if args.get("query"):
        return short_text(str(args["query"]), 40)
    return texts(lang)["all_services"]
