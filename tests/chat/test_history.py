"""A follow-up carries earlier questions and final answers only, bounded, most recent kept."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from chat.services import conversation_history
from tests.chat.factories import session_make


@pytest.fixture(autouse=True)
def _no_run(monkeypatch):
    from diagnosis import tasks

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)


def _answered(conversation, index, answer="答"):
    return session_make(
        conversation=conversation,
        question=f"问题{index}",
        answer=answer,
        created_at=timezone.now() - timedelta(minutes=100 - index),
    )


@pytest.mark.django_db
def test_a_follow_up_carries_only_earlier_questions_and_final_answers(owner_client, conversation):
    _answered(conversation, 1, answer="第一次的回答")
    session_make(conversation=conversation, status="failed", question="失败的问题")
    owner_client.post(
        reverse("chat:conversation_question", args=[conversation.pk]), {"question": "追问"}
    )
    follow_up = conversation.sessions.get(original_query="追问")
    assert follow_up.context["history"] == [{"question": "问题1", "answer": "第一次的回答"}]
    # Nothing else of the earlier session reaches the Planner: no claims, no tool output.
    assert "trace-1" not in str(follow_up.context)
    assert "window max" not in str(follow_up.context)


@pytest.mark.django_db
def test_history_is_bounded_keeping_the_most_recent_turns_in_order(conversation, settings):
    for index in range(10):
        _answered(conversation, index, answer="x" * 96)  # 100 characters a turn
    settings.DIAGNOSIS_HISTORY_MAX_CHARS = 350
    history = conversation_history(conversation=conversation)
    assert [h["question"] for h in history] == ["问题7", "问题8", "问题9"]
    assert sum(len(h["question"]) + len(h["answer"]) for h in history) <= 350


@pytest.mark.django_db
def test_an_oversized_latest_turn_is_cut_to_the_budget(conversation):
    _answered(conversation, 1, answer="y" * 5000)
    history = conversation_history(conversation=conversation, max_chars=200)
    assert len(history) == 1
    assert len(history[0]["question"]) + len(history[0]["answer"]) == 200


@pytest.mark.django_db
def test_the_first_question_has_no_history(owner_client, conversation):
    owner_client.post(
        reverse("chat:conversation_question", args=[conversation.pk]), {"question": "第一个"}
    )
    assert conversation.sessions.get().context["history"] == []


def test_a_long_question_becomes_a_title_cut_at_a_word_with_an_ellipsis():
    from chat.services import TITLE_MAX_CHARS, title_from_question

    question = "why does the payment-service time out " + "again and again " * 10
    title = title_from_question(question)
    assert len(title) <= TITLE_MAX_CHARS and title.endswith("…")
    assert question.startswith(title[:-1]) and question[len(title) - 1] == " "
    assert title_from_question("支付服务超时" * 20).endswith("…")
    assert title_from_question("short\nsecond line") == "short"
