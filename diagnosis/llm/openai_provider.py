"""The ``openai`` provider: Chat Completions against any OpenAI-compatible endpoint.

The SDK's own retries are off (``max_retries=0``) so that every attempt is one
recorded LLMCall row and the backoff is ours: exponential with jitter on 429,
5xx, timeouts and connection errors, at most ``LLM_MAX_RETRIES`` retries. No SDK
exception leaves this module other than as ``LLMError``.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from diagnosis.contracts import ComposerInput, VerifierPayload
from diagnosis.llm.base import (
    CallRecorder,
    ExecutorRequest,
    LLMError,
    PlannerRequest,
    Role,
    ToolRunner,
)
from diagnosis.llm.prompts import (
    composer_messages,
    executor_messages,
    planner_messages,
    prompt_render,
    verifier_messages,
)
from diagnosis.tokens import estimate_tokens

PROVIDER_NAME = "openai"
# A Retry-After above this is not "small": we use our own backoff instead.
RETRY_AFTER_MAX_SECONDS = 30.0
_RETRYABLE_STATUS = {408, 409, 429}
# Local servers (Ollama, vLLM, llama.cpp) need no key, but the SDK insists on one.
_NO_KEY = "not-needed"


@dataclass
class _ToolCall:
    id: str
    name: str
    arguments: Any  # the model's raw arguments: usually a JSON string


@dataclass
class _Reply:
    content: str
    finish_reason: str
    tool_calls: list[_ToolCall] = field(default_factory=list)


@dataclass
class _Attempt:
    """One HTTP attempt: what to record, and what to do next."""

    status: str
    raw: str = ""
    error: str = ""
    reply: _Reply | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    retryable: bool = False
    retry_after: float | None = None
    format_rejected: bool = False


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


def _function_spec(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("type") == "function" and "function" in spec:
        return spec
    return {"type": "function", "function": spec}


def _tool_name(spec: dict[str, Any]) -> str:
    return str(spec.get("function", {}).get("name", "?"))


def _tool_message_content(result: Any) -> str:
    trace_ref = getattr(result, "trace_ref", "trace-?")
    status = getattr(result, "status", "error")
    output = getattr(result, "output", "")
    return f"[{trace_ref} {status}]\n{output}"


def _arguments_for_runner(raw: Any) -> object:
    """A dict when the model sent a JSON object; otherwise the raw value, so the
    registry records an error invocation that shows what the model sent."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw


