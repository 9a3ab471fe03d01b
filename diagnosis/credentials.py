"""Integrators' secrets: API keys, Alertmanager receiver tokens, callback signing secrets.

Secrets are never stored: a key is ``rp_<prefix>_<secret>``; the row keeps the prefix (to
find it) and the SHA-256 of the whole key (to check it). A high-entropy secret makes a
plain hash enough; no slow password hash is needed. The API (which checks them) and the
Alertmanager receivers (which issue tokens) both read them here, below either.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings

from diagnosis.models import ApiKey

KEY_PREFIX = "rp_"
RECEIVER_TOKEN_PREFIX = "rpam_"  # noqa: S105 (a prefix, not a secret)


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
