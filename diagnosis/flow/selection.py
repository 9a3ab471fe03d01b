"""Which agent answers each role of a session: a chat model (``openai``) or an answerer
(``offline``, ``scripted``), from ``LLM_<ROLE>_PROVIDER``-style settings."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from diagnosis.llm.base import Agent, Role, RoleAnswerer
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.llm.scripted import ScriptedProvider
from diagnosis.models import DiagnosisSession
from diagnosis.offline import OfflineEngine


def _offline() -> RoleAnswerer:
    return OfflineEngine()


def agents_for_session(
    *, session: DiagnosisSession, provider: str | None = None
) -> dict[Role, Agent]:
    """One provider per role, from ``LLM_ROLE_SETTINGS`` or the ``provider`` override.

    Call it once per flow run: a scripted provider consumes its turns across the
    whole session (a RETRY gets the next Executor turns), so it must not be
    rebuilt between attempts. Roles that share a provider kind share one instance.
    """
    if provider is not None and provider not in settings.LLM_PROVIDERS:
        known = ", ".join(settings.LLM_PROVIDERS)
        raise ImproperlyConfigured(f"unknown LLM provider {provider!r}; expected one of {known}")
    shared: dict[str, RoleAnswerer] = {}

    def offline() -> RoleAnswerer:
        if "offline" not in shared:
            shared["offline"] = _offline()
        return shared["offline"]

    def scripted() -> RoleAnswerer:
        if "scripted" not in shared:
            pack_path = session.environment.pack_path
            folder = Path(pack_path) / "scripted" if pack_path else None
            if folder is None:
                shared["scripted"] = ScriptedProvider(fallback=offline(), source="no pack")
            else:
                shared["scripted"] = ScriptedProvider.from_folder(folder, fallback=offline())
        return shared["scripted"]

    agents: dict[Role, Agent] = {}
    for role in Role:
        name = provider or settings.LLM_ROLE_SETTINGS.get(role.value, {}).get(
            "provider", settings.LLM_PROVIDER
        )
        if name == "openai":
            agents[role] = OpenAIProvider.for_role(role)
        elif name == "scripted":
            agents[role] = scripted()
        elif name == "offline":
            agents[role] = offline()
        else:
            raise ImproperlyConfigured(f"unknown LLM provider {name!r} for the {role.value}")
    return agents
