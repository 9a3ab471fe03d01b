"""Reviewers read the Gatekeeper's findings and the routing notes in their page's language,
and evidence is numbered from 1 as in the chat."""

from __future__ import annotations

import pytest
from django.urls import reverse

from diagnosis.api.selectors import diagnosis_detail
from diagnosis.api.serializers import DiagnosisDetailSerializer
from diagnosis.flow.parsing import executor_output_parse
from diagnosis.flow.router import scope_note
from tests.support.gatekeeper import gatekeeper_run

RECORDED_IN_ENGLISH = "（原文：英文）"


@pytest.fixture
def checked(make_session):
    """The fixture session re-checked by the real Gatekeeper, with a coded routing note."""
    session = make_session()
    gatekeeper_run(session=session, parsed=executor_output_parse(session.executor_final_answer))
    session.refresh_from_db()
    text, code = scope_note(["mysql"])
    evaluation = dict(session.self_evaluation)
    evaluation["verifier_evaluation"] = {
        **evaluation["verifier_evaluation"],
        "route_notes": [text],
        "route_note_codes": [code.model_dump()],
    }
    session.self_evaluation = evaluation
    session.save()
    return session


def _read(client, session, language="zh-hans"):
    client.cookies["django_language"] = language
    return client.get(reverse("audit:session_read", args=[session.public_id])).content.decode()


def _change(client, session, language="zh-hans"):
    client.cookies["django_language"] = language
    url = reverse("admin:diagnosis_diagnosissession_change", args=[session.pk])
    return client.get(url).content.decode()


def test_a_chinese_reviewer_reads_findings_and_routing_notes_in_chinese(client, reviewer, checked):
    client.force_login(reviewer)
    for page in (_read(client, checked), _change(client, checked)):
        assert "输出中没有这段摘录：“mysql down”" in page
        assert "问题提到了环境中没有的服务（mysql）" in page
        assert "not found in the output" not in page
        assert "question names services the environment lacks" not in page
        assert RECORDED_IN_ENGLISH not in page


def test_an_english_reviewer_reads_them_in_english(client, reviewer, checked):
    client.force_login(reviewer)
    for page in (_read(client, checked, "en"), _change(client, checked, "en")):
        assert "the excerpt is not in the output: “mysql down”" in page
        assert "the question names services the environment lacks (mysql)" in page
        assert "(recorded in English)" not in page


def test_a_session_recorded_before_the_codes_shows_its_english_text_labelled(
    client, reviewer, make_session
):
    session = make_session()  # its report and notes carry text only
    client.force_login(reviewer)
    for page in (_read(client, session), _change(client, session)):
        assert "mysql down" in page and "demoted" in page
        assert RECORDED_IN_ENGLISH in page


def test_evidence_is_numbered_from_one_on_the_audit_pages(client, reviewer, checked):
    client.force_login(reviewer)
    page = _read(client, checked)
    claim_3 = page.split('id="claim-claim-3"')[1]
    assert '<a href="#claim-claim-3-b0">（证据 1）</a>' in claim_3  # the finding's binding
    assert 'id="claim-claim-3-b0"' in claim_3  # anchors keep the stored index
    assert "#0<" not in page and "#0 " not in page
    assert "由证据 1 的摘录绑定" in page or "由证据 1 所引调用的参数绑定" in page
    english = _read(client, checked, "en").split('id="claim-claim-3"')[1]
    assert '<div class="rp-binding-head">Evidence 1 ' in english  # a binding's heading
    assert '<a href="#claim-claim-3-b0"> (evidence 1)</a>' in english  # after a finding


def test_the_api_detail_keeps_the_stored_english_detail_and_adds_its_code(checked):
    detail = DiagnosisDetailSerializer(diagnosis_detail(session=checked)).data
    claims = {c["claim_id"]: c for c in detail["claims"]}
    finding = claims["claim-3"]["gatekeeper"]["findings"][0]
    assert finding["detail"] == "trace-2: excerpt not found in the output: 'mysql down'"
    assert finding["detail_code"] == "excerpt_not_found"
    assert finding["detail_params"] == {"text": "mysql down", "trace_ref": "trace-2"}


@pytest.fixture
def guarded(make_session):
    """A session whose composed answer the Composer guard refused."""
    session = make_session()
    evaluation = dict(session.self_evaluation)
    verifier = dict(evaluation.get("verifier_evaluation") or {})
    verifier["composer_output"] = {
        **(verifier.get("composer_output") or {}),
        "status": "guard_failed",
        "guard_findings": ["new_time:10:45", "raw_field:evidence_bindings", "answer_is_json"],
    }
    evaluation["verifier_evaluation"] = verifier
    session.self_evaluation = evaluation
    session.answer_source = "fallback"
    session.save()
    return session


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("zh-hans", ["撰写输入中没有的时间：10:45", "内部字段：evidence_bindings", "回答是 JSON"]),
        ("en", ["a time the Composer input lacks: 10:45", "an internal field", "is JSON"]),
    ],
)
def test_a_reviewer_reads_the_composer_guards_findings_in_words(
    client, reviewer, guarded, language, expected
):
    client.force_login(reviewer)
    for page in (_read(client, guarded, language), _change(client, guarded, language)):
        for words in expected:
            assert words in page
        assert 'title="new_time:10:45"' in page  # the stored finding stays at hand
