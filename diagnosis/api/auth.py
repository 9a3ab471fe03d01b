"""How API requests prove who they are: API keys, Alertmanager receiver tokens, rate limits.

The secrets themselves (how they are made, hashed and derived) are ``diagnosis.credentials``.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions, throttling
from rest_framework.request import Request

from diagnosis.credentials import KEY_PREFIX, secret_hash
from diagnosis.models import AlertmanagerReceiver, ApiKey

if TYPE_CHECKING:  # DRF's views module reads the settings that name this module
    from rest_framework.views import APIView

# last_used_at is a hint, not an audit trail: write it at most this often.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def bearer_token(request: Request) -> str | None:
    header = authentication.get_authorization_header(request).decode("latin-1")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not token or " " in token:
        raise exceptions.AuthenticationFailed(gettext("Bearer 令牌格式错误。"))
    return token


def api_key_find(*, key: str) -> ApiKey | None:
    """The active key whose secret this is, or None."""
    if not key.startswith(KEY_PREFIX):
        return None
    prefix, _, rest = key[len(KEY_PREFIX) :].partition("_")
    if not prefix or not rest:
        return None
    api_key = (
        ApiKey.objects.select_related("owner")
        .filter(prefix=prefix, revoked_at__isnull=True)
        .first()
    )
    if api_key is None or not hmac.compare_digest(api_key.secret_hash, secret_hash(key)):
        return None
    return api_key


def _touch(instance: ApiKey | AlertmanagerReceiver) -> None:
    now = timezone.now()
    if instance.last_used_at is None or now - instance.last_used_at > LAST_USED_RESOLUTION:
        type(instance).objects.filter(pk=instance.pk).update(last_used_at=now)
        instance.last_used_at = now


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer rp_…``: the user is the key's owner, ``request.auth`` the key."""

    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        token = bearer_token(request)
        if token is None:
            return None
        api_key = api_key_find(key=token)
        if api_key is None or not api_key.owner.is_active:
            raise exceptions.AuthenticationFailed(gettext("API 密钥无效或已吊销。"))
        _touch(api_key)
        return api_key.owner, api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class ReceiverTokenAuthentication(authentication.BaseAuthentication):
    """An Alertmanager receiver's bearer token; ``request.auth`` is the receiver.

    An unknown receiver and a wrong token answer alike (401), so receiver names
    cannot be probed.
    """

    def authenticate(self, request: Request) -> tuple[Any, AlertmanagerReceiver]:
        slug = (request.parser_context or {}).get("kwargs", {}).get("receiver", "")
        token = bearer_token(request)
        if token is None:
            raise exceptions.NotAuthenticated(gettext("这个接收器需要 bearer 令牌。"))
        receiver = (
            AlertmanagerReceiver.objects.select_related("owner", "environment")
            .filter(slug=slug, is_active=True)
            .first()
        )
        if (
            receiver is None
            or not receiver.token_hash
            or not hmac.compare_digest(receiver.token_hash, secret_hash(token))
        ):
            raise exceptions.AuthenticationFailed(gettext("接收器或令牌无效。"))
        _touch(receiver)
        return receiver.owner, receiver

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="alertmanager"'


class IsReceiver(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.auth, AlertmanagerReceiver)


@dataclass(frozen=True)
class RateLimitState:
    """Where the caller's bucket stands after this request, as its answer tells it."""

    limit: int  # requests per window
    remaining: int  # requests left in the window now
    reset: int  # seconds until the oldest counted request leaves the window

    def headers(self) -> dict[str, str]:
        # The IETF draft's names (draft-ietf-httpapi-ratelimit-headers): delta-seconds.
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset),
        }


def seconds_to_wait(wait: float) -> int:
    """Whole seconds a client waits, never zero: what Retry-After and RateLimit-Reset say.

    Rounded up past the instant (int + 1), so a client that waits this long is let in.
    """
    return int(max(wait, 0.0)) + 1


_STATE_ATTRIBUTE = "_rootproof_rate_limit"


def rate_limit_state(request: Request) -> RateLimitState | None:
    """The state ApiKeyRateThrottle left on this request (None: the request was not counted)."""
    state = getattr(request, _STATE_ATTRIBUTE, None)
    return state if isinstance(state, RateLimitState) else None


class ApiKeyRateThrottle(throttling.SimpleRateThrottle):
    """One bucket per API key (or receiver, or browser user); rate from API_RATE_LIMIT.

    It leaves the bucket's state on the request (``rate_limit_state``), for the answer's
    RateLimit-* headers: a sliding window of the last ``duration`` seconds, so the reset is
    when its oldest request leaves it. Anonymous requests (401 anyway) are not counted.
    """

    scope = "api"

    def get_rate(self) -> str | None:
        return settings.API_RATE_LIMIT or None

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if isinstance(request.auth, ApiKey):
            ident = f"key-{request.auth.pk}"
        elif isinstance(request.auth, AlertmanagerReceiver):
            ident = f"receiver-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return None  # anonymous requests end in 401 anyway
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request: Request, view: APIView) -> bool:
        allowed = bool(super().allow_request(request, view))
        if self.rate is not None and self.key is not None and self.history:
            state = RateLimitState(
                limit=self.num_requests,
                remaining=max(self.num_requests - len(self.history), 0),
                reset=seconds_to_wait(self.duration - (self.now - self.history[-1])),
            )
            setattr(request, _STATE_ATTRIBUTE, state)
        return allowed


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "diagnosis.api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "rp_<prefix>_<secret>",
            "description": "An API key created at POST /api/v1/api-keys, sent as "
            "`Authorization: Bearer <key>`.",
        }


class ReceiverTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "diagnosis.api.auth.ReceiverTokenAuthentication"
    name = "alertmanagerReceiverToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The receiver's token (set in admin), configured in Alertmanager as "
            "`http_config.authorization.credentials`.",
        }
