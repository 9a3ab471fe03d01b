"""A finished session as a scenario pack that replays it (docs: scenario-pack.md).

``recorded/invocations.jsonl`` answers the same tool calls with the same outputs;
``scripted/`` gives every model turn back in order, so ``evaluate`` on the pack
re-runs the same flow and must reach the same decision and allowed claims.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from audit.models import ClaimReview, Review
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.selectors import session_claims_view

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
    allowed = {c.claim_id: c.text for c in session_claims_view(session=session) if c.allowed}
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


def _strip_session_ids(content: str, own_ids: set[int]) -> str:
    """Database ids differ in a replay; ids naming this session's invocations are dropped
    (optional in the contract: the ``source_id`` trace ref still names the invocation)."""

    def replace(match: re.Match[str]) -> str:
        items = [item.strip() for item in match.group(2).split(",") if item.strip()]
        if items and all(item.isdigit() and int(item) in own_ids for item in items):
            return f"{match.group(1)}[]"
        return match.group(0)

    return _IDS.sub(replace, content)


def scripted_turns(
    *, calls: list[LLMCall], invocations: list[ToolInvocation]
) -> dict[str, list[dict[str, Any]]]:
    own_ids = {inv.id for inv in invocations}
    turns: dict[str, list[dict[str, Any]]] = {role: [] for role in ROLES}
    calls = _final_calls(calls)
    for role in ("planner", "verifier", "composer"):
        turns[role] = [model_turn(c) for c in calls if c.role == role]
    attempts = sorted(
        {c.attempt for c in calls if c.role == "executor"} | {i.attempt for i in invocations}
    )
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
        for turn in converted:
            if "content" in turn:
                turn["content"] = _strip_session_ids(turn["content"], own_ids)
        turns["executor"].extend(converted)
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
    invocations = list(session.invocations.order_by("sequence"))
    calls = list(session.llm_calls.order_by("sequence"))
    header = scenario_header(session=session)
    files = {
        "scenario.yaml": yaml.safe_dump(
            header, allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
        ),
        "recorded/invocations.jsonl": recorded_lines(invocations),
    }
    files.update(_turn_files(scripted_turns(calls=calls, invocations=invocations)))
    return CasePack(case_id=header["id"], files=files)
