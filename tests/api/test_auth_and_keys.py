import hashlib
import uuid

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from diagnosis.models import ApiKey
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "/api/v1/diagnoses"),
    ("post", "/api/v1/diagnoses"),
    ("get", f"/api/v1/diagnoses/{uuid.uuid4()}"),
    ("post", f"/api/v1/diagnoses/{uuid.uuid4()}/cancel"),
    ("get", f"/api/v1/diagnoses/{uuid.uuid4()}/tool-invocations"),
    ("get", f"/api/v1/diagnoses/{uuid.uuid4()}/callback-attempts"),
    ("get", "/api/v1/tool-invocations/1"),
    ("get", "/api/v1/api-keys"),
    ("post", "/api/v1/api-keys"),
    ("post", "/api/v1/api-keys/1/revoke"),
    ("post", "/api/v1/integrations/alertmanager/anything"),
]


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_every_endpoint_answers_401_in_the_error_shape_without_credentials(method, url):
    response = getattr(APIClient(), method)(url, {}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "not_authenticated"
    assert set(response.json()["error"]) == {"code", "message", "details"}


@pytest.mark.parametrize(("method", "url"), [e for e in ENDPOINTS if "alertmanager" not in e[1]])
def test_every_endpoint_answers_401_to_a_revoked_key(method, url, owner_key):
    owner_key.api_key.revoked_at = timezone.now()
    owner_key.api_key.save()
    response = getattr(client_for(owner_key.key), method)(url, {}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_a_made_up_key_with_a_real_prefix_is_refused(owner_key):
    forged = f"rp_{owner_key.api_key.prefix}_not-the-secret"
    assert client_for(forged).get("/api/v1/diagnoses").status_code == 401


def test_creating_a_key_shows_the_secret_once_and_stores_only_its_hash(owner):
    client = APIClient()
    client.force_login(owner)
    response = client.post("/api/v1/api-keys", {"name": "deploy bot"}, format="json")
    assert response.status_code == 201
    body = response.json()
    key = ApiKey.objects.get(pk=body["id"])
    assert key.owner == owner and key.name == "deploy bot"
    assert body["key"].startswith(f"rp_{key.prefix}_")
    assert key.secret_hash == hashlib.sha256(body["key"].encode()).hexdigest()
    assert body["key"] not in str(ApiKey.objects.values().get(pk=key.pk))
    assert body["signing_secret"].startswith("whsec_")

    listed = client.get("/api/v1/api-keys").json()["results"]
    assert [k["name"] for k in listed] == ["deploy bot"]
    assert "key" not in listed[0] and "signing_secret" not in listed[0]

    # the new key works
    assert client_for(body["key"]).get("/api/v1/diagnoses").status_code == 200


def test_a_key_records_when_it_was_last_used(owner_key):
    assert owner_key.api_key.last_used_at is None
    client_for(owner_key.key).get("/api/v1/diagnoses")
    owner_key.api_key.refresh_from_db()
    assert owner_key.api_key.last_used_at is not None


def test_revoking_a_key_makes_it_answer_401(api, owner_key):
    response = api.post(f"/api/v1/api-keys/{owner_key.api_key.pk}/revoke")
    assert response.status_code == 200
    owner_key.api_key.refresh_from_db()
    assert owner_key.api_key.revoked_at is not None
    assert response.json()["revoked_at"] is not None
    assert client_for(owner_key.key).get("/api/v1/diagnoses").status_code == 401


def test_creating_and_revoking_a_key_are_audited(api, owner, owner_key):
    from audit.models import AuditEvent

    api.post(f"/api/v1/api-keys/{owner_key.api_key.pk}/revoke")
    api.post(f"/api/v1/api-keys/{owner_key.api_key.pk}/revoke")  # a no-op, not audited twice
    events = AuditEvent.objects.filter(target_id=str(owner_key.api_key.pk)).order_by("id")
    assert [(e.action, e.actor) for e in events] == [
        ("api_key_created", owner),
        ("api_key_revoked", owner),
    ]


def test_another_owners_key_cannot_be_revoked_and_is_a_404(outsider_api, owner_key):
    response = outsider_api.post(f"/api/v1/api-keys/{owner_key.api_key.pk}/revoke")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    owner_key.api_key.refresh_from_db()
    assert owner_key.api_key.revoked_at is None


def test_a_key_name_is_required(api):
    response = api.post("/api/v1/api-keys", {}, format="json")
    assert response.status_code == 400
    assert "name" in response.json()["error"]["details"]["fields"]


def test_browser_sessions_need_a_csrf_token_for_writes(owner, environment):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get("/api/v1/diagnoses").status_code == 200
    response = client.post("/api/v1/diagnoses", {"question": "q"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]
