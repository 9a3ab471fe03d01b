"""Fault injection on top of ``role_responder``: one role misbehaves, the others play well.

The Executor's final JSON also carries a v1-style ``user_facing_answer`` (the
``UFA_MARKER`` text) so a test can check that no path ever shows it to a user.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from tests.support.openai_roles import request_role, role_responder
from tests.support.openai_server import FakeOpenAIServer, Reply

UFA_MARKER = "UFA-不应展示给用户的执行器回答"
# Every fault mode of the loopback server that a model can throw at a role.
FAULT_MODES = (
    "timeout",
    "429",
    "500",
    "malformed_json",
    "truncated",
    "empty",
    "wrong_schema",
    "huge",
    "invalid_utf8",
)
RETRYABLE_MODES = {"timeout", "429", "500"}


def _with_user_facing_answer(reply: Reply) -> Reply:
    if reply.tool_calls or not reply.content:
        return reply
    try:
        body = json.loads(reply.content)
    except ValueError:
        return reply
    if isinstance(body, dict) and body.get("answer_version") == "executor_evidence_v2":
        body["user_facing_answer"] = UFA_MARKER
        reply.content = json.dumps(body, ensure_ascii=False)
    return reply


def faulty_responder(
    role: str | None, mode: str | None, base: Callable[[dict[str, Any]], Reply] = role_responder
) -> Callable[[dict[str, Any]], Reply]:
    """Every request of ``role`` gets the ``mode`` fault; the rest get ``base``'s answer."""

    def respond(body: dict[str, Any]) -> Reply:
        reply = base(body)
        if request_role(body) == "executor":
            reply = _with_user_facing_answer(reply)
        if role is not None and request_role(body) == role:
            reply.fault = mode
        return reply

    return respond


def _body_key(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def requests_per_logical_call(server: FakeOpenAIServer) -> dict[str, list[int]]:
    """Per role, how many HTTP requests each logical call took.

    A retry re-sends the identical body, so identical bodies of one role are one
    logical call; a new turn or a new attempt changes the messages.
    """
    per_role: dict[str, Counter[str]] = {}
    for body in server.chat_requests:
        per_role.setdefault(request_role(body), Counter())[_body_key(body)] += 1
    return {role: list(counter.values()) for role, counter in per_role.items()}


def executor_turns_responder(
    turns: list[list[tuple[str, dict[str, Any]]]],
    base: Callable[[dict[str, Any]], Reply] = role_responder,
    prefer: tuple[str, ...] = ("ERROR", "window max"),
) -> Callable[[dict[str, Any]], Reply]:
    """An Executor that makes the given tool-call turns, then claims one line of each output.

    Each tool message becomes one direct claim citing its trace and a line of its output
    (the first holding one of ``prefer``; an error output too, so the Gatekeeper has a
    failed invocation to demote). Other roles come from ``base``.
    """

    def respond(body: dict[str, Any]) -> Reply:
        if request_role(body) != "executor":
            return base(body)
        messages = body.get("messages", [])
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if body.get("tools") and done < len(turns):
            return Reply.tools(*turns[done])
        claims = []
        for index, message in enumerate(m for m in messages if m.get("role") == "tool"):
            output = message.get("content") or ""
            header, _, rest = output.partition("\n")
            trace = header.lstrip("[").split()[0]
            lines = [line.strip() for line in rest.splitlines() if len(line.strip()) >= 20]
            preferred = [line for line in lines if any(word in line for word in prefer)]
            # Cut at 300 characters, never inside a number (the Gatekeeper compares them whole).
            line = (preferred or lines or [rest.strip()])[0][:300].rstrip("0123456789")
            claims.append(
                {
                    "claim_id": f"claim-{index + 1}",
                    "claim_type": "symptom",
                    # the line itself: every fact it states is in its excerpt (gatekeeper_v2)
                    "claim_text": f"观察：{line}",
                    "support_level": "direct",
                    "evidence_bindings": [
                        {
                            "source_type": "tool_trace",
                            "source_id": trace,
                            "evidence_excerpt": line,
                        }
                    ],
                }
            )
        evidence = {
            "answer_version": "executor_evidence_v2",
            "claims": claims,
            "hypotheses": [],
            "recommended_actions": [],
            "missing_info": [],
            "user_facing_answer": UFA_MARKER,
        }
        return Reply.text(evidence)

    return respond
