"""The evidence view links each fact of a claim to the excerpt that binds it (gatekeeper_v2)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from .factories import LOG_LINE, session_recheck

CLAIMS = [
    {
        "claim_id": "c1",
        "claim_type": "symptom",
        "claim_text": "payment-service 的连接池在 10:31 达到 50",
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": "trace-1",
                "evidence_excerpt": "window max 50 at 2026-03-02T10:31:00Z",
            }
        ],
    },
    {
        "claim_id": "c2",
        "claim_type": "symptom",
        "claim_text": "HikariPool-1 在 10:22 后报错 900 次",
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": "trace-2",
                "evidence_excerpt": LOG_LINE.split(": ", 1)[1][:60],
            }
        ],
    },
]


@pytest.fixture
def checked(answered):
    """The answered session re-checked by the real Gatekeeper v2."""
    checks = [
        {"claim_id": "c1", "classification": "direct_observation"},
        {"claim_id": "c2", "classification": "direct_observation"},
    ]
    return session_recheck(answered, claims=CLAIMS, checks=checks)


def _page(client, conversation):
    return client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()


def test_each_fact_of_an_allowed_claim_links_to_the_evidence_that_binds_it(
    owner_client, conversation, checked
):
    body = _page(owner_client, conversation)
    anchor = f"ev-{checked.public_id}-0-0"
    assert f'id="{anchor}"' in body
    assert f'<a class="fact fact-bound" href="#{anchor}">10:31</a>' in body
    assert f'<a class="fact fact-bound" href="#{anchor}">50</a>' in body
    # the service name is bound by the metric query's service argument
    assert f'<a class="fact fact-bound" href="#{anchor}">payment-service</a>' in body
    assert "由证据 1 所引调用的参数绑定" in body
    assert "由证据 1 的摘录绑定" in body


def test_a_demoted_claim_marks_its_unbound_facts_and_says_why_in_words(
    owner_client, conversation, checked
):
    body = _page(owner_client, conversation)
    not_accepted = body.split('class="not-accepted"')[1]
    assert '<span class="fact fact-unbound"' in not_accepted
    assert ">900</span>" in not_accepted and ">10:22</span>" in not_accepted
    assert ">HikariPool-1</span>" not in not_accepted  # that one is bound
    assert "陈述中的事实不在摘录中" in not_accepted
    assert "（“900”不在任何有效摘录中）" in not_accepted
    assert "证据不成立，列为缺口" in not_accepted


def test_the_fact_links_and_findings_read_in_english(owner_client, conversation, checked):
    owner_client.post(reverse("set_language"), {"language": "en", "next": "/"})
    body = _page(owner_client, conversation)
    assert "bound by the excerpt of evidence 1" in body
    assert "a fact it states is not in its excerpts" in body
    assert "(“900” is in no valid excerpt)" in body


def test_a_stored_v1_report_still_shows_its_claims_without_fact_links(
    owner_client, conversation, answered
):
    assert answered.self_evaluation["gatekeeper"]["gatekeeper_version"] == "gatekeeper_v2"
    evaluation = dict(answered.self_evaluation)
    evaluation["gatekeeper"] = {**evaluation["gatekeeper"], "gatekeeper_version": "gatekeeper_v1"}
    answered.self_evaluation = evaluation
    answered.save()
    body = _page(owner_client, conversation)
    assert "payment-service 的数据库连接池在 10:22 后打满（50/50）" in body
    assert "fact-bound" not in body and 'class="facts"' not in body
