"""How API requests prove who they are: API keys, Alertmanager receiver tokens, rate limits.

Secrets are never stored: a key is ``rp_<prefix>_<secret>``; the row keeps the prefix (to
find it) and the SHA-256 of the whole key (to check it). A high-entropy secret makes a
plain hash enough; no slow password hash is needed.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions, throttling
from rest_framework.request import Request

from diagnosis.models import AlertmanagerReceiver, ApiKey

if TYPE_CHECKING:  # DRF's views module reads the settings that name this module
    from rest_framework.views import APIView

KEY_PREFIX = "rp_"
RECEIVER_TOKEN_PREFIX = "rpam_"  # noqa: S105 (a prefix, not a secret)
# last_used_at is a hint, not an audit trail: write it at most this often.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def api_key_generate() -> tuple[str, str]:
    """A new (prefix, full key)."""
    prefix = secrets.token_hex(6)
    return prefix, f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"


def receiver_token_generate() -> str:
    return f"{RECEIVER_TOKEN_PREFIX}{secrets.token_urlsafe(32)}"


def api_key_signing_secret(*, api_key: ApiKey) -> str:
    """The key's callback signing secret, derived so it is never stored.

    It changes if SECRET_KEY changes; integrators then need a new key.
    """
    digest = hmac.new(
        settings.SECRET_KEY.encode("utf-8"),
        f"rootproof.callback-signing:{api_key.pk}:{api_key.prefix}".encode(),
        hashlib.sha256,
    ).hexdigest()
    return f"whsec_{digest}"


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


class ApiKeyRateThrottle(throttling.SimpleRateThrottle):
    """One bucket per API key (or receiver, or browser user); rate from API_RATE_LIMIT."""

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
