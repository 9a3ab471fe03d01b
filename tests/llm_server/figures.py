"""What a session against a real model cost, per role and in all (bench/local_model.py and
the llm_server tests report it; the README's "Running with a local model" quotes it)."""

from __future__ import annotations

from typing import Any

from diagnosis.contracts import SelfEvaluation
from diagnosis.evaluation import PackResult
from diagnosis.models import DiagnosisSession, LLMCall, ToolInvocation
from diagnosis.selectors import session_self_evaluation

ROLES = ("planner", "executor", "verifier", "composer")


def stage_statuses(session: DiagnosisSession, evaluation: SelfEvaluation) -> dict[str, str]:
    """How each stage's output parsed (the Composer's: ok, or what the guard found)."""
    verifier = evaluation.verifier_evaluation
    composer = verifier.composer_output if verifier is not None else None
    return {
        "planner": (session.plan or {}).get("status", ""),
        "executor": session.executor_output_parse_status or "",
        "verifier": verifier.status if verifier is not None else "",
        "composer": str(composer.status) if composer is not None else "",
    }


def _role_figures(calls: list[LLMCall], stages: dict[str, str]) -> dict[str, dict[str, Any]]:
    figures: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        mine = [c for c in calls if c.role == role]
        figures[role] = {
            "calls": len(mine),
            "wall_s": round(sum(c.latency_ms for c in mine) / 1000, 1),
            "tokens_in": sum(c.tokens_in for c in mine),
            "tokens_out": sum(c.tokens_out for c in mine),
            "call_statuses": [c.status for c in mine],
            "call_seconds": [round(c.latency_ms / 1000, 1) for c in mine],
            "call_tokens_out": [c.tokens_out for c in mine],
            "formats": [(c.request.get("response_format") or {}).get("type") for c in mine],
            "tool_choice": [c.request.get("tool_choice") for c in mine],
            "errors": [c.error[:200] for c in mine if c.error],
            "parse_status": stages[role],
        }
    return figures


def session_figures(result: PackResult, wall: float) -> dict[str, Any]:
    """Per role: calls, wall time, tokens, statuses, parse status; and the whole session."""
    session = DiagnosisSession.objects.get(public_id=result.session_id)
    calls = list(LLMCall.objects.filter(session=session).order_by("sequence"))
    tools = list(ToolInvocation.objects.filter(session=session).order_by("sequence"))
    stages = stage_statuses(session, session_self_evaluation(session))
    return {
        "roles": _role_figures(calls, stages),
        "session": {
            "wall_s": round(wall, 1),
            "model_s": round(sum(c.latency_ms for c in calls) / 1000, 1),
            "model_calls": len(calls),
            "status": session.status,
            "decision": session.decision,
            "answer_source": session.answer_source,
            "tool_calls": [(t.trace_ref, t.tool_name, t.status, t.arguments) for t in tools],
            "tokens_in": sum(c.tokens_in for c in calls),
            "tokens_out": sum(c.tokens_out for c in calls),
            "leaked": result.leaked,
            "unsupported_in_answer": result.unsupported_in_answer,
        },
    }


def figures_print(figures: dict[str, Any]) -> None:
    print(f"\n{'role':<9} {'calls':>5} {'wall s':>7} {'tokens in':>9} {'out':>5}  statuses / parse")
    for role, row in figures["roles"].items():
        print(
            f"{role:<9} {row['calls']:>5} {row['wall_s']:>7} {row['tokens_in']:>9} "
            f"{row['tokens_out']:>5}  {','.join(row['call_statuses'])} / {row['parse_status']}"
        )
    whole = figures["session"]
    tools = [f"{name}:{status}" for _ref, name, status, _args in whole["tool_calls"]]
    print(
        f"\nsession: {whole['wall_s']:.1f} s ({whole['model_s']:.1f} s in the model), "
        f"{whole['model_calls']} model calls, {whole['tokens_in']} tokens in, "
        f"{whole['tokens_out']} out, {len(tools)} tool calls {tools}, "
        f"{whole['status']} {whole['decision']} via {whole['answer_source']}, "
        f"leaked {whole['leaked']}, unsupported {whole['unsupported_in_answer']}"
    )
