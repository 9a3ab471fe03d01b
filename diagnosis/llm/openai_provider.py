"""The ``openai`` provider: Chat Completions against any OpenAI-compatible endpoint.

The SDK's own retries are off (``max_retries=0``) so that every attempt is one
recorded LLMCall row and the backoff is ours: exponential with jitter on 429,
5xx, timeouts and connection errors, at most ``LLM_MAX_RETRIES`` retries. No SDK
exception leaves this module other than as ``LLMError``.

Real servers differ, so the provider adapts and remembers per endpoint (base URL)
for the life of the process:

- Structured output goes down a ladder: ``json_schema`` (the contract's schema,
  ``diagnosis.llm.schemas``, its lists and strings bounded to fit the call's
  ``max_tokens``), the same schema without those bounds (for servers whose strict
  mode refuses length keywords), ``json_object`` carrying the bounded schema (the
  form llama-cpp-python compiles into a grammar), plain ``json_object``, then plain
  prompting. A refused level is not asked for again.
- ``tool_choice: "required"`` (first Executor turn only) falls back to ``auto``
  on a server that refuses it.
- Tool calls are read tolerantly: arguments as a JSON string (raw control
  characters allowed, JSON-in-a-string unwrapped), as an object, or missing; ids
  missing; several calls a turn; an unknown tool becomes an error invocation.
- Tool results go back as ``tool`` messages, or as ``user`` messages for a server
  that refuses the ``tool`` role (``LLM_TOOL_RESULT_ROLE=user``).

It is a transport (``diagnosis.llm.base.ChatModel``): one ``chat`` call, retried and
recorded here; the messages, the Executor's tool loop and what counts as an answer
are the flow's (``diagnosis.flow``). A reply carries its ``finish_reason``, so the
parser knows one cut by ``max_tokens``.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

from diagnosis.llm.base import CallRecorder, ChatReply, LLMError, Role, ToolCall
from diagnosis.llm.schemas import contract_response_schema
from diagnosis.per_process import per_process
from diagnosis.tokens import estimate_tokens

PROVIDER_NAME = "openai"
CHAT_COMPLETIONS_PATH = "/chat/completions"
# A Retry-After above this is not "small": we use our own backoff instead.
RETRY_AFTER_MAX_SECONDS = 30.0
_RETRYABLE_STATUS = {408, 409, 429}
# Local servers (Ollama, vLLM, llama.cpp) need no key, but the SDK insists on one.
_NO_KEY = "not-needed"

# The structured-output ladder, strongest first; "json_schema_unbounded" is the contract's
# schema without our maxItems/maxLength; "json_object_schema" is
# {"type": "json_object", "schema": …}, llama-cpp-python's own form.
_FORMAT_LADDERS = {
    "json_schema": (
        "json_schema",
        "json_schema_unbounded",
        "json_object_schema",
        "json_object",
        "none",
    ),
    "json_object": ("json_object", "none"),
    "none": ("none",),
}
# Words in an error body that say the server refused the response_format or the
# tool_choice we sent (rather than failing for another reason).
_FORMAT_WORDS = ("response_format", "json_schema", "schema", "grammar", "json_object")
_TOOL_CHOICE_WORDS = ("tool_choice", "required")
_REFUSAL_STATUS = {400, 422, 500, 501}

# What each endpoint (base URL) refused, for the life of the process.
_refused_formats: dict[str, set[str]] = {}
_refused_required: set[str] = set()
_capabilities_lock = threading.Lock()


def endpoint_capabilities_forget() -> None:
    """Forget what endpoints refused (a new deployment, or between tests)."""
    with _capabilities_lock:
        _refused_formats.clear()
        _refused_required.clear()


@per_process(maxsize=32)
def _client_shared(*, base_url: str | None, api_key: str, timeout: float) -> openai.OpenAI:
    """One client (one connection pool) per endpoint for the process.

    A client per provider instance built an SSL context and loaded the CA bundle for
    every role of every session: about 0.1 s each, most of a session's non-model time.
    The SDK's client is safe to share between threads, not between processes: one built
    before a fork (a Celery prefork master, gunicorn ``--preload``) would have the
    children write on the parent's sockets, so each process builds its own.
    """
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


@dataclass
class _Attempt:
    """One HTTP attempt: what to record, and what to do next."""

    status: str
    raw: str = ""
    error: str = ""
    reply: ChatReply | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    retryable: bool = False
    retry_after: float | None = None
    format_rejected: bool = False
    tool_choice_rejected: bool = False


def _retry_after_seconds(headers: Any) -> float | None:
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


# A grammar-constrained server (llama-cpp-python's chatml-function-calling generates tool
# arguments with no token limit) lets a model write a string argument forever; every free
# string argument is bounded in the schema sent, which no sane argument reaches.
TOOL_ARGUMENT_MAX_CHARS = 500
_FREE_STRING_KEYS = {"enum", "const", "format", "pattern", "maxLength"}


def _bounded_strings(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_bounded_strings(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: _bounded_strings(value) for key, value in schema.items()}
    if bounded.get("type") == "string" and not _FREE_STRING_KEYS & bounded.keys():
        bounded["maxLength"] = TOOL_ARGUMENT_MAX_CHARS
    return bounded


def _function_spec(spec: dict[str, Any]) -> dict[str, Any]:
    wrapped = spec if spec.get("type") == "function" and "function" in spec else None
    function = dict((wrapped or {"function": spec})["function"])
    if isinstance(function.get("parameters"), dict):
        function["parameters"] = _bounded_strings(function["parameters"])
    return {"type": "function", "function": function}


def _tool_name(spec: dict[str, Any]) -> str:
    return str(spec.get("function", {}).get("name", "?"))


def _endpoint(base_url: str | None) -> str:
    return (base_url or "default").rstrip("/")


def _response_format(
    level: str, schema: type[BaseModel], max_tokens: int | None
) -> dict[str, Any] | None:
    """The ``response_format`` of a ladder level; the schema's bounds fit ``max_tokens``
    (``None``: the contract's schema unbounded)."""
    if level == "none":
        return None
    if level == "json_object":
        return {"type": "json_object"}
    bound = None if level == "json_schema_unbounded" else max_tokens
    name, body = contract_response_schema(schema, bound)
    if level == "json_object_schema":
        return {"type": "json_object", "schema": body}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": body, "strict": True}}


def _recorded_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """The response_format as stored on the LLMCall row: the schema by name only."""
    recorded = dict(response_format)
    if "schema" in recorded:
        recorded["schema"] = "<contract schema>"
    if isinstance(recorded.get("json_schema"), dict):
        recorded["json_schema"] = {
            k: v for k, v in recorded["json_schema"].items() if k != "schema"
        }
    return recorded


class OpenAIProvider:
    """One endpoint and model; ``for_role`` builds it from ``LLM_ROLE_SETTINGS``."""

    name = PROVIDER_NAME

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        max_tokens: int | None = None,
        tool_choice: str | None = None,
        response_format: str | None = None,
        tool_result_role: str | None = None,
        schema_bounds: str | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url or None
        self._api_key = api_key or _NO_KEY
        self.model = model
        self.max_tokens = max_tokens or settings.LLM_MAX_TOKENS
        self.tool_choice = tool_choice or settings.LLM_TOOL_CHOICE
        self.response_format = response_format or settings.LLM_RESPONSE_FORMAT
        self.tool_result_role = tool_result_role or settings.LLM_TOOL_RESULT_ROLE
        self.schema_bounds = schema_bounds or settings.LLM_SCHEMA_BOUNDS
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._client: openai.OpenAI | None = None
        self._endpoint = _endpoint(self.base_url)

    def __repr__(self) -> str:  # never the key
        return f"OpenAIProvider(base_url={self.base_url!r}, model={self.model!r})"

    @classmethod
    def for_role(cls, role: Role | str, **kwargs: Any) -> OpenAIProvider:
        role = Role(role)
        config: dict[str, Any] = dict(settings.LLM_ROLE_SETTINGS.get(role.value, {}))
        base_url = str(config.get("base_url") or "")
        api_key = str(config.get("api_key") or "")
        if not base_url and not api_key:
            upper = role.value.upper()
            raise ImproperlyConfigured(
                f"The openai provider for the {role.value} needs an endpoint: set LLM_BASE_URL "
                f"(or LLM_{upper}_BASE_URL) to an OpenAI-compatible server, and LLM_API_KEY "
                f"if it needs one; or use LLM_PROVIDER=offline."
            )
        options = {
            key: config.get(key)
            for key in (
                "max_tokens",
                "tool_choice",
                "response_format",
                "tool_result_role",
                "schema_bounds",
            )
        }
        return cls(
            base_url=base_url or None,
            api_key=api_key,
            model=str(config.get("model") or settings.LLM_MODEL),
            **{**options, **kwargs},
        )

    def close(self) -> None:
        # The client is the process's, shared by every provider of this endpoint: closing
        # it would break theirs, so this provider only lets go of it.
        self._client = None

    # --- what this endpoint accepts (shared by every provider of the process) ------

    def format_level(self) -> str:
        """The strongest structured-output level this endpoint has not refused."""
        ladder = _FORMAT_LADDERS.get(self.response_format, _FORMAT_LADDERS["json_schema"])
        if self.schema_bounds != "fit":  # the bounded level is the contract's schema as is
            ladder = tuple(level for level in ladder if level != "json_schema")
        with _capabilities_lock:
            refused = _refused_formats.get(self._endpoint, set())
            return next((level for level in ladder if level not in refused), "none")

    def _format_refused(self, level: str) -> None:
        with _capabilities_lock:
            _refused_formats.setdefault(self._endpoint, set()).add(level)

    def _tool_choice_sent(self, tool_choice: str) -> str:
        """``required`` unless this endpoint refused it before (then ``auto``)."""
        if tool_choice == "required":
            with _capabilities_lock:
                if self._endpoint in _refused_required:
                    return "auto"
        return tool_choice

    def _messages_sent(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool results as ``user`` messages for a server that refuses the ``tool`` role."""
        if self.tool_result_role != "user":
            return messages
        return [
            {"role": "user", "content": m.get("content", "")} if m.get("role") == "tool" else m
            for m in messages
        ]

    # --- one model call, with retries -----------------------------------------

    def _client_get(self) -> openai.OpenAI:
        if self._client is None:
            self._client = _client_shared(
                base_url=self.base_url, api_key=self._api_key, timeout=settings.LLM_TIMEOUT_SECONDS
            )
        return self._client

    def _backoff(self, failures: int, retry_after: float | None) -> float:
        if retry_after is not None and 0 <= retry_after <= RETRY_AFTER_MAX_SECONDS:
            return retry_after
        delay = min(self.backoff_max, self.backoff_base * 2 ** (failures - 1))
        return delay * random.uniform(0.5, 1.0)

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        role: Role,
        recorder: CallRecorder,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str = "auto",
        schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """One model call, recorded under ``role``, retried on what may pass; ``schema``
        asks for an answer to that contract. With ``tools``, a reply without calls or
        content is returned (the model chose to stop); without, it is an ``empty`` error."""
        failures = 0
        required_refused = False
        max_tokens = max_tokens or self.max_tokens
        tools = [_function_spec(spec) for spec in tools] if tools else None
        tool_choice = self._tool_choice_sent(tool_choice) if tools else tool_choice
        messages = self._messages_sent(messages)
        while True:
            level = self.format_level() if schema is not None else "none"
            bound = max_tokens if self.schema_bounds == "fit" else None
            response_format = _response_format(level, schema, bound) if schema else None
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": settings.LLM_TEMPERATURE,
            }
            if tools:
                body["tools"] = tools
                body["tool_choice"] = tool_choice
            if response_format is not None:
                body["response_format"] = response_format
            started = time.monotonic()
            attempt = self._attempt(
                body, tools_offered=bool(tools), format_level=level, tool_choice=tool_choice
            )
            latency_ms = int((time.monotonic() - started) * 1000)
            recorded_request = dict(body)
            if tools:
                recorded_request["tools"] = [_tool_name(spec) for spec in tools]
            if response_format is not None:
                recorded_request["response_format"] = _recorded_format(response_format)
            recorder(
                role=role,
                provider=self.name,
                model=self.model,
                request=recorded_request,
                raw_response=attempt.raw,
                tokens_in=attempt.tokens_in,
                tokens_out=attempt.tokens_out,
                latency_ms=latency_ms,
                status=attempt.status,
                error=attempt.error,
            )
            if attempt.reply is not None:
                if required_refused:
                    with _capabilities_lock:
                        _refused_required.add(self._endpoint)
                return attempt.reply
            if attempt.format_rejected:
                self._format_refused(level)  # ask again at once, one level down
                continue
            if attempt.tool_choice_rejected and not required_refused:
                tool_choice, required_refused = "auto", True
                continue
            failures += 1
            if not attempt.retryable or failures > settings.LLM_MAX_RETRIES:
                raise LLMError(attempt.status, attempt.error)
            self._sleep(self._backoff(failures, attempt.retry_after))

    def _attempt(
        self, body: dict[str, Any], *, tools_offered: bool, format_level: str, tool_choice: str
    ) -> _Attempt:
        try:
            # The body as built, posted as is: ``chat.completions.create`` would first walk
            # it against the SDK's request types (the largest part of the SDK's own time
            # a call), and we read the raw JSON ourselves. The SDK's errors, headers and
            # timeout stay.
            content = self._client_get().post(
                CHAT_COMPLETIONS_PATH,
                cast_to=bytes,
                body=body,
                options={"timeout": settings.LLM_TIMEOUT_SECONDS},
            )
            raw = content.decode("utf-8", errors="replace")
        except openai.APITimeoutError:
            return _Attempt(
                status="timeout",
                error=f"timeout after {settings.LLM_TIMEOUT_SECONDS}s",
                retryable=True,
            )
        except openai.APIConnectionError as exc:
            return _Attempt(status="error", error=f"connection error: {exc}", retryable=True)
        except openai.APIStatusError as exc:
            return self._status_error(
                exc,
                format_sent=format_level != "none",
                required_sent=tools_offered and tool_choice == "required",
            )
        except openai.OpenAIError as exc:
            return _Attempt(status="error", error=f"{type(exc).__name__}: {exc}")
        return self._reply_from_body(raw, body, tools_offered=tools_offered)

    @staticmethod
    def _status_error(
        exc: openai.APIStatusError, *, format_sent: bool, required_sent: bool
    ) -> _Attempt:
        code = exc.status_code
        try:
            raw = exc.response.text
        except Exception:  # a body we cannot read is still an error row
            raw = ""
        message = f"HTTP {code}: {exc.message}"
        said = (raw + message).lower()
        if format_sent and (
            code == 422 or (code in _REFUSAL_STATUS and any(w in said for w in _FORMAT_WORDS))
        ):
            return _Attempt(status="rejected", raw=raw, error=message, format_rejected=True)
        # llama-cpp-python answers an unsupported "required" with a bare HTTP 500.
        if required_sent and (
            code in {422, 500, 501} or (code == 400 and any(w in said for w in _TOOL_CHOICE_WORDS))
        ):
            return _Attempt(status="rejected", raw=raw, error=message, tool_choice_rejected=True)
        retryable = code in _RETRYABLE_STATUS or code >= 500
        return _Attempt(
            status="error" if retryable else "rejected",
            raw=raw,
            error=message,
            retryable=retryable,
            retry_after=_retry_after_seconds(exc.response.headers) if retryable else None,
        )

    @staticmethod
    def _reply_from_body(raw: str, body: dict[str, Any], *, tools_offered: bool) -> _Attempt:
        try:
            data = json.loads(raw)
        except ValueError:
            return _Attempt(status="error", raw=raw, error="malformed response: body is not JSON")
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
            content = _content_text(message.get("content"))
            finish_reason = str(choice.get("finish_reason") or "")
            tool_calls = [
                ToolCall(
                    id=str(call.get("id") or ""),
                    name=str((call.get("function") or {}).get("name") or "").strip(),
                    arguments=(call.get("function") or {}).get("arguments"),
                )
                for call in (message.get("tool_calls") or [])
                if isinstance(call, dict)
            ]
        except (KeyError, IndexError, TypeError, AttributeError):
            detail = ""
            if isinstance(data, dict) and data.get("error"):
                detail = f": {str(data['error'])[:500]}"
            return _Attempt(
                status="error", raw=raw, error=f"malformed response: not a chat completion{detail}"
            )
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        tokens_in = usage.get("prompt_tokens")
        tokens_out = usage.get("completion_tokens")
        if not isinstance(tokens_in, int):
            sent = json.dumps(body.get("messages"), ensure_ascii=False)
            sent += json.dumps(body.get("tools") or [], ensure_ascii=False)
            tokens_in = estimate_tokens(sent)
        if not isinstance(tokens_out, int):
            tokens_out = estimate_tokens(content) + sum(
                estimate_tokens(c.name + json.dumps(c.arguments, ensure_ascii=False))
                for c in tool_calls
            )
        reply = ChatReply(content=content, finish_reason=finish_reason, tool_calls=tool_calls)
        usable_calls = tools_offered and bool(tool_calls)
        counts: dict[str, Any] = {"raw": raw, "tokens_in": tokens_in, "tokens_out": tokens_out}
        if finish_reason == "length":
            if not content.strip() and not usable_calls:
                return _Attempt(
                    status="truncated", error="output cut by max_tokens, nothing returned", **counts
                )
            return _Attempt(
                status="truncated", error="output cut by max_tokens", reply=reply, **counts
            )
        if finish_reason == "content_filter" and not content.strip():
            return _Attempt(status="rejected", error="blocked by the content filter", **counts)
        if not content.strip() and not usable_calls:
            # Offered tools, a model may stop with nothing to say: the caller asks for the
            # answer next. Otherwise an empty reply is a failed call.
            return _Attempt(
                status="empty",
                error="the model returned no content",
                reply=reply if tools_offered else None,
                **counts,
            )
        return _Attempt(status="ok", reply=reply, **counts)
