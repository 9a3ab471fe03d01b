"""A finished session as a scenario pack that replays it (docs/scenario-pack.md).

``recorded/invocations.jsonl`` answers the same tool calls with the same outputs;
``scripted/`` gives every model turn back in order, so ``evaluate`` on the pack
re-runs the same flow and must reach the same decision and allowed claims. A session
restarted after its worker died is exported as the run that finished it: the dead
run's model turns and tool calls are left out, and trace refs are renumbered as the
replay numbers its own calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from audit.models import ClaimReview, Review
from diagnosis.flow.gatekeeper import knowledge_blocks, knowledge_tool_is
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.selectors import session_claims, session_self_evaluation

ROLES = ("planner", "executor", "verifier", "composer")
_FAILED = {s for s in LLMCall.Status.values if s not in {"ok", "truncated"}}
_IDS = re.compile(r'("source_invocation_ids"\s*:\s*)\[([^\[\]]*)\]')


@dataclass(frozen=True)
class CasePack:
    case_id: str
    files: dict[str, str]  # relative path -> text


def case_id_for(session: DiagnosisSession) -> str:
    return f"case-{session.public_id.hex[:12]}"


# --- expected -------------------------------------------------------------------


def must_not_claim(*, session: DiagnosisSession) -> list[str]:
    """Allowed claims a reviewer marked wrong (or all of them when a review said wrong/unsafe)."""
    allowed = {c.claim_id: c.text for c in session_claims(session=session).allowed}
    phrases: list[str] = []
    reviews = Review.objects.filter(session=session).prefetch_related("claim_reviews")
    for review in reviews:
        if review.verdict in Review.REJECTING_VERDICTS:
            phrases.extend(allowed.values())
        claim_review: ClaimReview
        for claim_review in review.claim_reviews.all():
            if not claim_review.agrees_with_verifier and claim_review.claim_id in allowed:
                phrases.append(allowed[claim_review.claim_id])
    return list(dict.fromkeys(p for p in phrases if p.strip()))


def scenario_header(*, session: DiagnosisSession) -> dict[str, Any]:
    context = session.context if isinstance(session.context, dict) else {}
    header: dict[str, Any] = {
        "id": case_id_for(session),
        "title": f"回归用例：{session.original_query.strip()[:80]}",
        "question": session.original_query,
        "now": context.get("now")
        or (session.started_at or session.created_at).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    window = context.get("window")
    if isinstance(window, dict) and window.get("start") and window.get("end"):
        header["window"] = {"start": window["start"], "end": window["end"]}
    header["language"] = session.language or "zh-CN"
    services = [s for s in session.environment.services or [] if isinstance(s, str) and s]
    if services:
        header["services"] = services
    expected: dict[str, Any] = {"must_not_claim": must_not_claim(session=session)}
    if session.decision:
        expected["decision"] = session.decision
    if session.answer_source:
        expected["answer_source"] = session.answer_source
    header["expected"] = expected
    header["source_session"] = str(session.public_id)
    return header


# --- recorded/ -----------------------------------------------------------------------


def recorded_lines(invocations: list[ToolInvocation]) -> str:
    lines = []
    for inv in invocations:
        record: dict[str, Any] = {
            "tool_name": inv.tool_name,
            "arguments": inv.arguments if isinstance(inv.arguments, dict) else {},
            "status": inv.status,
            "output": inv.output,
        }
        if isinstance(inv.summary, dict) and inv.summary:
            record["summary"] = inv.summary
        lines.append(json.dumps(record, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


# --- scripted/ -----------------------------------------------------------------------


def _openai_message(raw: str) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
        message = body["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return message if isinstance(message, dict) else None


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _arguments(value: object) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"raw": value}
    return value if isinstance(value, dict) else {}


def model_turn(call: LLMCall) -> dict[str, Any]:
    """What this call returned, as a scripted turn."""
    if call.status in _FAILED:
        # A failed final call: an empty turn fails the replayed call the same way.
        return {"content": ""}
    raw = call.raw_response or ""
    if call.provider == "openai":
        message = _openai_message(raw)
        if message is not None:
            calls = message.get("tool_calls") or []
            if call.role == "executor" and isinstance(calls, list) and calls:
                return {
                    "tool_calls": [
                        {
                            "name": str((c.get("function") or {}).get("name") or ""),
                            "arguments": _arguments((c.get("function") or {}).get("arguments")),
                        }
                        for c in calls
                        if isinstance(c, dict)
                    ]
                }
            return {"content": _content_text(message.get("content"))}
    if call.role == "executor":
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if (
            isinstance(data, list)
            and data
            and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in data)
        ):
            return {
                "tool_calls": [
                    {"name": c["name"], "arguments": _arguments(c.get("arguments", {}))}
                    for c in data
                ]
            }
    return {"content": raw}


def last_run_boundary(*, session: DiagnosisSession) -> int | None:
    """Attempt numbers up to this belong to runs that died (None: the session never restarted).

    A worker that died left its attempts behind; the run that took over continued with
    the next attempt number (diagnosis/flow/run.py).
    """
    restarts = session_self_evaluation(session).restarts
    if not restarts or "previous_attempts" not in restarts[-1].model_fields_set:
        return None
    return restarts[-1].previous_attempts


def last_run_calls(calls: list[LLMCall], boundary: int) -> list[LLMCall]:
    """The model calls of the surviving run: from its planner call on.

    That run plans with the attempt number ``boundary`` (it has not executed yet) and
    every later call has a higher one. A planner call right after a failed planner call
    of the same attempt is that call's retry, not the start of a run.
    """
    start = None
    for index, call in enumerate(calls):
        previous = calls[index - 1] if index else None
        retry = (
            previous is not None
            and previous.role == "planner"
            and previous.attempt == call.attempt
            and previous.status in _FAILED
        )
        if call.role == "planner" and call.attempt == boundary and not retry:
            start = index
    if start is None:
        return [c for c in calls if c.attempt > boundary]
    return [c for c in calls[start:] if c.attempt >= boundary]


def _final_calls(calls: list[LLMCall]) -> list[LLMCall]:
    """Drop failed calls that were retried: only the call the flow acted on is a turn."""
    kept = []
    for index, call in enumerate(calls):
        following = calls[index + 1] if index + 1 < len(calls) else None
        retried = (
            following is not None
            and following.role == call.role
            and following.attempt == call.attempt
        )
        if call.status in _FAILED and retried:
            continue
        kept.append(call)
    return kept


# An invocation id no replay can have (the largest bigint): a binding that cited an
# invocation other than the one its trace ref names cites this instead, so the replay's
# Gatekeeper still finds the binding invalid.
NON_MATCHING_ID = 2**63 - 1
_SOURCE_ID = re.compile(r'("source_id"\s*:\s*")((?:[^"\\]|\\.)*)(")')
_SOURCE_TYPE = re.compile(r'"source_type"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class _Replay:
    """How this session's invocations look in the replay of its exported pack."""

    invocations: dict[int, ToolInvocation]  # every invocation of the session, by id
    trace_refs: dict[str, str]  # original trace ref -> the replay's (or a ref it cannot have)
    missing_ids: frozenset[int] = frozenset()  # cited ids that exist nowhere

    def binding_target_ids(self, source_type: str, source_id: str) -> set[int]:
        """The invocations the original Gatekeeper resolved this binding's source to."""
        source_id = source_id.strip()
        kind = source_type.strip().lower()
        if kind == "tool_trace":
            return {i.id for i in self.invocations.values() if i.trace_ref.strip() == source_id}
        if kind == "lookup_evidence_block":
            return {
                i.id
                for i in self.invocations.values()
                if knowledge_tool_is(i.tool_name)
                and any(c == source_id for c, _, _ in knowledge_blocks(i.output or "", i.summary))
            }
        return set()


