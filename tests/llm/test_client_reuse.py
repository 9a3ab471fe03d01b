"""One OpenAI client per endpoint for the process: no CA bundle loaded per role per session.

Per process, not shared across a fork: a Celery prefork child or a gunicorn --preload
worker builds its own instead of writing on its parent's sockets.
"""

import openai

from diagnosis.llm.openai_provider import OpenAIProvider
from tests.support.forking import forked_child_check
from tests.support.openai_server import Reply


def _provider(base_url: str, api_key: str = "k") -> OpenAIProvider:
    return OpenAIProvider(base_url=base_url, api_key=api_key, model="m")


def test_providers_of_one_endpoint_share_one_client():
    first = _provider("http://127.0.0.1:9/v1")._client_get()
    second = _provider("http://127.0.0.1:9/v1")._client_get()
    assert first is second


def test_another_endpoint_or_key_gets_its_own_client():
    base = _provider("http://127.0.0.1:9/v1")._client_get()
    assert _provider("http://127.0.0.1:10/v1")._client_get() is not base
    assert _provider("http://127.0.0.1:9/v1", api_key="other")._client_get() is not base


def _said(client: openai.OpenAI) -> str:
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content or ""


def _child_check(base_url: str, parent: openai.OpenAI) -> bool:
    own = _provider(base_url)._client_get()
    return own is not parent and own is _provider(base_url)._client_get() and _said(own) == "child"


def test_a_forked_child_builds_its_own_client_and_leaves_the_parents_alone(openai_server):
    openai_server.enqueue(Reply.text("parent"), Reply.text("child"), Reply.text("parent again"))
    parent = _provider(openai_server.base_url)._client_get()
    assert _said(parent) == "parent"  # the parent holds a live keep-alive connection
    assert forked_child_check(lambda: _child_check(openai_server.base_url, parent))
    assert _provider(openai_server.base_url)._client_get() is parent
    assert _said(parent) == "parent again"


def test_closing_a_provider_leaves_the_shared_client_open_for_the_others():
    first, second = _provider("http://127.0.0.1:9/v1"), _provider("http://127.0.0.1:9/v1")
    shared = first._client_get()
    first.close()
    assert not shared.is_closed()
    assert second._client_get() is shared
    assert first._client_get() is shared
