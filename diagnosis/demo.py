"""Demo accounts: an SRE, a reviewer and an admin, created idempotently."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

REVIEWERS_GROUP = "reviewers"
# Reviewers read every diagnosis record but never change one.
REVIEWER_VIEW_APPS = ("diagnosis", "chat", "audit")
# What reviewers write: reviews (audit events are written by the services, never by hand).
REVIEWER_ADD_PERMISSIONS = ("add_review", "add_claimreview")


@dataclass(frozen=True)
class DemoAccount:
    username: str
    password: str
    role: str


def _credentials_file() -> Path:
    return Path(settings.VAR_DIR) / "demo-credentials.json"


def _load_saved_passwords() -> dict[str, str]:
    path = _credentials_file()
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _save_passwords(passwords: dict[str, str]) -> None:
    path = _credentials_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(passwords), encoding="utf-8")
    os.chmod(path, 0o600)


def reviewers_group_ensure() -> Group:
    group, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    view_perms = Permission.objects.filter(
        content_type__app_label__in=REVIEWER_VIEW_APPS, codename__startswith="view_"
    )
    add_perms = Permission.objects.filter(
        content_type__app_label="audit", codename__in=REVIEWER_ADD_PERMISSIONS
    )
    group.permissions.set([*view_perms, *add_perms])
    return group


@transaction.atomic
def demo_accounts_ensure() -> list[DemoAccount]:
    """Create (or keep) the three demo accounts; passwords are generated once and kept."""
    user_model = get_user_model()
    saved = _load_saved_passwords()
    group = reviewers_group_ensure()
    accounts = []
    for username, role in (("sre", "sre"), ("reviewer", "reviewer"), ("admin", "admin")):
        password = saved.get(username) or secrets.token_urlsafe(9)
        user, created = user_model.objects.get_or_create(username=username)
        if created or not user.check_password(password):
            user.set_password(password)
        user.is_staff = role in {"reviewer", "admin"}
        user.is_superuser = role == "admin"
        user.save()
        if role == "reviewer":
            user.groups.add(group)
        saved[username] = password
        accounts.append(DemoAccount(username=username, password=password, role=role))
    _save_passwords(saved)
    return accounts
