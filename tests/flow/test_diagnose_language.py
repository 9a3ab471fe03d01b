"""`manage.py diagnose` picks the answer's language as chat and the API do."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from diagnosis.models import DiagnosisSession
from tests.flow.conftest import MINI_PACK


def _diagnose(*args: str) -> DiagnosisSession:
    call_command("diagnose", *args, "--pack", str(MINI_PACK), stdout=StringIO())
    return DiagnosisSession.objects.latest("id")


@pytest.mark.django_db
def test_an_english_question_is_answered_in_english():
    assert _diagnose("payment-service has been timing out since 10:20").language == "en"


@pytest.mark.django_db
def test_a_chinese_question_is_answered_in_chinese():
    assert _diagnose("payment-service 从 10:20 开始大量超时").language == "zh-CN"


@pytest.mark.django_db
def test_the_language_option_still_overrides_the_question():
    session = _diagnose("payment-service has been timing out since 10:20", "--language", "zh-CN")
    assert session.language == "zh-CN"