class OpenAIProvider:
    """One endpoint and model; ``for_role`` builds it from ``LLM_ROLE_SETTINGS``."""

    name = PROVIDER_NAME

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url or None
        self._api_key = api_key or _NO_KEY
        self.model = model
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._client: openai.OpenAI | None = None
        # Set to False once the server rejects response_format; kept per instance.
        self.json_mode_supported = True

    def __repr__(self) -> str:  # never the key
        return f"OpenAIProvider(base_url={self.base_url!r}, model={self.model!r})"

    @classmethod
    def for_role(cls, role: Role | str, **kwargs: Any) -> OpenAIProvider:
        role = Role(role)
        config = settings.LLM_ROLE_SETTINGS.get(role.value, {})
        base_url = config.get("base_url") or ""
        api_key = config.get("api_key") or ""
        if not base_url and not api_key:
            upper = role.value.upper()
            raise ImproperlyConfigured(
                f"The openai provider for the {role.value} needs an endpoint: set LLM_BASE_URL "
                f"(or LLM_{upper}_BASE_URL) to an OpenAI-compatible server, and LLM_API_KEY "
                f"if it needs one; or use LLM_PROVIDER=offline."
            )
        return cls(
            base_url=base_url or None,
            api_key=api_key,
            model=config.get("model") or settings.LLM_MODEL,
            **kwargs,
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- the four roles ------------------------------------------------------

    def plan(self, request: PlannerRequest, *, recorder: CallRecorder) -> str:
        return self._chat(
            role=Role.PLANNER, messages=planner_messages(request), recorder=recorder, json_mode=True
        ).content

    def verify(self, payload: VerifierPayload, *, recorder: CallRecorder) -> str:
        return self._chat(
            role=Role.VERIFIER,
            messages=verifier_messages(payload),
            recorder=recorder,
            json_mode=True,
        ).content

    def compose(self, composer_input: ComposerInput, *, recorder: CallRecorder) -> str:
        return self._chat(
            role=Role.COMPOSER,
            messages=composer_messages(composer_input),
            recorder=recorder,
            json_mode=True,
        ).content

    def execute(
        self,
        request: ExecutorRequest,
        *,
        tools: ToolRunner,
        tool_specs: list[dict[str, Any]],
        recorder: CallRecorder,
    ) -> str:
        specs = [_function_spec(spec) for spec in tool_specs]
        messages: list[dict[str, Any]] = list(executor_messages(request))
        max_rounds = settings.LLM_EXECUTOR_MAX_TOOL_ROUNDS
        for round_no in range(max_rounds + 1):
            offer_tools = bool(specs) and round_no < max_rounds
            if specs and round_no == max_rounds:
                final_turn = prompt_render("executor_final_turn", max_tool_rounds=str(max_rounds))
                messages.append({"role": "user", "content": final_turn.strip()})
            reply = self._chat(
                role=Role.EXECUTOR,
                messages=messages,
                recorder=recorder,
                tools=specs if offer_tools else None,
            )
            if not (offer_tools and reply.tool_calls):
                return reply.content
            messages.append(self._assistant_turn(reply, round_no))
            for call in reply.tool_calls:
                result = tools(call.name, _arguments_for_runner(call.arguments))
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": _tool_message_content(result),
                    }
                )
        raise AssertionError("unreachable: the last round offers no tools")  # pragma: no cover

    @staticmethod
    def _assistant_turn(reply: _Reply, round_no: int) -> dict[str, Any]:
        calls = []
        for index, call in enumerate(reply.tool_calls):
            if not call.id:
                call.id = f"call_{round_no}_{index}"
            arguments = call.arguments
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments},
                }
            )
        return {"role": "assistant", "content": reply.content or None, "tool_calls": calls}

    # --- one model call, with retries -----------------------------------------

    def _client_get(self) -> openai.OpenAI:
        if self._client is None:
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=settings.LLM_TIMEOUT_SECONDS,
                max_retries=0,
            )
        return self._client

    def _backoff(self, failures: int, retry_after: float | None) -> float:
        if retry_after is not None and 0 <= retry_after <= RETRY_AFTER_MAX_SECONDS:
            return retry_after
        delay = min(self.backoff_max, self.backoff_base * 2 ** (failures - 1))
        return delay * random.uniform(0.5, 1.0)

    def _chat(
        self,
        *,
        role: Role,
        messages: list[dict[str, Any]],
        recorder: CallRecorder,
        tools: list[dict[str, Any]] | None = None,
        json_mode: bool = False,
    ) -> _Reply:
        failures = 0
        while True:
            use_json = json_mode and self.json_mode_supported
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "max_tokens": settings.LLM_MAX_TOKENS,
                "temperature": settings.LLM_TEMPERATURE,
            }
            if tools:
                body["tools"] = tools
            if use_json:
                body["response_format"] = {"type": "json_object"}
            started = time.monotonic()
            attempt = self._attempt(body, tools_offered=bool(tools), use_json=use_json)
            latency_ms = int((time.monotonic() - started) * 1000)
            recorded_request = dict(body)
            if tools:
                recorded_request["tools"] = [_tool_name(spec) for spec in tools]
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
                return attempt.reply
            if attempt.format_rejected:
                self.json_mode_supported = False  # ask again at once, without it
                continue
            failures += 1
            if not attempt.retryable or failures > settings.LLM_MAX_RETRIES:
                raise LLMError(attempt.status, attempt.error)
            self._sleep(self._backoff(failures, attempt.retry_after))

    def _attempt(self, body: dict[str, Any], *, tools_offered: bool, use_json: bool) -> _Attempt:
        try:
            response = self._client_get().chat.completions.with_raw_response.create(
                **body, timeout=settings.LLM_TIMEOUT_SECONDS
            )
            raw = response.http_response.content.decode("utf-8", errors="replace")
        except openai.APITimeoutError:
            return _Attempt(
                status="timeout",
                error=f"timeout after {settings.LLM_TIMEOUT_SECONDS}s",
                retryable=True,
            )
        except openai.APIConnectionError as exc:
            return _Attempt(status="error", error=f"connection error: {exc}", retryable=True)
        except openai.APIStatusError as exc:
            return self._status_error(exc, use_json=use_json)
        except openai.OpenAIError as exc:
            return _Attempt(status="error", error=f"{type(exc).__name__}: {exc}")
        return self._reply_from_body(raw, body, tools_offered=tools_offered)

    @staticmethod
    def _status_error(exc: openai.APIStatusError, *, use_json: bool) -> _Attempt:
        code = exc.status_code
        try:
            raw = exc.response.text
        except Exception:  # a body we cannot read is still an error row
            raw = ""
        message = f"HTTP {code}: {exc.message}"
        if use_json and (code == 422 or (code == 400 and "response_format" in raw + message)):
            return _Attempt(status="rejected", raw=raw, error=message, format_rejected=True)
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
                _ToolCall(
                    id=str(call.get("id") or ""),
                    name=str((call.get("function") or {}).get("name") or ""),
                    arguments=(call.get("function") or {}).get("arguments", ""),
                )
                for call in (message.get("tool_calls") or [])
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
        reply = _Reply(content=content, finish_reason=finish_reason, tool_calls=tool_calls)
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
            return _Attempt(status="empty", error="the model returned no content", **counts)
        return _Attempt(status="ok", reply=reply, **counts)
