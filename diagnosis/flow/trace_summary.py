"""tool_trace_summary: what the Verifier reads about each tool call, under a token budget.

Each entry carries the top facts of one invocation (the lines its output leads with).
When the list is over budget, every entry is shortened step by step; if that is not
enough, the oldest entries lose their detail (with a marker), then are dropped, the
oldest entry kept saying how many were. Every entry is one real invocation (a valid
``TraceSummaryEntry``). The size depends on the number of calls, never on the size of
their output.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from diagnosis.evidence.common import clamp_lines
from diagnosis.evidence.tools import tool_definition
from diagnosis.models import DiagnosisSession, ToolInvocation
from diagnosis.tokens import estimate_tokens

# (max fact lines, max chars per line) from generous to terse.
DETAIL_LEVELS = ((6, 300), (4, 220), (3, 160), (2, 120), (1, 100))
MAX_ARGUMENT_CHARS = 120
DROPPED = "[detail dropped to fit the token budget]"
OMITTED = "[{count} earlier invocation(s) omitted to fit the token budget]"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arguments_bounded(arguments: Any) -> Any:
    if not isinstance(arguments, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in list(arguments.items())[:10]:
        if isinstance(value, str):
            out[str(key)[:40]] = _clip(value, MAX_ARGUMENT_CHARS)
        elif isinstance(value, int | float | bool) or value is None:
            out[str(key)[:40]] = value
        else:
            out[str(key)[:40]] = _clip(
                json.dumps(value, ensure_ascii=False, default=str), MAX_ARGUMENT_CHARS
            )
    return out


def invocation_facts(invocation: ToolInvocation) -> list[str]:
    """The invocation's most telling lines, most important first."""
    summary = invocation.summary if isinstance(invocation.summary, dict) else {}
    if invocation.status in {ToolInvocation.Status.ERROR, ToolInvocation.Status.TIMEOUT}:
        return [
            f"{invocation.status}: {summary.get('error') or invocation.error or invocation.output}"
        ]
    definition = tool_definition(invocation.tool_name)
    facts = definition.summary_facts(summary) if definition is not None else []
    if not facts:
        lines = [line for line in invocation.output.splitlines() if line.strip()]
        facts = lines[1:] or lines  # the first line repeats the call
    elif isinstance(summary.get("clamped"), dict):
        facts = clamp_lines(summary["clamped"]) + facts
    if invocation.truncated:
        facts.append(f"(output truncated from {invocation.output_size} characters)")
    return [f for f in facts if f]


def _entry(
    invocation: ToolInvocation, facts: list[str], level: tuple[int, int] | None
) -> dict[str, Any]:
    if level is None:
        text = DROPPED
    else:
        lines, width = level
        chosen = [_clip(f, width) for f in facts[:lines]]
        if len(facts) > lines:
            chosen.append(f"(+{len(facts) - lines} more)")
        text = "\n".join(chosen)
    return {
        "trace_ref": invocation.trace_ref,
        "invocation_id": invocation.pk,
        "tool_name": invocation.tool_name,
        "arguments": _arguments_bounded(invocation.arguments) if level is not None else {},
        "status": invocation.status,
        "summary": text,
    }


def _tokens(entries: list[dict[str, Any]]) -> int:
    return estimate_tokens(json.dumps(entries, ensure_ascii=False))


def trace_summary_build(
    *, session: DiagnosisSession, token_budget: int | None = None
) -> list[dict[str, Any]]:
    """``[{trace_ref, invocation_id, tool_name, arguments, status, summary}]`` within the budget."""
    budget = int(token_budget if token_budget is not None else settings.TRACE_SUMMARY_TOKEN_BUDGET)
    # The raw output is read only for invocations without a structured summary.
    invocations = list(
        ToolInvocation.objects.filter(session=session).order_by("sequence").defer("output")
    )
    facts = [invocation_facts(inv) for inv in invocations]
    entries: list[dict[str, Any]] = []
    for level in DETAIL_LEVELS:
        entries = [_entry(inv, f, level) for inv, f in zip(invocations, facts, strict=True)]
        if _tokens(entries) <= budget:
            return entries
    # Still over: the oldest calls lose their detail first (the latest attempt matters most).
    tersest = entries
    bare = [_entry(inv, f, None) for inv, f in zip(invocations, facts, strict=True)]
    total = len(invocations)
    for kept in range(total - 1, -1, -1):
        entries = bare[: total - kept] + tersest[total - kept :]
        if _tokens(entries) <= budget:
            return entries

    # Even bare entries do not fit: drop the oldest, and say so on the oldest entry kept
    # (every entry stays one real invocation, as its contract says).
    def folded(count: int, kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not count:
            return kept
        notice = OMITTED.format(count=count)
        first = {**kept[0], "summary": f"{notice}\n{kept[0]['summary']}"}
        return [first, *kept[1:]]

    dropped = 0
    entries = [*bare[:-1], tersest[-1]]  # the newest call keeps its facts
    while len(entries) > 1 and _tokens(folded(dropped, entries)) > budget:
        entries.pop(0)
        dropped += 1
    if _tokens(folded(dropped, entries)) > budget:
        entries[-1] = bare[-1]
    # Give the newest survivors their detail back while it still fits.
    for index in range(len(entries) - 2, -1, -1):
        candidate = list(entries)
        candidate[index] = tersest[dropped + index]
        if _tokens(folded(dropped, candidate)) > budget:
            break
        entries = candidate
    return folded(dropped, entries)
