import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from diagnosis.models import DiagnosisSession, Environment, ToolInvocation


@pytest.fixture
def session(db, owner):
    env = Environment.objects.create(slug="env", name="env")
    return DiagnosisSession.objects.create(owner=owner, environment=env, original_query="q")


def _invocation(session, sequence, trace_ref):
    return ToolInvocation.objects.create(
        session=session,
        sequence=sequence,
        trace_ref=trace_ref,
        tool_name="query_logs",
        status=ToolInvocation.Status.OK,
        started_at=timezone.now(),
    )


def test_a_duplicate_trace_ref_in_a_session_is_rejected(session):
    _invocation(session, 1, "trace-1")
    with pytest.raises(IntegrityError), transaction.atomic():
        _invocation(session, 2, "trace-1")


def test_a_duplicate_sequence_in_a_session_is_rejected(session):
    _invocation(session, 1, "trace-1")
    with pytest.raises(IntegrityError), transaction.atomic():
        _invocation(session, 1, "trace-2")


def test_the_same_trace_ref_is_fine_in_another_session(session, owner):
    other = DiagnosisSession.objects.create(
        owner=owner, environment=session.environment, original_query="q2"
    )
    _invocation(session, 1, "trace-1")
    _invocation(other, 1, "trace-1")
    assert ToolInvocation.objects.filter(trace_ref="trace-1").count() == 2


def test_the_two_core_tables_have_their_contract_names():
    assert DiagnosisSession._meta.db_table == "diagnosis_session"
    assert ToolInvocation._meta.db_table == "tool_invocation"


@pytest.mark.django_db
def test_migrations_are_complete():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.parametrize("url", ["http://prometheus:9090", "https://loki.internal/base"])
def test_an_environment_accepts_cluster_internal_urls(url):
    from diagnosis.models import validate_service_url

    validate_service_url(url)


@pytest.mark.parametrize("url", ["ftp://x", "http://", "prometheus:9090", "http://x:99999"])
def test_an_environment_rejects_a_url_that_is_not_http(url):
    from django.core.exceptions import ValidationError

    from diagnosis.models import validate_service_url

    with pytest.raises(ValidationError):
        validate_service_url(url)
