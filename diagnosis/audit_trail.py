"""The audit trail the core's services write to, kept by an app built on the core.

The core imports no app built on it (``tests/architecture/test_layers.py``). A core
service that changes what the trail records (an API key created or revoked, a receiver's
token rotated) calls ``audit_trail_record`` inside the transaction of the change; the
writer it reaches is the one the settings name, ``AUDIT_EVENT_RECORDER`` (the audit app's
``audit_event_record``, the one way an audit event is written), as Django reaches an
authentication backend or django-axes its client-IP callable.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.module_loading import import_string


def audit_trail_record(
    *, actor: Any, action: str, target: models.Model, details: dict[str, Any] | None = None
) -> None:
    recorder = import_string(settings.AUDIT_EVENT_RECORDER)
    recorder(actor=actor, action=action, target=target, details=details)
