"""The client's address for login lockout and logs, behind a known number of proxies."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or with TRUSTED_PROXY_COUNT = N, the address N hops from the right of
    X-Forwarded-For (each trusted proxy appends the peer it saw; anything further left is
    client-supplied and could be forged)."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    hops = [
        part.strip()
        for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        if part.strip()
    ]
    return hops[-count] if len(hops) >= count else remote
