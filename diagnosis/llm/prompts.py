"""The one prompt loader: ``prompts/<name>.md`` with ``{{ name }}`` placeholders.

Double braces never clash with the JSON examples in the prompt text (single
braces). Substitution is a single pass, so a value that itself contains
``{{ x }}`` (a question, a log line) is inserted literally, never expanded.
A role's file holds the system prompt, then a line ``<!-- user -->``, then the
user message; ``prompt_messages`` splits it.

What a prompt says about the tools comes from the tool registry
(``diagnosis.evidence.tools``): the loader fills these variables itself, so no caller
passes them and a new tool needs no prompt edit:

- ``{{ tool_catalogue }}``: one line per tool, ``- `name`: purpose (arguments: a, b)``;
- ``{{ tool_names }}``: the names as a JSON list;
- ``{{ evidence_tools }}``: the evidence tools' names, ```a`` or ``b```;
- ``{{ knowledge_tools }}``: the knowledge tools' names, the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from diagnosis.evidence.tools import tool_definitions
from diagnosis.evidence.tools.base import ToolDefinition

USER_MARKER = "<!-- user -->"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
REGISTRY_VARIABLES = frozenset(
    {"tool_catalogue", "tool_names", "evidence_tools", "knowledge_tools"}
)


class PromptError(Exception):
    """A prompt that cannot be rendered: unknown file, missing or unknown variable."""


def prompts_dir() -> Path:
    return Path(getattr(settings, "PROMPTS_DIR", settings.BASE_DIR / "prompts"))


@lru_cache(maxsize=32)
def _template(path: Path, mtime_ns: int) -> tuple[str, frozenset[str]]:
    text = path.read_text(encoding="utf-8")
    names = frozenset(_PLACEHOLDER.findall(text))
    leftover = _PLACEHOLDER.sub("", text)
    if "{{" in leftover or "}}" in leftover:
        raise PromptError(f"prompt {path.name}: malformed placeholder (use {{{{ name }}}})")
    return text, names


def _load(name: str) -> tuple[str, frozenset[str]]:
    if not _NAME.match(name):
        raise PromptError(f"invalid prompt name {name!r}")
    path = prompts_dir() / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"prompt {name!r} not found at {path}")
    return _template(path, path.stat().st_mtime_ns)


def prompt_variables(name: str) -> frozenset[str]:
    """The variables a caller passes to a prompt: its placeholders but the registry's."""
    return _load(name)[1] - REGISTRY_VARIABLES


def _names_text(definitions: list[ToolDefinition]) -> str:
    names = [f"`{d.name}`" for d in definitions]
    return " or ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " or " + names[-1]


def _registry_values() -> dict[str, str]:
    """The values of ``REGISTRY_VARIABLES``, from the tools registered now."""
    definitions = list(tool_definitions())
    catalogue = [
        f"- `{d.name}`: {d.purpose or d.description} "
        f"(arguments: {', '.join(a.name for a in d.args)})"
        for d in definitions
    ]
    return {
        "tool_catalogue": "\n".join(catalogue),
        "tool_names": json.dumps([d.name for d in definitions]),
        "evidence_tools": _names_text([d for d in definitions if d.kind == "evidence"]),
        "knowledge_tools": _names_text([d for d in definitions if d.kind == "knowledge"]),
    }


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _checked_values(name: str, variables: dict[str, Any]) -> tuple[str, dict[str, str]]:
    text, used = _load(name)
    names = used - REGISTRY_VARIABLES
    missing = sorted(names - variables.keys())
    if missing:
        raise PromptError(f"prompt {name!r}: missing variable(s) {', '.join(missing)}")
    unknown = sorted(variables.keys() - names)
    if unknown:
        raise PromptError(
            f"prompt {name!r}: unknown variable(s) {', '.join(unknown)}; "
            f"the file uses {', '.join(sorted(names)) or 'none'}"
        )
    values = {key: _as_text(value) for key, value in variables.items()}
    if used & REGISTRY_VARIABLES:
        own = _registry_values()
        values.update({key: own[key] for key in used & REGISTRY_VARIABLES})
    return text, values


def _substitute(text: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def prompt_render(name: str, **variables: Any) -> str:
    """Render ``prompts/<name>.md``; every placeholder must be given, and nothing else.

    Strings are inserted as they are; anything else (dicts, lists, None, pydantic
    models) as indented JSON.
    """
    text, values = _checked_values(name, variables)
    return _substitute(text, values)


def prompt_messages(name: str, **variables: Any) -> list[dict[str, str]]:
    """A role prompt as chat messages: the system part, then the user part."""
    text, values = _checked_values(name, variables)
    # Split the template, not the rendered text: a value may contain the marker.
    if USER_MARKER not in text:
        raise PromptError(f"prompt {name!r} has no {USER_MARKER} line")
    system_part, user_part = text.split(USER_MARKER, 1)
    return [
        {"role": "system", "content": _substitute(system_part, values).strip()},
        {"role": "user", "content": _substitute(user_part, values).strip()},
    ]


# --- what every role's prompt shows ---------------------------------------------

# What a prompt says when it lists only some of a large fleet's services.
SERVICES_NOT_LISTED_NOTE = (
    "the environment has more services than listed here; a query_metrics or query_logs "
    "call without a service ranks all of them"
)


def prompt_services(
    services: Sequence[str], *, first: Iterable[str] = (), text: str = ""
) -> list[str] | dict[str, Any]:
    """The known services as a prompt shows them: all of them up to
    ``LLM_PROMPT_SERVICES_MAX``; past that the ones ``first`` names and the ones ``text``
    (the question) names, then the rest in order up to the bound, and how many are left out
    (a 1,000-service fleet's names would fill a small model's context on every turn)."""
    limit = int(settings.LLM_PROMPT_SERVICES_MAX)
    if len(services) <= limit:
        return list(services)
    lowered = text.lower()
    named = [service for service in services if service and service.lower() in lowered]
    shown = list(dict.fromkeys([*first, *named, *services]))[:limit]
    return {
        "listed": shown,
        "not_listed": len(set(services) - set(shown)),
        "note": SERVICES_NOT_LISTED_NOTE,
    }
