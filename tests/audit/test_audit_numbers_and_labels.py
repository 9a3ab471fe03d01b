"""Numbers and labels on the dashboard, the session list and the admin index, as read."""

import re

import pytest
from django.urls import reverse

from audit.templatetags.audit_tags import percent, share
from diagnosis.charts import bar_chart


@pytest.mark.parametrize(
    ("part", "whole", "shown"),
    [
        (813, 816, "99.6%"),
        (3, 816, "0.4%"),
        (1, 5000, "<0.1%"),
        (4999, 5000, ">99.9%"),
        (0, 816, "0.0%"),
        (816, 816, "100.0%"),
        (1, 3, "33.3%"),
    ],
)
def test_a_share_never_rounds_a_part_to_all_or_nothing(part, whole, shown):
    assert share(part, whole) == shown
    assert percent(part / whole) == shown


def test_a_share_of_nothing_is_a_dash():
    assert share(0, 0) == "—" and percent(None) == "—"


def test_long_axis_labels_are_broken_into_lines_within_their_slot():
    names = [
        "Direct observation",
        "Reasonable inference",
        "Overstated",
        "Unsupported",
        "Beyond the evidence",
        "Contradicted by evidence",
    ]
    svg = str(bar_chart(title="t", labels=names, series={"Claims": [813, 3, 0, 0, 0, 0]}))
    assert re.search(r'dy="0">Direct</tspan><tspan x="[\d.]+" dy="12">observation</tspan>', svg)
    assert re.search(r'dy="0">Overstated</tspan></text>', svg)  # a short one stays whole
    assert "<title>Reasonable inference</title>" in svg  # the whole label stays at hand


@pytest.mark.django_db
def test_the_dashboard_shows_classification_shares_with_one_decimal(client, reviewer, make_session):
    make_session()  # 3 claims: two direct observations, one unsupported
    client.force_login(reviewer)
    content = client.get(reverse("audit:dashboard")).content.decode()
    assert "2 (66.7%)" in content and "1 (33.3%)" in content


@pytest.mark.django_db
def test_the_session_list_names_parse_statuses_and_tokens_in_the_reader_s_language(
    client, reviewer, make_session
):
    make_session()
    client.force_login(reviewer)
    url = reverse("admin:diagnosis_diagnosissession_changelist")
    content = client.get(url).content.decode()
    filters = content[content.index('id="changelist-filter"') :]
    assert "已解析（旧格式 v1）" in filters and ">parsed_v1<" not in filters
    assert "词元数" in content and not re.search(r">\s*tokens\s*<", content)
    assert '<span class="rp-label" title="parsed_v2">已解析</span>' in content
    assert "1,200" in content  # tokens with a thousands separator
    client.post(reverse("set_language"), {"language": "en", "next": "/"})
    content = client.get(url).content.decode()
    assert "Tokens" in content and "Output cut off" in content


@pytest.mark.django_db
def test_the_admin_index_links_to_the_quality_dashboard(client, reviewer):
    client.force_login(reviewer)
    content = client.get(reverse("admin:index")).content.decode()
    assert reverse("audit:dashboard") in content
