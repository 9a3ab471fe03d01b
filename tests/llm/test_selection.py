"""Which provider answers each role of a session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from diagnosis.flow import selection
from diagnosis.llm.base import Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.llm.scripted import ScriptedProvider
from tests.llm.requests import planner_request


@pytest.fixture
def offline_stub(monkeypatch, stub_provider):
    monkeypatch.setattr(selection, "_offline", lambda: stub_provider)
    return stub_provider


def _role_settings(settings, **providers):
    settings.LLM_ROLE_SETTINGS = {
        role: {
            "provider": providers.get(role, settings.LLM_PROVIDER),
            "base_url": "",
            "api_key": "",
            "model": "gpt-4o-mini",
        }
        for role in settings.LLM_ROLES
    }


def test_openai_roles_get_an_openai_provider_built_from_their_role_settings(
    openai_settings, session
):
    agents = selection.agents_for_session(session=session)

    assert all(isinstance(agent, OpenAIProvider) for agent in agents.values())
    assert agents[Role.VERIFIER].model == "fake-verifier-model"
    assert agents[Role.PLANNER].base_url == openai_settings.LLM_BASE_URL


def test_openai_without_a_base_url_or_key_is_improperly_configured(settings, session):
    settings.LLM_PROVIDER = "openai"
    _role_settings(settings)

    with pytest.raises(ImproperlyConfigured, match="LLM_BASE_URL"):
        selection.agents_for_session(session=session)


def test_openai_with_only_a_key_uses_the_sdk_default_endpoint(settings, session):
    settings.LLM_PROVIDER = "openai"
    _role_settings(settings)
    for role_settings in settings.LLM_ROLE_SETTINGS.values():
        role_settings["api_key"] = "sk-only-a-key-0000"

    agents = selection.agents_for_session(session=session)

    assert agents[Role.PLANNER].base_url is None


def test_scripted_reads_the_pack_folder_and_falls_back_to_offline(
    settings, session, environment, offline_stub, recorder
):
    settings.LLM_PROVIDER = "scripted"
    _role_settings(settings)
    scripted = Path(environment.pack_path) / "scripted"
    scripted.mkdir(parents=True)
    (scripted / "planner.json").write_text(
        json.dumps({"content": '{"plan_version": "planner_v1", "notes": "from the pack"}'})
    )

    agents = selection.agents_for_session(session=session)

    assert isinstance(agents[Role.PLANNER], ScriptedProvider)
    assert len({id(agent) for agent in agents.values()}) == 1  # one instance: turns are shared
    planner = agents[Role.PLANNER]
    assert "from the pack" in planner.answer(Role.PLANNER, planner_request(), recorder=recorder)
    assert planner.answer(Role.PLANNER, planner_request(), recorder=recorder) == (
        offline_stub.answer(Role.PLANNER, planner_request(), recorder=recorder)
    )


def test_the_provider_override_wins_over_the_settings(openai_settings, session, offline_stub):
    agents = selection.agents_for_session(session=session, provider="offline")

    assert set(agents.values()) == {offline_stub}


def test_roles_can_use_different_providers(openai_settings, session, offline_stub):
    openai_settings.LLM_ROLE_SETTINGS["composer"]["provider"] = "offline"

    agents = selection.agents_for_session(session=session)

    assert isinstance(agents[Role.EXECUTOR], OpenAIProvider)
    assert agents[Role.COMPOSER] is offline_stub


def test_an_unknown_provider_is_improperly_configured(session):
    with pytest.raises(ImproperlyConfigured, match="unknown LLM provider 'claude'"):
        selection.agents_for_session(session=session, provider="claude")


def test_with_no_configuration_every_role_is_the_offline_engine(settings, session):
    offline = pytest.importorskip("diagnosis.offline")
    settings.LLM_PROVIDER = "offline"
    _role_settings(settings)

    agents = selection.agents_for_session(session=session)

    assert all(isinstance(agent, offline.OfflineEngine) for agent in agents.values())
    assert len({id(agent) for agent in agents.values()}) == 1


def test_every_role_has_its_settings_and_every_setting_its_role(settings):
    """A new role without its LLM_<ROLE>_* settings would have no endpoint and no budget."""
    roles = {role.value for role in Role}
    assert set(settings.LLM_ROLES) == roles
    assert set(settings.LLM_ROLE_MAX_TOKENS_DEFAULTS) == roles
    assert set(settings.LLM_ROLE_SETTINGS) == roles
