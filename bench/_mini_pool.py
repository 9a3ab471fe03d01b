"""The benches' user and environments on the flow tests' mini-pool pack (after Django is set up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model

from diagnosis.models import Environment

PACK = Path(__file__).resolve().parents[1] / "tests" / "flow" / "fixtures" / "mini-pool"


def mini_pool_owner_environment(name: str) -> tuple[Any, Environment]:
    """The user ``name`` and the environment ``<name>-mini-pool`` (made on first use)."""
    owner, _ = get_user_model().objects.get_or_create(username=name)
    environment, _ = Environment.objects.update_or_create(
        slug=f"{name}-mini-pool",
        defaults={
            "name": name,
            "pack_path": str(PACK),
            "services": ["payment-service", "order-service", "mysql"],
        },
    )
    return owner, environment


def mini_pool_live_environment(name: str, *, prometheus_url: str, loki_url: str) -> Environment:
    """The live environment ``<name>-mini-pool-prometheus`` on these backends (a separate
    slug: the files environment stays as it is); its URLs are this run's."""
    environment, _ = Environment.objects.update_or_create(
        slug=f"{name}-mini-pool-prometheus",
        defaults={
            "name": f"{name} (Prometheus)",
            "kind": Environment.Kind.LIVE,
            "pack_path": "",
            "prometheus_url": prometheus_url,
            "loki_url": loki_url,
            "services": ["payment-service", "order-service", "mysql"],
        },
    )
    return environment
