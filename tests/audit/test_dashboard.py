"""The reviewers' quality dashboard: numbers from the database, drawn as escaped SVG."""

import pytest
from django.urls import reverse

from audit.services import ClaimJudgement, review_record
from diagnosis.charts import bar_chart, line_chart
from tests.audit.conftest import XSS

pytestmark = pytest.mark.django_db


def test_the_dashboard_counts_decisions_demotions_fallbacks_reviews_and_tokens(
    client, reviewer, make_session
):
    reviewed = make_session()
    make_session(answer_source="fallback")
    make_session(decision="LOW_CONFID")
    review_record(
        session=reviewed,
        reviewer=reviewer,
        verdict="correct",
        claims=[
            ClaimJudgement(claim_id="claim-1", agrees_with_verifier=True),
            ClaimJudgement(claim_id="claim-2", agrees_with_verifier=True),
            ClaimJudgement(claim_id="claim-3", agrees_with_verifier=False),
        ],
    )
    client.force_login(reviewer)
    response = client.get(reverse("audit:dashboard"), {"days": "7"})
    assert response.status_code == 200
    data = response.context["data"]
    assert len(data.days) == 7
    assert sum(data.sessions_by_decision["PASS"]) == 2
    assert sum(data.sessions_by_decision["LOW_CONFID"]) == 1
    assert (data.claims_total, data.claims_demoted) == (9, 3)
    assert data.demoted_share == pytest.approx(1 / 3, abs=1e-3)
    assert data.classifications["direct_observation"] == 6
    assert data.classifications["unsupported"] == 3
    assert (data.completed, data.fallbacks) == (3, 1)
    assert data.unreviewed_count == 2
    assert (data.claim_reviews, data.claim_agreements) == (3, 2)
    assert data.agreement_by_classification == {
        "direct_observation": (2, 2),
        "unsupported": (0, 1),
    }
    assert data.review_verdicts["correct"] == 1
    assert sum(data.tokens_by_day) == 3 * 4 * 280
    content = response.content.decode()
    assert content.count('<svg class="rp-chart"') == 5
    assert "33.3%" in content  # the number beside the chart


def test_the_dashboard_days_parameter_is_bounded(client, reviewer):
    client.force_login(reviewer)
    assert len(client.get(reverse("audit:dashboard"), {"days": "10000"}).context["data"].days) == 90
    assert len(client.get(reverse("audit:dashboard"), {"days": "x"}).context["data"].days) == 14


def test_chart_labels_and_titles_are_escaped():
    bars = str(bar_chart(title=XSS, labels=[XSS], series={XSS: [3]}))
    lines = str(line_chart(title=XSS, labels=[XSS, "b"], series={XSS: [1, 2]}))
    for svg in (bars, lines):
        assert XSS not in svg
        assert "&lt;script&gt;" in svg
        assert svg.count("<svg") == 1