def _objects(text: str) -> list[tuple[int, int]]:
    """Spans of the ``{…}`` objects in ``text``, ignoring braces inside JSON strings."""
    spans, stack, in_string, escaped = [], [], False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            stack.append(index)
        elif char == "}" and stack:
            spans.append((stack.pop(), index + 1))
    return spans


def _id_item(item: str) -> int | None:
    item = item.strip()
    if len(item) >= 2 and item[0] == item[-1] == '"':
        item = item[1:-1].strip()
    return int(item) if item.isdecimal() and len(item) < 20 else None


def _binding_rewrite(content: str, replay: _Replay) -> str:
    """Executor output as the replay must see it.

    Trace refs are renumbered to the replay's (its numbering restarts at trace-1 with
    the surviving run's first call). Database ids differ in a replay: an id naming the
    invocation its binding's source resolves to is dropped (optional in the contract:
    the source still names it); an id naming another invocation of the session becomes
    :data:`NON_MATCHING_ID`, so a binding the Gatekeeper found inconsistent stays so.
    """
    spans = _objects(content)

    def enclosing(position: int) -> str:
        inside = [(s, e) for s, e in spans if s < position < e]
        if not inside:
            return ""
        start, end = max(inside)
        return content[start:end]

    def ids(match: re.Match[str]) -> str:
        raw_items = [item for item in match.group(2).split(",") if item.strip()]
        parsed = [_id_item(item) for item in raw_items]
        items = [item for item in parsed if item is not None]
        if not items or len(items) != len(parsed):
            return match.group(0)
        binding = enclosing(match.start())
        source = _SOURCE_ID.search(binding)
        kind = _SOURCE_TYPE.search(binding)
        targets = (
            replay.binding_target_ids(kind.group(1), source.group(2)) if source and kind else set()
        )
        kept: list[int] = []
        for inv_id in items:
            if inv_id in replay.invocations:
                if inv_id not in targets:
                    kept.append(NON_MATCHING_ID)
            elif inv_id in replay.missing_ids:
                kept.append(NON_MATCHING_ID)  # the replay's own rows could take this id
            else:
                kept.append(inv_id)  # another session's invocation stays another session's
        kept = list(dict.fromkeys(kept))
        return f"{match.group(1)}[{', '.join(str(i) for i in kept)}]"

    rewritten = _IDS.sub(ids, content)

    def source_ref(match: re.Match[str]) -> str:
        ref = match.group(2).strip()
        if ref not in replay.trace_refs:
            return match.group(0)
        return f"{match.group(1)}{replay.trace_refs[ref]}{match.group(3)}"

    return _SOURCE_ID.sub(source_ref, rewritten)


