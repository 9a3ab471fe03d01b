"""A role-aware responder for the loopback OpenAI-compatible server.

It plays the four agents well enough for end-to-end runs through the `openai`
provider (worker, crash and benchmark tests): the Planner returns a plan, the
Executor calls `query_logs` once and then cites a line of its output verbatim,
the Verifier passes what the Gatekeeper accepted, the Composer lists the allowed
claims. It reads only what the real provider sends.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support.openai_server import Reply

ROLE_MARKERS = {
    "planner": "You are the Planner of Rootproof",
    "executor": "You are the Executor of Rootproof",
    "verifier": "You are the Verifier of Rootproof",
    "composer": "You are the Composer of Rootproof",
}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def request_role(body: dict[str, Any]) -> str:
    prompt = "\n".join(_text(m) for m in body.get("messages", []) if m.get("role") == "system")
    prompt = prompt or _text(body.get("messages", [{}])[0])
    for role, marker in ROLE_MARKERS.items():
        if marker in prompt:
            return role
    return "unknown"


def _embedded_object(text: str, key: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, _ = decoder.raw_decode(text, index)
        except ValueError:
            value = None
        if isinstance(value, dict) and key in value:
            return value
        index = text.find("{", index + 1)
    return None


_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b")


def _claim_text(line: str) -> str:
    """A claim that names something its excerpt shows (the Gatekeeper binds its facts)."""
    named = _IDENTIFIER.search(line)
    return f"{named.group()} 日志中出现错误" if named else "日志中出现错误"


def _evidence_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines()[1:] if len(line.strip()) >= 20]
    # a log line of a named service first ("… payment-service ERROR …"), then any error line
    named = [line for line in lines if re.search(_IDENTIFIER.pattern + " ERROR ", line)]
    preferred = [line for line in lines if "ERROR" in line or "error" in line]
    return (named or preferred or lines or [""])[0][:300]


def role_responder(body: dict[str, Any]) -> Reply:
    role = request_role(body)
    messages = body.get("messages", [])
    everything = "\n".join(_text(m) for m in messages)
    if role == "planner":
        return Reply.text({"plan_version": "planner_v1", "services": [], "tools": ["query_logs"]})
    if role == "executor":
        tool_messages = [m for m in messages if m.get("role") == "tool"]
        if not tool_messages and body.get("tools"):
            return Reply.tools(("query_logs", {"level": "ERROR"}))
        claims = []
        if tool_messages:
            output = _text(tool_messages[0])
            trace = output.split("]", 1)[0].lstrip("[").split()[0] if output else "trace-1"
            line = _evidence_line(output)
            if line:
                claims.append(
                    {
                        "claim_id": "claim-1",
                        "claim_type": "symptom",
                        "claim_text": _claim_text(line),
                        "support_level": "direct",
                        "evidence_bindings": [
                            {
                                "source_type": "tool_trace",
                                "source_id": trace,
                                "tool_name": "query_logs",
                                "evidence_excerpt": line,
                            }
                        ],
                    }
                )
        return Reply.text(
            {
                "answer_version": "executor_evidence_v2",
                "claims": claims,
                "hypotheses": [],
                "recommended_actions": [],
                "missing_info": [],
            }
        )
    if role == "verifier":
        payload = _embedded_object(everything, "gatekeeper") or {}
        accepted = [
            c["claim_id"]
            for c in (payload.get("gatekeeper") or {}).get("claims", [])
            if c.get("verdict") == "accepted"
        ]
        return Reply.text(
            {
                "verifier_version": "verifier_v2",
                "decision": "PASS" if accepted else "LOW_CONFID",
                "claim_checks": [
                    {"claim_id": cid, "classification": "direct_observation", "reason": "bound"}
                    for cid in accepted
                ],
                "summary": "checked",
            }
        )
    if role == "composer":
        composer_input = _embedded_object(everything, "allowed_claims") or {}
        lines = [f"- {c['text']}" for c in composer_input.get("allowed_claims", [])]
        answer = "**结论**\n\n" + ("\n".join(lines) or "没有可以确认的结论。")
        return Reply.text({"answer_version": "composer_v1", "final_answer": answer})
    return Reply.failing("500")
