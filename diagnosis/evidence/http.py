"""The HTTP side of the live backends (Prometheus, Loki) and of callback delivery: one
client per process, reused; one GET bounded by the call's deadline with its failures as
tool errors; bearer tokens read from the environment."""

from __future__ import annotations

import os
import time
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from diagnosis.evidence.common import Deadline, ToolFailure, ToolTimeout
from diagnosis.per_process import per_process

# A worker runs one session at a time (a few back-to-back calls to one Prometheus and one
# Loki); the web process a handful of threads. Past max_connections a request waits for a
# free connection within its own timeout, as a ToolTimeout if none comes.
LIMITS = httpx.Limits(max_connections=32, max_keepalive_connections=8, keepalive_expiry=5.0)
# A kept-alive connection its server closed while the request was on its way: the request got
# no answer at all, at once. A GET is idempotent, so it is sent again once, on a new
# connection, when it failed so within STALE_FAILURE_SECONDS (a reset after the server worked
# on it, or an answer cut off part-way after a while, is the server's failure: not resent).
# (httpcore itself replaces a pooled connection its server closed before it is reused.)
_STALE_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
STALE_FAILURE_SECONDS = 0.5


# Per process (diagnosis.per_process): a client built before a fork (a Celery prefork
# child, a gunicorn worker) holds the parent's sockets and TLS state, so a child builds its own.
@per_process(maxsize=1)
def http_client() -> httpx.Client:
    """This process's HTTP client: a keep-alive pool and one SSL context for every call.

    httpx's defaults otherwise (``trust_env``: proxies and CA variables as ``httpx.get``
    reads them, once per process; no redirects followed). Cookies are never kept: one
    backend's or tenant's cookie must not ride along on another's call. httpx clients are
    safe to share between threads.
    """
    refused = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    return httpx.Client(limits=LIMITS, cookies=refused)


def bearer_headers(token_env: str, backend: str) -> dict[str, str]:
    """``Authorization: Bearer <token>`` from the variable ``token_env``; none without one."""
    if not token_env:
        return {}
    token = os.environ.get(token_env, "")
    if not token:
        raise ToolFailure(f"the environment variable {token_env} (the {backend} token) is empty")
    return {"Authorization": f"Bearer {token}"}


def backend_get(
    *,
    backend: str,
    base_url: str,
    url: str,
    params: dict[str, str],
    headers: dict[str, str],
    deadline: Deadline,
) -> httpx.Response:
    """GET ``url`` within what is left of ``deadline``; no answer is a ToolTimeout, no
    connection a ToolFailure, both naming ``backend`` at ``base_url``."""

    def send() -> httpx.Response:
        return http_client().get(
            url, params=params, headers=headers, timeout=max(deadline.remaining(), 0.05)
        )

    try:
        sent = time.monotonic()
        try:
            return send()
        except _STALE_CONNECTION:
            if time.monotonic() - sent > STALE_FAILURE_SECONDS:
                raise
            return send()
    except httpx.TimeoutException as exc:
        raise ToolTimeout(
            f"{backend} at {base_url} did not answer within {deadline.seconds:g}s"
        ) from exc
    except httpx.HTTPError as exc:
        raise ToolFailure(f"cannot reach {backend} at {base_url}: {exc}") from exc
