"""The HTTP side of the live backends (Prometheus, Loki): one GET bounded by the call's
deadline with its failures as tool errors, and bearer tokens read from the environment."""

from __future__ import annotations

import os

import httpx

from diagnosis.evidence.common import Deadline, ToolFailure, ToolTimeout


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
    try:
        return httpx.get(
            url, params=params, headers=headers, timeout=max(deadline.remaining(), 0.05)
        )
    except httpx.TimeoutException as exc:
        raise ToolTimeout(
            f"{backend} at {base_url} did not answer within {deadline.seconds:g}s"
        ) from exc
    except httpx.HTTPError as exc:
        raise ToolFailure(f"cannot reach {backend} at {base_url}: {exc}") from exc
