"""A small world for the security tests: one of every row, all owned by ``owner``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone

from audit.models import AuditEvent, Review
from chat.models import Conversation
from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api.services import CreatedApiKey, api_key_create
from diagnosis.models import (
    AlertGroupStart,
    AlertmanagerReceiver,
    ApiSubmission,
    CallbackAttempt,
    DiagnosisSession,
    KnowledgeDocument,
    LLMCall,
    SessionEvent,
    ToolInvocation,
)
from tests.chat.factories import conversation_make, environment_make, session_make


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()
    yield
    cache.clear()


@dataclass
class World:
    users: dict[str, object]  # role -> user (no entry for anonymous)
    keys: dict[str, CreatedApiKey]  # role -> an API key of that user
    spare_owner_key: CreatedApiKey  # revoked by the sweep, so the owner's own key survives
    conversation: Conversation
    session: DiagnosisSession
    invocation: ToolInvocation
    receiver: AlertmanagerReceiver
    receiver_token: str


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-1")


@pytest.fixture
def world(owner, teammate, outsider, reviewer, superuser) -> World:
    environment = environment_make()
    conversation = conversation_make(owner=owner, environment=environment)
    session = session_make(conversation=conversation)
    invocation = session.invocations.order_by("id").first()
    assert invocation is not None
    users = {
        "owner": owner,
        "teammate": teammate,
        "outsider": outsider,
        "reviewer": reviewer,
        "superuser": superuser,
    }
    keys = {role: api_key_create(owner=user, name=f"{role}-key") for role, user in users.items()}
    spare = api_key_create(owner=owner, name="spare")
    receiver, token = alert_receiver_create(
        slug="prod-alerts", name="Prod", owner=owner, environment=environment
    )
    # One row of every model the admin shows, so each change page has an object.
    LLMCall.objects.create(session=session, sequence=1, role="planner", provider="offline")
    SessionEvent.objects.get_or_create(session=session, sequence=99, defaults={"kind": "info"})
    KnowledgeDocument.objects.create(
        title="Pool runbook", slug="pool", environment=environment, body="# Pool\n\ntext\n"
    )
    Review.objects.create(session=session, reviewer=reviewer, verdict="correct")
    AuditEvent.objects.create(
        actor=reviewer,
        actor_label="reviewer",
        action="review_recorded",
        target_type="diagnosis_session",
        target_id=str(session.pk),
    )
    ApiSubmission.objects.create(session=session, api_key=keys["owner"].api_key, request_hash="0")
    CallbackAttempt.objects.create(session=session, attempt=1, url="https://example.invalid/")
    AlertGroupStart.objects.create(
        receiver=receiver,
        group_key="{}:{alertname=x}",
        group_key_hash="0" * 64,
        starts_at=timezone.now() - timedelta(minutes=5),
        session=session,
    )
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    for model in (AccessAttempt, AccessLog, AccessFailureLog):
        fields = {"username": "someone", "ip_address": "203.0.113.9", "user_agent": "test"}
        if model is AccessAttempt:
            fields["failures_since_start"] = 1
        model.objects.create(**fields)
    return World(
        users=users,
        keys=keys,
        spare_owner_key=spare,
        conversation=conversation,
        session=session,
        invocation=invocation,
        receiver=receiver,
        receiver_token=token,
    )


def login_client(client, user):
    if user is not None:
        client.force_login(user)
    return client


__all__ = ["World", "get_user_model", "login_client"]
