from __future__ import annotations

import pytest

from diagnosis.evidence.services import environments_sync_from_packs
from diagnosis.models import DiagnosisSession, Environment
from tests.evidence.packbuilder import pack_write


@pytest.fixture
def pack_dir(tmp_path):
    return pack_write(tmp_path / "packs" / "fixture-pool")


@pytest.fixture
def scenario_environment(db, pack_dir):
    (environment,) = environments_sync_from_packs(dirs=[pack_dir.parent])
    return environment


@pytest.fixture
def session(owner, scenario_environment):
    return DiagnosisSession.objects.create(
        owner=owner, environment=scenario_environment, original_query="pay 为什么超时"
    )


@pytest.fixture
def live_environment(db):
    return Environment.objects.create(
        slug="live", name="Live", kind=Environment.Kind.LIVE, services=["pay"]
    )


@pytest.fixture
def live_session(owner, live_environment):
    return DiagnosisSession.objects.create(
        owner=owner,
        environment=live_environment,
        original_query="pay 为什么超时",
        context={
            "now": "2026-03-02T10:40:00Z",
            "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
        },
    )