def _cited_ids(contents: list[str]) -> set[int]:
    cited: set[int] = set()
    for content in contents:
        for match in _IDS.finditer(content):
            for item in match.group(2).split(","):
                inv_id = _id_item(item)
                if inv_id is not None and 0 < inv_id < NON_MATCHING_ID:
                    cited.add(inv_id)
    return cited


def _replay_of(
    *, all_invocations: list[ToolInvocation], kept: list[ToolInvocation], contents: list[str]
) -> _Replay:
    kept_ids = {inv.id for inv in kept}
    trace_refs: dict[str, str] = {}
    for inv in all_invocations:
        if inv.id not in kept_ids:
            # A call of a dead run: the replay never makes it, so no ref of it may resolve.
            trace_refs[inv.trace_ref.strip()] = f"dead-run-{inv.trace_ref.strip()}"
    for n, inv in enumerate(kept, start=1):
        trace_refs[inv.trace_ref.strip()] = f"trace-{n}"
    invocations = {inv.id: inv for inv in all_invocations}
    elsewhere = _cited_ids(contents) - set(invocations)
    existing: set[int] = set()
    if elsewhere:
        existing = set(ToolInvocation.objects.filter(id__in=elsewhere).values_list("id", flat=True))
    return _Replay(
        invocations=invocations,
        trace_refs=trace_refs,
        missing_ids=frozenset(elsewhere - existing),
    )


def scripted_turns(
    *,
    calls: list[LLMCall],
    invocations: list[ToolInvocation],
    all_invocations: list[ToolInvocation] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Model turns of ``calls`` that replay with ``invocations``.

    ``all_invocations`` are every invocation of the session when ``invocations`` are
    only those of the surviving run (a restarted session): bindings may cite them.
    """
    turns: dict[str, list[dict[str, Any]]] = {role: [] for role in ROLES}
    calls = _final_calls(calls)
    for role in ("planner", "verifier", "composer"):
        turns[role] = [model_turn(c) for c in calls if c.role == role]
    attempts = sorted(
        {c.attempt for c in calls if c.role == "executor"} | {i.attempt for i in invocations}
    )
    executor: list[dict[str, Any]] = []
    for attempt in attempts:
        converted = [model_turn(c) for c in calls if c.role == "executor" and c.attempt == attempt]
        made = [i for i in invocations if i.attempt == attempt]
        if made and not any("tool_calls" in t for t in converted):
            # The engine called tools without recording tool-calling turns (offline):
            # re-issue the same calls, in order, before its final answer.
            converted.insert(
                0,
                {
                    "tool_calls": [
                        {"name": i.tool_name, "arguments": _arguments(i.arguments)} for i in made
                    ]
                },
            )
        executor.extend(converted)
    replay = _replay_of(
        all_invocations=list(invocations if all_invocations is None else all_invocations),
        kept=invocations,
        contents=[t["content"] for t in executor if "content" in t],
    )
    for turn in executor:
        if "content" in turn:
            turn["content"] = _binding_rewrite(turn["content"], replay)
    turns["executor"] = executor
    return turns


def _turn_files(turns: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    files = {}
    for role, role_turns in turns.items():
        numbered = role == "executor" or len(role_turns) > 1
        for n, turn in enumerate(role_turns, start=1):
            name = f"{role}-{n}.json" if numbered else f"{role}.json"
            files[f"scripted/{name}"] = json.dumps(turn, ensure_ascii=False, indent=2) + "\n"
    return files


def case_pack_build(*, session: DiagnosisSession) -> CasePack:
    all_invocations = list(session.invocations.order_by("sequence"))
    calls = list(session.llm_calls.order_by("sequence"))
    invocations = all_invocations
    boundary = last_run_boundary(session=session)
    if boundary is not None:  # restarted after a worker died: replay the surviving run only
        calls = last_run_calls(calls, boundary)
        invocations = [inv for inv in all_invocations if inv.attempt > boundary]
    header = scenario_header(session=session)
    files = {
        "scenario.yaml": yaml.safe_dump(
            header, allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
        ),
        "recorded/invocations.jsonl": recorded_lines(invocations),
    }
    turns = scripted_turns(calls=calls, invocations=invocations, all_invocations=all_invocations)
    files.update(_turn_files(turns))
    return CasePack(case_id=header["id"], files=files)
