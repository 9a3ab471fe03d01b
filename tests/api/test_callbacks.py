import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from diagnosis.models import ApiSubmission, CallbackAttempt, DiagnosisSession
from diagnosis.services import diagnosis_cancel, session_fail

pytestmark = pytest.mark.django_db


class Receiver:
    """A loopback HTTP server that records what it is sent and answers with given codes."""

    def __init__(self, codes: list[int]) -> None:
        self.codes = list(codes)
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.connections = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as integrators' servers speak
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall per reused call

            def setup(self):
                outer.connections += 1  # one handler per accepted TCP connection
                super().setup()

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append((dict(self.headers), body))
                code = outer.codes.pop(0) if outer.codes else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def _callbacks_to_loopback_allowed(settings):
    # The test's receiving server is on loopback, which production refuses by default.
    settings.API_CALLBACK_ALLOW_PRIVATE = True


@pytest.fixture
def receiver_factory():
    made: list[Receiver] = []

    def make(codes=()):
        made.append(Receiver(list(codes)))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture(autouse=True)
def _no_flow_runs(no_flow_runs):
    """These tests build sessions in the database; the flow itself is not run here."""


def _submit(api, url, capture):
    with capture(execute=True):
        response = api.post(
            "/api/v1/diagnoses",
            {"question": "为什么慢？", "environment": "shop", "callback_url": url},
            format="json",
        )
    assert response.status_code == 202
    return DiagnosisSession.objects.get(public_id=response.json()["id"])


def test_the_callback_is_posted_when_a_session_ends_and_its_signature_verifies(
    api, owner_key, environment, receiver_factory, django_capture_on_commit_callbacks
):
    hook = receiver_factory()
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    assert hook.received == []  # nothing before the session ends
    with django_capture_on_commit_callbacks(execute=True):
        session_fail(session_id=session.pk, error="boom")

    assert len(hook.received) == 1
    headers, body = hook.received[0]
    expected = hmac.new(owner_key.signing_secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Rootproof-Signature"] == f"sha256={expected}"
    payload = json.loads(body)
    assert payload["event"] == "diagnosis.finished"
    assert payload["diagnosis"]["id"] == str(session.public_id)
    assert payload["diagnosis"]["status"] == "failed"
    attempt = CallbackAttempt.objects.get(session=session)
    assert attempt.status_code == 200 and attempt.attempt == 1 and attempt.url == hook.url
    assert ApiSubmission.objects.get(session=session).callback_state == "delivered"


def test_a_tampered_body_does_not_verify(
    api, owner_key, environment, receiver_factory, django_capture_on_commit_callbacks
):
    hook = receiver_factory()
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    headers, body = hook.received[0]
    tampered = body.replace(b'"cancelled"', b'"completed"')
    forged = hmac.new(owner_key.signing_secret.encode(), tampered, hashlib.sha256).hexdigest()
    assert headers["X-Rootproof-Signature"] != f"sha256={forged}"


def test_a_failing_callback_is_retried_and_every_attempt_is_recorded(
    api, environment, receiver_factory, django_capture_on_commit_callbacks, settings
):
    settings.API_CALLBACK_MAX_ATTEMPTS = 3
    hook = receiver_factory(codes=[500, 503, 500, 200])
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    attempts = list(CallbackAttempt.objects.filter(session=session).order_by("attempt"))
    assert [(a.attempt, a.status_code) for a in attempts] == [(1, 500), (2, 503), (3, 500)]
    assert all(a.error for a in attempts)
    assert ApiSubmission.objects.get(session=session).callback_state == "failed"
    assert len(hook.received) == 3


def test_the_attempts_to_one_receiver_share_a_connection(
    api, environment, receiver_factory, django_capture_on_commit_callbacks
):
    hook = receiver_factory(codes=[500, 503, 200])
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    assert len(hook.received) == 3
    assert hook.connections == 1


def test_a_retry_that_succeeds_stops_the_retries(
    api, environment, receiver_factory, django_capture_on_commit_callbacks
):
    hook = receiver_factory(codes=[502, 200])
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    assert list(
        CallbackAttempt.objects.filter(session=session).values_list("status_code", flat=True)
    ) == [502, 200]
    assert ApiSubmission.objects.get(session=session).callback_state == "delivered"


def test_an_unreachable_callback_records_the_connection_error(
    api, environment, django_capture_on_commit_callbacks, settings
):
    settings.API_CALLBACK_MAX_ATTEMPTS = 2
    session = _submit(api, "http://127.0.0.1:9/hook", django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    attempts = CallbackAttempt.objects.filter(session=session)
    assert attempts.count() == 2
    assert all(a.status_code is None and "Connect" in a.error for a in attempts)


def test_a_revoked_key_gets_no_callback(
    api, owner_key, environment, receiver_factory, django_capture_on_commit_callbacks
):
    hook = receiver_factory()
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    api.post(f"/api/v1/api-keys/{owner_key.api_key.pk}/revoke")
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    assert hook.received == []
    attempt = CallbackAttempt.objects.get(session=session)
    assert "revoked" in attempt.error
    assert ApiSubmission.objects.get(session=session).callback_state == "failed"


def test_the_callback_attempts_are_listed_for_the_owner(
    api, outsider_api, environment, receiver_factory, django_capture_on_commit_callbacks
):
    hook = receiver_factory(codes=[500, 200])
    session = _submit(api, hook.url, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        diagnosis_cancel(session=session)
    body = api.get(f"/api/v1/diagnoses/{session.public_id}/callback-attempts").json()
    assert [a["status_code"] for a in body["results"]] == [500, 200]
    detail = api.get(f"/api/v1/diagnoses/{session.public_id}").json()
    assert detail["callback"]["state"] == "delivered"


def test_a_session_without_a_callback_enqueues_nothing(
    api, environment, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/v1/diagnoses", {"question": "q", "environment": "shop"}, format="json"
        )
    session = DiagnosisSession.objects.get(public_id=response.json()["id"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        diagnosis_cancel(session=session)
    assert callbacks == []


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data"],
)
def test_a_callback_to_a_private_address_is_refused_and_recorded(settings, url):
    from diagnosis.callbacks.services import callback_address_refusal

    settings.API_CALLBACK_ALLOW_PRIVATE = False
    assert "non-public address" in callback_address_refusal(url)


def test_a_callback_to_a_public_address_is_allowed(settings, monkeypatch):
    import socket

    from diagnosis.callbacks.services import callback_address_refusal

    settings.API_CALLBACK_ALLOW_PRIVATE = False
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("93.184.215.14", 443))]
    )
    assert callback_address_refusal("https://hooks.example.com/x") == ""
