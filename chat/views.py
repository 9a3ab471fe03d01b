"""The SRE chat: one template per page, its partials rendered for HTMX requests."""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget
from django_htmx.middleware import HtmxDetails

from chat.models import Conversation
from chat.selectors import (
    Turn,
    conversation_list_for_user,
    conversation_sessions_for_user,
    conversation_turns,
    environment_choices,
    environment_preselected,
    session_turn,
)
from chat.services import conversation_ask, conversation_create, feedback_record
from diagnosis.models import DiagnosisSession


class ChatRequest(HttpRequest):
    """A request the chat's views get: signed in (``login_required``), read by django-htmx."""

    user: User
    htmx: HtmxDetails


QUESTION_MAX_CHARS = 4000
PAGE = "chat/conversation_detail.html"


def _get_conversation_for_user(request: ChatRequest, pk: int) -> Conversation:
    return get_object_or_404(conversation_list_for_user(user=request.user), pk=pk)


def _get_session_for_user(request: ChatRequest, public_id: UUID) -> DiagnosisSession:
    return get_object_or_404(
        conversation_sessions_for_user(user=request.user).select_related("conversation"),
        public_id=public_id,
    )


def _question_from(request: ChatRequest) -> str:
    # PostgreSQL cannot store NUL in text; it carries no meaning in a question.
    return request.POST.get("question", "").replace("\x00", "")


def _question_error(question: str) -> str:
    if not question.strip():
        return _("请输入问题。")
    if len(question) > QUESTION_MAX_CHARS:
        return _("问题太长了（最多 %(max)s 个字符）。") % {"max": QUESTION_MAX_CHARS}
    return ""


def _turn_url(session: DiagnosisSession) -> str:
    url = reverse("chat:conversation_detail", args=[session.conversation_id])
    return f"{url}#turn-{session.public_id}"


def _new_turn_response(request: ChatRequest, session: DiagnosisSession) -> HttpResponse:
    """The new turn as a partial for HTMX, else a redirect to it on its conversation page."""
    if request.htmx:
        session.refresh_from_db()  # an eager run may already have finished it
        turn = session_turn(session=session, user=request.user)
        return render(request, f"{PAGE}#turn", {"turn": turn})
    return redirect(_turn_url(session))


def _conversations_with_counts(request: ChatRequest) -> QuerySet[Conversation]:
    return conversation_list_for_user(user=request.user).annotate(question_count=Count("sessions"))


@require_GET
@login_required
def conversation_list(request: ChatRequest) -> HttpResponse:
    conversations = _conversations_with_counts(request)
    return render(
        request,
        "chat/conversation_list.html",
        {
            "conversations": conversations,
            "environments": environment_choices(),
            "selected_environment": environment_preselected(),
        },
    )


@require_POST
@login_required
def conversation_new(request: ChatRequest) -> HttpResponse:
    environment = environment_choices().filter(pk=request.POST.get("environment") or 0).first()
    question = _question_from(request)
    error = "" if environment else _("请选择一个环境。")
    if not error and question.strip():
        error = _question_error(question)
    if error or environment is None:
        context = {
            "conversations": _conversations_with_counts(request),
            "environments": environment_choices(),
            "selected_environment": environment.pk if environment else environment_preselected(),
            "error": error,
            "question": question,
        }
        return render(request, "chat/conversation_list.html", context, status=400)
    conversation = conversation_create(owner=request.user, environment=environment)
    if question.strip():
        conversation_ask(
            conversation=conversation,
            question=question,
            user=request.user,
            language_code=request.LANGUAGE_CODE,
        )
    return redirect("chat:conversation_detail", pk=conversation.pk)


@require_GET
@login_required
def conversation_detail(request: ChatRequest, pk: int) -> HttpResponse:
    conversation = _get_conversation_for_user(request, pk)
    turns = conversation_turns(conversation=conversation, user=request.user)
    return render(
        request,
        PAGE,
        {
            "conversation": conversation,
            "turns": turns,
            "any_running": any(t.progress for t in turns),
        },
    )


@require_POST
@login_required
def conversation_question(request: ChatRequest, pk: int) -> HttpResponse:
    conversation = _get_conversation_for_user(request, pk)
    question = _question_from(request)
    error = _question_error(question)
    if error:
        if request.htmx:
            response = render(request, f"{PAGE}#ask_error", {"error": error})
            return reswap(retarget(response, "#ask-error"), "innerHTML")
        turns = conversation_turns(conversation=conversation, user=request.user)
        context = {"conversation": conversation, "turns": turns, "error": error}
        return render(request, PAGE, context, status=400)
    session = conversation_ask(
        conversation=conversation,
        question=question,
        user=request.user,
        language_code=request.LANGUAGE_CODE,
    )
    return _new_turn_response(request, session)


@require_GET
@login_required
def session_detail(request: ChatRequest, public_id: UUID) -> HttpResponse:
    """One question and its answer with the whole evidence view; for HTMX, the evidence only."""
    session = _get_session_for_user(request, public_id)
    turn = session_turn(session=session, user=request.user)
    if request.htmx and turn.evidence is not None:
        return render(request, f"{PAGE}#evidence", {"turn": turn})
    return render(request, "chat/session_detail.html", {"turn": turn, "session": session})


@require_GET
@login_required
def session_progress(request: ChatRequest, public_id: UUID) -> HttpResponse:
    """The polled progress partial; once the session ends, the answer (which does not poll)."""
    session = _get_session_for_user(request, public_id)
    if not request.htmx:
        return redirect("chat:session_detail", public_id=session.public_id)
    turn: Turn = session_turn(session=session, user=request.user)
    partial = "progress" if turn.progress is not None else "answer"
    return render(request, f"{PAGE}#{partial}", {"turn": turn})


@require_POST
@login_required
def session_retry(request: ChatRequest, public_id: UUID) -> HttpResponse:
    """Ask a failed (or cancelled) question again, as a new session in the same conversation."""
    failed = _get_session_for_user(request, public_id)
    conversation = failed.conversation  # never None: the lookup reads chat sessions only
    if conversation is None or failed.status not in (
        DiagnosisSession.Status.FAILED,
        DiagnosisSession.Status.CANCELLED,
    ):
        return HttpResponse(status=409)
    session = conversation_ask(
        conversation=conversation,
        question=failed.original_query,
        user=request.user,
        language_code=request.LANGUAGE_CODE,
    )
    return _new_turn_response(request, session)


@require_POST
@login_required
def session_feedback(request: ChatRequest, public_id: UUID) -> HttpResponse:
    session = _get_session_for_user(request, public_id)
    helpful = request.POST.get("helpful")
    if helpful not in {"1", "0"}:
        return HttpResponse(_("请选择“有帮助”或“没有帮助”。"), status=400)
    feedback = feedback_record(
        session=session,
        user=request.user,
        helpful=helpful == "1",
        comment=request.POST.get("comment", ""),
    )
    if request.htmx:
        turn = Turn(session=session, feedback=feedback)
        return render(request, f"{PAGE}#feedback", {"turn": turn, "saved": True})
    return redirect(_turn_url(session))
