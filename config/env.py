"""Typed readers for environment variables.

Each reader fails loudly with an error naming the variable, so a typo in a
deployment is caught at start-up instead of surfacing as odd behaviour later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class EnvError(ImproperlyConfigured):
    """A bad value in one environment variable."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"{name}: {message}")


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    source = os.environ if environ is None else environ
    value = source.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str = "", *, environ: Mapping[str, str] | None = None) -> str:
    value = _raw(name, environ)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool = False, *, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(name, f"expected a boolean (true/false, 1/0, yes/no, on/off), got {value!r}")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise EnvError(name, f"expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise EnvError(name, f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise EnvError(name, f"must be at most {maximum}, got {number}")
    return number


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise EnvError(name, f"expected a number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise EnvError(name, f"must be at least {minimum}, got {number}")
    return number


def env_choice(
    name: str,
    default: str,
    choices: tuple[str, ...],
    *,
    environ: Mapping[str, str] | None = None,
) -> str:
    value = env_str(name, default, environ=environ)
    if value not in choices:
        raise EnvError(name, f"expected one of {', '.join(choices)}, got {value!r}")
    return value


def env_list(
    name: str, default: list[str], *, environ: Mapping[str, str] | None = None
) -> list[str]:
    value = _raw(name, environ)
    if value is None or value == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_database(
    name: str, default: str, *, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    import dj_database_url

    url = env_str(name, default, environ=environ)
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in {"sqlite", "postgres", "postgresql", "pgsql"}:
        raise EnvError(
            name, f"expected a sqlite:// or postgres:// URL, got scheme {scheme or '(none)'!r}"
        )
    try:
        config = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    except Exception as exc:  # dj_database_url raises several types for a bad URL
        raise EnvError(name, f"not a valid database URL ({exc})") from None
    if config.get("ENGINE") == "django.db.backends.sqlite3":
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    return config
