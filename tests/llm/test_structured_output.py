"""Structured output: the contract's schema first, then weaker forms, remembered per endpoint."""

from __future__ import annotations

import json

import pytest

from diagnosis.contracts import (
    ComposerOutput,
    ExecutorEvidenceV2,
    PlannerOutput,
    VerifierOutput,
)
from diagnosis.llm.base import Role
from diagnosis.llm.openai_provider import OpenAIProvider
from diagnosis.llm.schemas import (
    LIST_MAX_ITEMS,
    bounded_schema,
    contract_response_schema,
    contract_schema,
    schema_cost,
)
from diagnosis.models import LLMCall
from tests.llm.requests import planner_request, verifier_payload
from tests.llm_server.server import ROLE_MAX_TOKENS as LOCAL_MODEL_MAX_TOKENS
from tests.support.agents import ROLE_CONTRACTS, agent_answer
from tests.support.openai_server import FakeOpenAIServer, Reply, response_format_kind

PLAN = {"plan_version": "planner_v1", "services": ["payment-service"], "tools": ["query_logs"]}
VERDICT = {"verifier_version": "verifier_v2", "decision": "LOW_CONFID", "claim_checks": []}


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@pytest.mark.parametrize(
    "contract", [PlannerOutput, ExecutorEvidenceV2, VerifierOutput, ComposerOutput]
)
def test_each_contract_schema_is_closed_fully_required_and_free_of_refs(contract):
    schema = contract_schema(contract)

    nodes = list(_walk(schema))
    assert not any("$ref" in n or "$defs" in n or "title" in n or "default" in n for n in nodes)
    objects = [n for n in nodes if isinstance(n.get("properties"), dict)]
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    # the contract's own shape: no bounds of ours (those are bounded_schema's)
    assert not any("maxLength" in n or "maxItems" in n for n in nodes)


FREE_STRING_BLOCKERS = {"enum", "const", "format", "pattern"}


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("budgets", ["local model", "defaults"])
def test_a_bounded_schema_bounds_every_list_and_free_string_and_fits_the_budget(
    role, budgets, settings
):
    # the budgets of the real-server tests (and bench/local_model.py), and the defaults
    budget = (
        LOCAL_MODEL_MAX_TOKENS
        if budgets == "local model"
        else settings.LLM_ROLE_MAX_TOKENS_DEFAULTS
    )
    max_tokens = budget[role.value]
    contract = ROLE_CONTRACTS[role]
    schema = bounded_schema(contract, max_tokens)

    nodes = list(_walk(schema))
    for array in (n for n in nodes if n.get("type") == "array"):
        assert 1 <= array["maxItems"] <= LIST_MAX_ITEMS
    for string in (n for n in nodes if n.get("type") == "string"):
        assert FREE_STRING_BLOCKERS & string.keys() or string["maxLength"] >= 8
    assert schema_cost(schema) <= max_tokens
    # the same closed shape as the contract's, only bounded
    assert {k for n in nodes for k in n} - {"maxItems", "maxLength"} <= {
        k for n in _walk(contract_schema(contract)) for k in n
    }


def test_a_bigger_budget_allows_longer_strings_and_the_composer_a_whole_answer():
    def lengths(schema):
        return {n["maxLength"] for n in _walk(schema) if "maxLength" in n}

    small, large = bounded_schema(VerifierOutput, 384), bounded_schema(VerifierOutput, 2048)
    assert max(lengths(small)) < max(lengths(large))
    (answer,) = lengths(bounded_schema(ComposerOutput, 320))
    assert 250 <= answer < 320


def test_a_budget_too_small_for_the_contract_still_gives_a_bounded_schema():
    schema = bounded_schema(ExecutorEvidenceV2, 24)

    assert {n["maxItems"] for n in _walk(schema) if "maxItems" in n} == {1}
    assert schema_cost(schema) > 24  # the reply will be cut, and parse as truncated


def test_llama_cpp_compiles_the_bounds_into_its_grammar():
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    schema = bounded_schema(VerifierOutput, 384)
    gbnf = grammar.json_schema_to_gbnf(json.dumps(schema))
    unbounded = grammar.json_schema_to_gbnf(json.dumps(contract_schema(VerifierOutput)))

    assert "char*" in unbounded and "char*" not in gbnf  # every string bounded
    assert '"," space' in gbnf


def test_the_executor_schema_offers_only_the_documented_claim_types_and_levels():
    schema = contract_schema(ExecutorEvidenceV2)
    claim = schema["properties"]["claims"]["items"]["properties"]

    assert "other" not in claim["claim_type"]["enum"]
    assert "root_cause" in claim["claim_type"]["enum"]
    assert claim["support_level"]["enum"] == ["direct", "indirect", "none"]


def test_the_schema_is_named_by_the_contract_version_and_short_answers_still_validate():
    # The schema shapes output; the contract (tolerant of missing optional fields) decides.
    names = [contract_response_schema(ROLE_CONTRACTS[role])[0] for role in Role]
    assert names == ["planner_v1", "executor_evidence_v2", "verifier_v2", "composer_v1"]
    assert PlannerOutput.model_validate(PLAN).services == ["payment-service"]
    assert VerifierOutput.model_validate(VERDICT).decision == "LOW_CONFID"


@pytest.fixture
def server_accepting(openai_settings):
    """A fake server; the roles bound their schemas to the budget (LLM_SCHEMA_BOUNDS=fit),
    so the whole ladder is there to walk."""
    started: list[FakeOpenAIServer] = []

    def start(**kwargs) -> FakeOpenAIServer:
        server = FakeOpenAIServer(**kwargs).start()
        started.append(server)
        for role in openai_settings.LLM_ROLE_SETTINGS.values():
            role["base_url"] = server.base_url
            role.setdefault("schema_bounds", "fit")
        return server

    yield start
    for server in started:
        server.stop()


