"""A run records why a model's answer did not parse as a code; reviewers read it in their
page's language, and the retry context numbers evidence from 1 as the pages do."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from diagnosis.llm.base import Role
from tests.flow.conftest import QUERY_LOGS, executor_json, log_claim, verifier_json

RECORDED_IN_ENGLISH = "（原文：英文）"
CUT_PLAN = {"content": '{"plan_version": "planner_v1", "services": ["payment-service"'}


def _page(client, session, language: str, admin: bool = False) -> str:
    client.cookies["django_language"] = language
    if admin:
        url = reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    else:
        url = reverse("audit:session_read", args=[session.public_id])
    return client.get(url).content.decode()


@pytest.fixture
def unparsed(run_scripted):
    """A run whose plan was cut off, whose Verifier answered an array and whose Executor
    answer holds a claim with a broken second binding and a dropped missing_info item."""
    claim = log_claim()
    claim["evidence_bindings"].append(7)
    return run_scripted(
        {
            "planner": [CUT_PLAN],
            "executor": [QUERY_LOGS, executor_json(claim, missing_info=["", "x"])],
            "verifier": [{"content": "[1, 2]"}],
            "composer": [{"content": "[1, 2]"}],
        }
    )


def test_a_run_stores_why_each_stage_answer_did_not_parse_as_a_code(unparsed):
    assert unparsed.plan["status"] == "truncated"
    assert unparsed.plan["detail_code"] == "output_truncated"
    verifier = unparsed.self_evaluation["verifier_evaluation"]
    assert (verifier["status"], verifier["detail_code"]) == ("not_an_object", "output_not_object")
    assert verifier["detail_params"] == {"type": "array"}
    claim = unparsed.self_evaluation["gatekeeper"]["claims"][0]
    assert [(f["binding"], f["detail_code"]) for f in claim["findings"]] == [
        (1, "binding_not_object")
    ]


@pytest.mark.parametrize(
    ("language", "expected", "absent"),
    [
        (
            "zh-hans",
            [
                "输出在 JSON 对象闭合前就被截断了",
                "输出的 JSON 值不是对象（JSON 类型：array）",
                "这条证据绑定不是对象：7",
                "missing_info 的第 1 项是空字符串，已丢弃",
                "JSON 不是对象",  # the Composer's answer, by its status
            ],
            ['class="rp-recorded" lang="en"', RECORDED_IN_ENGLISH],
        ),
        (
            "en",
            [
                "the output was cut off before its JSON object closed (max_tokens reached?)",
                "the JSON value is not an object (JSON type: array)",
                "this binding is not an object: 7",
                "item 1 of missing_info is an empty string; dropped",
            ],
            ["输出在 JSON 对象", "missing_info 的第", 'class="rp-recorded" lang="en"'],
        ),
    ],
)
def test_a_reviewer_reads_why_an_answer_did_not_parse_in_the_page_language(
    client, reviewer, unparsed, language, expected, absent
):
    client.force_login(reviewer)
    for admin in (False, True):
        page = _page(client, unparsed, language, admin=admin)
        for words in expected:
            assert words in page, (admin, words)
        for words in absent:
            assert words not in page, (admin, words)
    assert 'title="not_an_object: the JSON value is a list, not an object"' in page


def test_a_session_recorded_before_the_codes_shows_the_stage_detail_labelled(
    client, reviewer, unparsed
):
    unparsed.plan = {k: v for k, v in unparsed.plan.items() if not k.startswith("detail_")}
    unparsed.save()
    client.force_login(reviewer)
    page = _page(client, unparsed, "zh-hans")
    recorded = "the output was cut off before its JSON object closed (max_tokens?)"
    assert f'lang="en">{recorded}</small> <span class="recorded-in">{RECORDED_IN_ENGLISH}' in page


def test_the_retry_context_numbers_evidence_from_one_as_the_pages_do(run_scripted, settings):
    settings.DIAGNOSIS_MAX_RETRIES = 1
    claim = log_claim()
    claim["evidence_bindings"].append({**claim["evidence_bindings"][0], "source_id": "trace-9"})
    session = run_scripted(
        {
            "executor": [QUERY_LOGS, executor_json(claim), QUERY_LOGS, executor_json(log_claim())],
            "verifier": [verifier_json("RETRY"), verifier_json("LOW_CONFID")],
        }
    )
    asked = [req for role, req in session.provider.asked if role == Role.EXECUTOR]
    assert asked[0].retry_context is None and asked[-1].retry_context is not None
    [demoted] = asked[-1].retry_context["demoted_claims"]
    problems = " ".join(demoted["problems"])
    assert "unknown_source_id: evidence 2: " in problems
    assert "evidence 2 is invalid" in problems
    assert not re.search(r"binding \d", problems)
