"""A diagnosis submitted through the API and run by the real flow (offline provider)."""

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from diagnosis.models import CallbackAttempt, DiagnosisSession, Environment, ToolInvocation
from tests.api.test_callbacks import Receiver

pytestmark = pytest.mark.django_db

PACK = Path(django_settings.BASE_DIR) / "scenarios" / "payment-pool-saturation"


@pytest.fixture(autouse=True)
def _callbacks_to_loopback_allowed(settings):
    # The test's receiving server is on loopback, which production refuses by default.
    settings.API_CALLBACK_ALLOW_PRIVATE = True


@pytest.fixture
def pack_environment(db):
    return Environment.objects.create(
        slug="payment-pool-saturation",
        name="payment pool",
        kind=Environment.Kind.SCENARIO,
        pack_path=str(PACK),
        services=["payment-service", "order-service", "mysql"],
    )


def test_a_submitted_diagnosis_runs_to_an_answer_whose_claims_cite_real_invocations(
    api, owner_key, pack_environment, django_capture_on_commit_callbacks, settings
):
    settings.LLM_PROVIDER = "offline"
    hook = Receiver([])
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(
                "/api/v1/diagnoses",
                {
                    "question": "payment-service 为什么大量超时？",
                    "environment": "payment-pool-saturation",
                    "callback_url": hook.url,
                },
                format="json",
            )
        assert response.status_code == 202
        session = DiagnosisSession.objects.get(public_id=response.json()["id"])
        assert session.status == DiagnosisSession.Status.COMPLETED, session.error

        body = api.get(response["Location"]).json()
        assert body["status"] == session.status
        assert body["final_answer"]
        assert body["decision"] == session.decision
        invocations = {i.pk: i for i in ToolInvocation.objects.filter(session=session)}
        valid = [b for c in body["claims"] for b in c["bindings"] if b["valid"]]
        assert valid, "the offline engine should confirm at least one claim on this pack"
        for binding in valid:
            assert invocations[binding["invocation_id"]].status == "ok"
        listed, url = [], f"{response['Location']}/tool-invocations"
        while url:  # cursor pages, in call order
            page = api.get(url).json()
            listed.extend(page["results"])
            url = page["next"]
        assert [i["id"] for i in listed] == sorted(
            invocations, key=lambda pk: invocations[pk].sequence
        )

        # the callback carried the same result, signed with the key's secret
        assert len(hook.received) == 1
        headers, raw = hook.received[0]
        signature = hmac.new(owner_key.signing_secret.encode(), raw, hashlib.sha256).hexdigest()
        assert headers["X-Rootproof-Signature"] == f"sha256={signature}"
        assert json.loads(raw)["diagnosis"]["final_answer"] == session.final_answer
        assert CallbackAttempt.objects.get(session=session).status_code == 200
    finally:
        hook.close()
