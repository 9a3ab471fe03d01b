"""One OpenAI client per endpoint for the process: no CA bundle loaded per role per session."""

from diagnosis.llm.openai_provider import OpenAIProvider


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
