"""Debian's prometheus-alertmanager sends its webhooks to the live test server."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from diagnosis.alerts.services import alert_receiver_create
from diagnosis.api import alerts
from diagnosis.models import AlertGroupStart, DiagnosisSession, Environment
from tests.support.binaries import require_binary
from tests.support.prometheus import free_port
from tests.support.workers import wait_until

pytestmark = [pytest.mark.alertmanager, pytest.mark.django_db(transaction=True)]

CONFIG = """
route:
  receiver: rootproof
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: rootproof
    webhook_configs:
      - url: {url}
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: {token}
"""


@pytest.fixture
def ingested(monkeypatch):
    """Every notification result the webhook produced, in order."""
    results = []
    real = alerts.alertmanager_notification_ingest

    def spy(**kwargs):
        result = real(**kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(alerts, "alertmanager_notification_ingest", spy)
    return results


@pytest.fixture
def alertmanager(live_server, tmp_path, owner, monkeypatch, settings):
    binary = require_binary("/usr/bin/prometheus-alertmanager")
    from diagnosis import tasks

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)
    settings.API_RATE_LIMIT = "10000/min"
    environment = Environment.objects.create(slug="prod", name="Prod")
    _, token = alert_receiver_create(
        slug="prod-am", name="Prod", owner=owner, environment=environment
    )
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        CONFIG.format(
            url=f"{live_server.url}/api/v1/integrations/alertmanager/prod-am", token=token
        )
    )
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "alertmanager.log").open("w"),
    )
    base = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return httpx.get(f"{base}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_until(ready, timeout=30), "alertmanager did not start"
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _push(
    base: str, *, starts_at: datetime, ends_at: datetime | None = None, instance: str = "a"
) -> None:
    alert = {
        "labels": {
            "alertname": "HighErrorRate",
            "service": "checkout-service",
            "severity": "critical",
            "instance": instance,
        },
        "annotations": {"summary": "checkout-service 5xx 比例超过 5%"},
        "startsAt": starts_at.isoformat().replace("+00:00", "Z"),
        "generatorURL": "http://prometheus.invalid/graph",
    }
    if ends_at is not None:
        alert["endsAt"] = ends_at.isoformat().replace("+00:00", "Z")
    response = httpx.post(f"{base}/api/v2/alerts", json=[alert], timeout=5)
    assert response.status_code == 200, response.text


def test_a_firing_group_starts_one_session_and_its_resolution_starts_none(
    alertmanager, ingested, owner
):
    starts_at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
    _push(alertmanager, starts_at=starts_at)

    assert wait_until(lambda: any(r.reason == "started" for r in ingested), timeout=30), (
        "no firing webhook"
    )
    session = DiagnosisSession.objects.get()
    assert session.source == DiagnosisSession.Source.ALERT
    assert session.owner == owner
    assert session.original_query.startswith("告警 HighErrorRate 触发：service=checkout-service")
    assert AlertGroupStart.objects.get().starts_at == starts_at

    # a second alert joins the group: Alertmanager notifies again, nothing new starts
    _push(alertmanager, starts_at=starts_at + timedelta(seconds=30), instance="b")
    assert wait_until(lambda: any(r.reason == "duplicate" for r in ingested), timeout=30), (
        "no repeat webhook"
    )
    assert DiagnosisSession.objects.count() == 1

    ended = datetime.now(UTC) - timedelta(seconds=5)
    _push(alertmanager, starts_at=starts_at, ends_at=ended)
    _push(alertmanager, starts_at=starts_at + timedelta(seconds=30), ends_at=ended, instance="b")
    assert wait_until(lambda: any(r.reason == "resolved" for r in ingested), timeout=30), (
        "no resolved webhook"
    )
    assert DiagnosisSession.objects.count() == 1
    assert [r.reason for r in ingested].count("started") == 1
