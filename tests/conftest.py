from __future__ import annotations

import ipaddress
import socket

import pytest


def _is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return True  # AF_UNIX paths and the like never leave the machine
    if host in {"localhost", ""}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class NetworkBlocked(ConnectionRefusedError):
    """A connection the test guard refused: an OSError, as an unreachable network is, so the
    product's own handling of a failed connection runs (no test-only exception type crashing
    a request); the guard still fails the test afterwards."""


@pytest.fixture(autouse=True)
def _no_network_beyond_loopback(monkeypatch, request):
    """Any connection to a non-loopback address fails the test (no real LLM, no internet).

    A test marked ``unreachable_network`` may meet such an address in generated input (a
    callback URL with a public IP literal): the connection fails as on a network that does not
    reach it, and the test is judged on what the product did with that.
    """
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    attempts: list[object] = []

    def guarded(method):
        def connect(self, address, *args, **kwargs):
            host = address[0] if isinstance(address, tuple) else address
            if not _is_loopback(host):
                attempts.append(address)
                raise NetworkBlocked(f"test tried to reach a non-loopback address: {address!r}")
            return method(self, address, *args, **kwargs)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guarded(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(real_connect_ex))
    yield
    if attempts and request.node.get_closest_marker("unreachable_network") is None:
        pytest.fail(f"test tried to reach non-loopback addresses: {attempts!r}")


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="owner", password="pw-owner-1")


@pytest.fixture
def teammate(django_user_model):
    return django_user_model.objects.create_user(username="teammate", password="pw-team-1")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user(username="outsider", password="pw-out-1")


@pytest.fixture
def reviewer(django_user_model, db):
    from diagnosis.demo import reviewers_group_ensure

    user = django_user_model.objects.create_user(
        username="reviewer", password="pw-rev-1", is_staff=True
    )
    user.groups.add(reviewers_group_ensure())
    return user


@pytest.fixture(autouse=True)
def _llm_endpoint_memory_forgotten():
    """What one test's fake endpoint refused must not reach the next (ports are reused)."""
    yield
    from diagnosis.llm.openai_provider import endpoint_capabilities_forget

    endpoint_capabilities_forget()


@pytest.fixture(autouse=True)
def _prometheus_metadata_forgotten(monkeypatch):
    """One test's Prometheus metric types must not reach the next (URLs and ports are reused)."""
    monkeypatch.setattr("diagnosis.evidence.tools.query_metrics.prometheus._metadata", {})


@pytest.fixture
def no_flow_runs(monkeypatch):
    """Submitted sessions are not queued: the test looks at what the request stored."""
    monkeypatch.setattr("diagnosis.tasks.diagnosis_run_task.delay", lambda *a, **k: None)
