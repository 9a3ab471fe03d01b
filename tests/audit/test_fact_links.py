"""The audit change page links each fact of a claim to the binding that binds it (gatekeeper_v2)."""

import json

import pytest
from django.urls import reverse
from django.utils import translation

from diagnosis.flow.parsing import executor_output_parse
from tests.support.gatekeeper import gatekeeper_run

pytestmark = pytest.mark.django_db

UNBOUND = {
    "claim_id": "claim-4",
    "claim_type": "symptom",
    "claim_text": "HikariPool-7 报错 900 次",
    "support_level": "direct",
    "evidence_bindings": [
        {
            "source_type": "tool_trace",
            "source_id": "trace-1",
            "evidence_excerpt": "Connection is not available, request timed out after 30000ms",
        }
    ],
}


def _checked(session):
    structured = dict(session.executor_structured_output)
    structured["claims"] = [*structured["claims"], UNBOUND]
    session.executor_structured_output = structured
    session.save()
    gatekeeper_run(session=session, parsed=executor_output_parse(json.dumps(structured)))
    session.refresh_from_db()
    return session


def _change_page(client, session):
    url = reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    return client.get(url).content.decode()


def test_a_bound_fact_links_to_its_binding_and_an_unbound_one_is_marked(
    client, reviewer, make_session
):
    session = _checked(make_session())
    client.force_login(reviewer)
    content = _change_page(client, session)
    assert 'id="claim-claim-2-b0"' in content
    assert 'href="#claim-claim-2-b0"' in content
    assert (
        '<span class="rp-fact rp-fact-unbound" title="没有证据绑定这个事实">900</span>' in content
    )
    assert ">HikariPool-7</span>" in content
    assert "陈述中的事实不在摘录中" in content  # claim_fact_unbound in words
    assert "claim_fact_unbound" in content  # the code stays visible to reviewers


def test_the_audit_page_names_the_v2_findings_in_english(client, reviewer, make_session):
    session = _checked(make_session())
    client.force_login(reviewer)
    with translation.override("en"):
        client.cookies["django_language"] = "en"
        content = _change_page(client, session)
    assert "a fact it states is not in its excerpts" in content
    assert 'title="no evidence binds this fact"' in content


def test_a_stored_v1_report_reads_as_before_without_fact_links(client, reviewer, make_session):
    session = make_session()
    assert session.self_evaluation["gatekeeper"]["gatekeeper_version"] == "gatekeeper_v1"
    client.force_login(reviewer)
    content = _change_page(client, session)
    assert "payment-service 连接池活跃连接达到上限 20" in content
    assert "rp-fact" not in content
