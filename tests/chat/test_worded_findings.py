"""The chat's evidence panel says why a claim was set apart in the reader's language."""

from __future__ import annotations

import pytest
from django.urls import reverse

from .factories import session_recheck

INVENTED = {
    "claim_id": "c9",
    "claim_type": "symptom",
    "claim_text": "payment-service 的连接池耗尽",
    "support_level": "direct",
    "evidence_bindings": [
        {
            "source_type": "tool_trace",
            "source_id": "trace-99",
            "evidence_excerpt": "HikariPool-1 connection is not available",
        }
    ],
}


@pytest.fixture
def invented(answered):
    """The answered session re-checked with one claim citing an invocation it never made."""
    checks = [{"claim_id": "c9", "classification": "unsupported"}]
    return session_recheck(answered, claims=[INVENTED], checks=checks)


def _not_accepted(client, conversation):
    url = reverse("chat:conversation_detail", args=[conversation.pk])
    return client.get(url).content.decode().split('class="not-accepted"')[1]


def test_a_chinese_reader_is_told_in_chinese_that_the_cited_invocation_does_not_exist(
    owner_client, conversation, invented
):
    body = _not_accepted(owner_client, conversation)
    assert "本会话没有追踪引用为 trace-99 的调用" in body
    assert "no invocation of this session" not in body and "原文：英文" not in body


def test_an_english_reader_is_told_in_english(owner_client, conversation, invented):
    owner_client.post(reverse("set_language"), {"language": "en", "next": "/"})
    body = _not_accepted(owner_client, conversation)
    assert "no invocation of this session has trace ref trace-99" in body
    assert "recorded in English" not in body