def _provider(role: Role) -> OpenAIProvider:
    return OpenAIProvider.for_role(role, backoff_base=0.001, sleep=lambda _s: None)


def test_a_server_without_json_schema_gets_the_schema_inside_json_object_and_that_is_remembered(
    server_accepting, recorder, session
):
    # llama-cpp-python's server: json_schema is refused, json_object with a schema compiles
    server = server_accepting(response_formats={"json_object_schema", "json_object"})
    server.enqueue(Reply.text(PLAN), Reply.text(VERDICT))

    agent_answer(_provider(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)
    # another role, another provider instance: the endpoint's refusal is already known
    agent_answer(_provider(Role.VERIFIER), Role.VERIFIER, verifier_payload(), recorder=recorder)

    kinds = [response_format_kind(r["response_format"]) for r in server.chat_requests]
    # the bounded schema, the contract's own, then the bounded one inside json_object
    assert kinds == ["json_schema", "json_schema", "json_object_schema", "json_object_schema"]
    first, unbounded = (r["response_format"]["json_schema"] for r in server.chat_requests[:2])
    assert first["schema"] == bounded_schema(PlannerOutput, 512)
    assert unbounded["schema"] == contract_schema(PlannerOutput)
    schema = server.chat_requests[-1]["response_format"]["schema"]
    assert schema == bounded_schema(VerifierOutput, 512)
    rows = list(LLMCall.objects.filter(session=session).order_by("sequence"))
    assert [r.status for r in rows] == ["rejected", "rejected", "ok", "ok"]
    assert rows[2].request["response_format"] == {
        "type": "json_object",
        "schema": "<contract schema>",
    }


@pytest.mark.parametrize(
    ("accepted", "sent"),
    [
        pytest.param(
            {"json_object"}, ["json_schema", "json_schema", "json_object_schema", "json_object"]
        ),
        pytest.param(
            set(), ["json_schema", "json_schema", "json_object_schema", "json_object", None]
        ),
    ],
)
def test_the_ladder_ends_in_json_object_or_plain_prompting(
    server_accepting, recorder, session, accepted, sent
):
    server = server_accepting(response_formats=accepted)
    server.enqueue(Reply.text(PLAN), Reply.text(PLAN))
    provider = _provider(Role.PLANNER)

    first = agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)
    second = agent_answer(provider, Role.PLANNER, planner_request(), recorder=recorder)

    assert json.loads(first) == json.loads(second) == PLAN
    kinds = [
        response_format_kind(r["response_format"]) if "response_format" in r else None
        for r in server.chat_requests
    ]
    assert kinds == [*sent, sent[-1]]  # the second call starts where the first ended


def test_a_server_that_rejects_every_response_format_the_old_way_is_asked_without_one(
    server_accepting, recorder, session
):
    server = server_accepting(reject_response_format=True)
    server.enqueue(Reply.text(PLAN))

    agent_answer(_provider(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    sent = ["response_format" in r for r in server.chat_requests]
    assert sent == [True, True, True, True, False]


def test_json_object_as_the_configured_start_never_sends_a_schema(
    server_accepting, openai_settings, recorder, session
):
    openai_settings.LLM_ROLE_SETTINGS["planner"]["response_format"] = "json_object"
    server = server_accepting()
    server.enqueue(Reply.text(PLAN))

    agent_answer(_provider(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    assert server.chat_requests[0]["response_format"] == {"type": "json_object"}


def test_each_role_sends_its_own_max_tokens(server_accepting, openai_settings, recorder, session):
    openai_settings.LLM_ROLE_SETTINGS["planner"]["max_tokens"] = 300
    openai_settings.LLM_ROLE_SETTINGS["verifier"]["max_tokens"] = 900
    server = server_accepting()
    server.enqueue(Reply.text(PLAN), Reply.text(VERDICT))

    agent_answer(_provider(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)
    agent_answer(_provider(Role.VERIFIER), Role.VERIFIER, verifier_payload(), recorder=recorder)

    assert [r["max_tokens"] for r in server.chat_requests] == [300, 900]


def test_role_budgets_default_to_sizes_fitted_to_each_contract(settings):
    defaults = settings.LLM_ROLE_MAX_TOKENS_DEFAULTS

    assert defaults["planner"] < defaults["verifier"] < defaults["executor"]
    assert max(defaults.values()) < 4096


def test_without_schema_bounds_the_contract_schema_is_sent_as_it_is(
    server_accepting, openai_settings, recorder, session
):
    # the default (LLM_SCHEMA_BOUNDS=off): a capable model's claims are never shortened
    openai_settings.LLM_ROLE_SETTINGS["planner"]["schema_bounds"] = "off"
    server = server_accepting(response_formats={"json_object_schema", "json_object"})
    server.enqueue(Reply.text(PLAN))

    agent_answer(_provider(Role.PLANNER), Role.PLANNER, planner_request(), recorder=recorder)

    kinds = [response_format_kind(r["response_format"]) for r in server.chat_requests]
    assert kinds == ["json_schema", "json_object_schema"]  # no bounded level to try first
    assert server.chat_requests[0]["response_format"]["json_schema"]["schema"] == (
        contract_schema(PlannerOutput)
    )
    assert server.chat_requests[1]["response_format"]["schema"] == contract_schema(PlannerOutput)


def test_schema_bounds_default_to_off(settings):
    assert settings.LLM_SCHEMA_BOUNDS == "off"
    assert {r["schema_bounds"] for r in settings.LLM_ROLE_SETTINGS.values()} == {"off"}
