"""Writes of the chat: conversations, questions (through diagnosis_submit), feedback."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from chat.models import Conversation, Feedback
from diagnosis.models import DiagnosisSession, Environment
from diagnosis.services import answer_language_pick, diagnosis_submit

TITLE_MAX_CHARS = 60


def conversation_create(*, owner: User, environment: Environment, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=owner, environment=environment, title=title[:200])


def conversation_history(
    *, conversation: Conversation, max_chars: int | None = None
) -> list[dict[str, str]]:
    """Earlier questions and final answers, oldest first, the most recent kept within budget.

    Only answered (completed) turns count: a failed or running turn has no answer the
    Planner could build on, and nothing else of a session (claims, tool output) goes in.
    """
    budget = settings.DIAGNOSIS_HISTORY_MAX_CHARS if max_chars is None else max_chars
    turns = (
        conversation.sessions.filter(status=DiagnosisSession.Status.COMPLETED)
        .exclude(final_answer="")
        .order_by("-created_at", "-id")
        .values_list("original_query", "final_answer")
    )
    kept: list[dict[str, str]] = []
    used = 0
    for question, answer in turns.iterator():
        size = len(question) + len(answer)
        if used + size > budget:
            room = budget - used - len(question)
            if not kept and room > 0:
                # The latest turn alone is over budget: keep its question and the answer's start.
                kept.append({"question": question, "answer": answer[:room]})
            break
        kept.append({"question": question, "answer": answer})
        used += size
    kept.reverse()
    return kept


def title_from_question(question: str) -> str:
    """A conversation title: the question's first line, cut at a word with an ellipsis."""
    first = question.strip().splitlines()[0].strip() if question.strip() else ""
    if len(first) <= TITLE_MAX_CHARS:
        return first
    cut = first[: TITLE_MAX_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TITLE_MAX_CHARS // 2:  # a word boundary that keeps most of the line
        cut = cut[:space]
    return cut.rstrip(" ,.;:，。；：") + "…"


@transaction.atomic
def conversation_ask(
    *, conversation: Conversation, question: str, user: User, language_code: str
) -> DiagnosisSession:
    """Ask a question in a conversation; its run is enqueued after commit."""
    question = question.strip()
    context: dict[str, Any] = {"history": conversation_history(conversation=conversation)}
    session = diagnosis_submit(
        question=question,
        environment=conversation.environment,
        owner=user,
        source=DiagnosisSession.Source.CHAT,
        language=answer_language_pick(question=question, ui_language=language_code),
        context=context,
        conversation=conversation,
    )
    if not conversation.title:
        conversation.title = title_from_question(question)
    conversation.save(update_fields=["title", "updated_at"])
    return session


def feedback_record(
    *, session: DiagnosisSession, user: User, helpful: bool, comment: str
) -> Feedback:
    feedback, _ = Feedback.objects.update_or_create(
        session=session,
        user=user,
        defaults={"helpful": helpful, "comment": comment.strip()[:2000]},
    )
    return feedback
