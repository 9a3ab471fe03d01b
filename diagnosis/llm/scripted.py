"""The ``scripted`` replay: answers each role from recorded turns, for tests and regression
cases. Like the offline engine it is a ``RoleAnswerer`` (``answer(role, request)``): a
turn is a role's answer as a model gave it, not a chat reply, so a malformed answer
reaches the flow's parser as it was recorded.

A script is ``{"planner": [turn, …], "executor": [turn, …], "verifier": […],
"composer": […]}``, in memory or read from a scenario pack's ``scripted/``
folder (``planner.json``, ``executor-1.json``, ``executor-2.json``, …,
``verifier.json``, ``composer.json``; any role may use ``<role>.json`` and/or
``<role>-N.json``, and a file may hold one turn or a list of turns).

A turn is ``{"content": "<raw text>"}`` (a non-string content is sent as JSON;
``"finish_reason": "length"`` beside it replays a reply cut by ``max_tokens``),
``{"tool_calls": [{"name": …, "arguments": {…}}]}`` (Executor only), or
``{"error": "timeout", "message": "…"}`` to replay a failed call. A bare string
is a content turn; an object with none of these keys is itself the content.

Turns of a role are consumed in order across the whole session, so a RETRY asks
the Executor again and gets the next turns. A role without turns, or whose turns
ran out, goes to the fallback provider (the session's default).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from diagnosis.llm.base import (
    CallRecorder,
    LLMError,
    ModelText,
    Role,
    RoleAnswerer,
    RoleRequest,
    ToolRunner,
)
from diagnosis.tokens import estimate_tokens

PROVIDER_NAME = "scripted"
_ROLES = "|".join(role.value for role in Role)
_FILE = re.compile(rf"^({_ROLES})(?:-(\d+))?\.json$")
_FAILURE_STATUSES = {"error", "timeout", "truncated", "empty", "rejected"}


class ScriptError(ValueError):
    """A script that cannot be read: bad JSON in a file, or a turn of the wrong shape."""


def _turn_normalize(turn: Any, where: str) -> dict[str, Any]:
    if isinstance(turn, str):
        return {"content": turn}
    if not isinstance(turn, Mapping):
        raise ScriptError(
            f"{where}: a turn must be an object or a string, not {type(turn).__name__}"
        )
    if "tool_calls" in turn:
        calls = turn["tool_calls"]
        if not isinstance(calls, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in calls
        ):
            raise ScriptError(f"{where}: tool_calls must be a list of {{name, arguments}} objects")
        return {
            "tool_calls": [{"name": c["name"], "arguments": c.get("arguments", {})} for c in calls]
        }
    if "error" in turn:
        status = str(turn["error"])
        if status not in _FAILURE_STATUSES:
            raise ScriptError(f"{where}: error must be one of {sorted(_FAILURE_STATUSES)}")
        return {"error": status, "message": str(turn.get("message", "scripted failure"))}
    content = turn["content"] if "content" in turn else dict(turn)
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    finish_reason = turn.get("finish_reason") if "content" in turn else None
    if finish_reason is None:
        return {"content": content}
    return {"content": content, "finish_reason": str(finish_reason)}


def _script_from_folder(folder: Path) -> dict[Role, list[dict[str, Any]]]:
    found: list[tuple[Role, int, Path]] = []
    if folder.is_dir():
        for path in folder.iterdir():
            match = _FILE.match(path.name)
            if match and path.is_file():
                found.append((Role(match.group(1)), int(match.group(2) or 0), path))
    script: dict[Role, list[dict[str, Any]]] = {role: [] for role in Role}
    for role, _, path in sorted(found, key=lambda item: (item[0].value, item[1])):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ScriptError(f"{path}: not readable as JSON ({exc})") from exc
        turns = data if isinstance(data, list) else [data]
        script[role].extend(_turn_normalize(t, f"{path}[{i}]") for i, t in enumerate(turns))
    return script


def _request_for_record(request: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(request) and not isinstance(request, type):
        return dataclasses.asdict(request)
    if hasattr(request, "model_dump"):
        return request.model_dump(mode="json")
    return {"request": str(request)}


class ScriptedProvider:
    name = PROVIDER_NAME

    def __init__(
        self,
        script: Mapping[str, Sequence[Any]] | None = None,
        *,
        fallback: RoleAnswerer | None = None,
        source: str = "memory",
    ) -> None:
        self._turns: dict[Role, deque[dict[str, Any]]] = {role: deque() for role in Role}
        for key, turns in (script or {}).items():
            role = Role(key)
            if isinstance(turns, str | Mapping):
                turns = [turns]
            self._turns[role].extend(
                _turn_normalize(t, f"{source}:{role.value}[{i}]") for i, t in enumerate(turns)
            )
        self.fallback = fallback
        self.source = source
        self.asked: list[tuple[Role, Any]] = []

    @classmethod
    def from_folder(
        cls, folder: Path | str, *, fallback: RoleAnswerer | None = None
    ) -> ScriptedProvider:
        """Turns from a pack's ``scripted/`` folder; a missing folder means no turns."""
        folder = Path(folder)
        script = _script_from_folder(folder)
        return cls({r.value: t for r, t in script.items()}, fallback=fallback, source=str(folder))

    def remaining(self, role: Role | str) -> int:
        return len(self._turns[Role(role)])

    # --- answering a role ------------------------------------------------------

    def answer(
        self,
        role: Role,
        request: RoleRequest,
        *,
        recorder: CallRecorder,
        tools: ToolRunner | None = None,
    ) -> str:
        """The role's next turn; the Executor's tool-call turns run through ``tools`` first.
        A role whose turns ran out (the Executor possibly mid-investigation) goes to the
        fallback, which carries on."""
        role = Role(role)
        self.asked.append((role, request))
        turns = self._turns[role]
        while turns and role is Role.EXECUTOR and tools is not None:
            if "tool_calls" not in turns[0]:
                break
            calls = turns.popleft()["tool_calls"]
            self._record(recorder, role, request, json.dumps(calls, ensure_ascii=False))
            for call in calls:
                tools(call["name"], call["arguments"])
        if turns:
            return self._answer(role, request, recorder)
        return self._fallback(role, request, recorder).answer(
            role, request, recorder=recorder, tools=tools
        )

    # --- helpers ---------------------------------------------------------------

    def _answer(self, role: Role, request: Any, recorder: CallRecorder) -> str:
        turn = self._turns[role].popleft()
        if "tool_calls" in turn:
            message = f"a scripted {role.value} turn cannot call tools"
            self._record(recorder, role, request, "", status="error", error=message)
            raise LLMError("error", message)
        if "error" in turn:
            self._record(recorder, role, request, "", status=turn["error"], error=turn["message"])
            raise LLMError(turn["error"], turn["message"])
        content = turn["content"]
        if not content.strip():
            self._record(recorder, role, request, content, status="empty", error="empty content")
            raise LLMError("empty", f"the scripted {role.value} turn is empty")
        finish_reason = turn.get("finish_reason", "stop")
        if finish_reason == "length":
            self._record(
                recorder, role, request, content, status="truncated", error="cut by max_tokens"
            )
        else:
            self._record(recorder, role, request, content)
        return ModelText(content, finish_reason=finish_reason)

    def _fallback(self, role: Role, request: Any, recorder: CallRecorder) -> RoleAnswerer:
        if self.fallback is not None:
            return self.fallback
        message = f"no scripted {role.value} turn left and no fallback provider"
        self._record(recorder, role, request, "", status="error", error=message)
        raise LLMError("error", message)

    def _record(
        self,
        recorder: CallRecorder,
        role: Role,
        request: Any,
        raw: str,
        *,
        status: str = "ok",
        error: str = "",
    ) -> None:
        recorded = {"source": self.source, "request": _request_for_record(request)}
        recorder(
            role=role,
            provider=self.name,
            model="scripted",
            request=recorded,
            raw_response=raw,
            tokens_in=estimate_tokens(json.dumps(recorded, ensure_ascii=False, default=str)),
            tokens_out=estimate_tokens(raw),
            latency_ms=0,
            status=status,
            error=error,
        )
