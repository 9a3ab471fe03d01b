"""The answer speaks the question's language, then the UI's, then Chinese."""

import pytest

from diagnosis.services import answer_language_pick


@pytest.mark.parametrize(
    ("question", "ui", "expected"),
    [
        ("payment-service 从 10:20 开始大量超时", "en", "zh-CN"),
        ("why is payment-service timing out since 10:20?", None, "en"),
        ("why is payment-service timing out since 10:20?", "zh-hans", "en"),
        ("payment-service 10:20", "en", "en"),
        ("payment-service 10:20", "zh-hans", "zh-CN"),
        ("payment-service 10:20", None, "zh-CN"),
        ("ERROR HikariPool-1 timeout", None, "en"),
        ("決済サービスが遅い", None, "zh-CN"),
        ("", None, "zh-CN"),
    ],
)
def test_the_answer_language_follows_the_question_then_the_ui(question, ui, expected):
    assert answer_language_pick(question=question, ui_language=ui) == expected
