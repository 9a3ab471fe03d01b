"""Nothing from a model or a tool is rendered as HTML."""

import pytest
from django.urls import reverse

from chat.templatetags.chat_tags import markdown
from tests.chat.factories import session_make

SCRIPT_LOG = (
    "payment-service ERROR x7 first 2026-03-02T10:22:05Z: "
    "Connection is not available <script>alert('pwned')</script> after 30000ms"
)


@pytest.mark.django_db
def test_log_text_containing_a_script_tag_shows_as_text(owner_client, conversation):
    session_make(
        conversation=conversation,
        log_line=SCRIPT_LOG,
        answer="连接池耗尽 <script>alert('answer')</script> <img src=x onerror=alert(1)>",
    )
    body = owner_client.get(
        reverse("chat:conversation_detail", args=[conversation.pk])
    ).content.decode()
    assert "<script>alert" not in body
    assert "<img src=x" not in body
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in body
    assert "&lt;script&gt;alert(&#x27;answer&#x27;)&lt;/script&gt;" in body or (
        "&lt;script&gt;alert('answer')&lt;/script&gt;" in body
    )


def test_markdown_keeps_raw_html_as_text_and_allows_only_http_links():
    html = markdown(
        "**粗体** <b>raw</b>\n\n[ok](https://example.com/runbook) [bad](javascript:alert(1)) "
        "[data](data:text/html,x) ![img](https://example.com/x.png)"
    )
    assert "<strong>粗体</strong>" in html
    assert "&lt;b&gt;raw&lt;/b&gt;" in html
    assert 'href="https://example.com/runbook"' in html
    assert 'rel="nofollow noopener noreferrer"' in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")
    assert 'href="javascript' not in html and 'href="data' not in html
    assert "<img" not in html


def test_markdown_of_nothing_is_empty():
    assert markdown(None) == ""
