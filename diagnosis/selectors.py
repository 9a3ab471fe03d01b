"""Reads of the diagnosis domain."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection


@dataclass(frozen=True)
class ComponentHealth:
    ok: bool
    detail: str


def database_health() -> ComponentHealth:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return ComponentHealth(ok=False, detail=type(exc).__name__)
    return ComponentHealth(ok=True, detail=connection.vendor)


def broker_health(*, timeout: float = 2.0) -> ComponentHealth:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            transport = conn.transport_cls
    except Exception as exc:
        return ComponentHealth(ok=False, detail=type(exc).__name__)
    return ComponentHealth(ok=True, detail=str(transport))
