"""The conversation pages: listing, starting, asking, progress, answer, evidence, feedback."""

import pytest
from django.test import Client
from django.urls import reverse

from chat.models import Conversation, Feedback
from diagnosis.models import DiagnosisSession
from tests.chat.factories import session_make

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _no_run(monkeypatch):
    """These tests look at pages, not runs: the enqueued run does nothing."""
    from diagnosis import tasks

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)


@pytest.mark.django_db
def test_starting_a_conversation_binds_it_to_the_chosen_environment_and_asks(
    owner_client, owner, environment, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(
            reverse("chat:conversation_new"),
            {"environment": environment.pk, "question": "支付服务为什么超时？"},
        )
    conversation = Conversation.objects.get(owner=owner)
    assert response.status_code == 302
    assert response["Location"] == reverse("chat:conversation_detail", args=[conversation.pk])
    assert conversation.environment == environment
    assert conversation.title == "支付服务为什么超时？"
    session = conversation.sessions.get()
    assert session.owner == owner and session.environment == environment
    assert session.source == "chat"


@pytest.mark.django_db
def test_an_inactive_environment_cannot_be_chosen(owner_client, owner, environment):
    environment.is_active = False
    environment.save()
    response = owner_client.post(reverse("chat:conversation_new"), {"environment": environment.pk})
    assert response.status_code == 400
    assert not Conversation.objects.filter(owner=owner).exists()


@pytest.mark.django_db
def test_asking_through_htmx_returns_the_new_turn_which_polls_for_progress(
    owner_client, conversation
):
    response = owner_client.post(
        reverse("chat:conversation_question", args=[conversation.pk]),
        {"question": "数据库连接池为什么满了？"},
        **HTMX,
    )
    session = conversation.sessions.get()
    body = response.content.decode()
    assert response.status_code == 200
    assert f'id="turn-{session.public_id}"' in body
    assert "数据库连接池为什么满了？" in body
    assert 'hx-trigger="every 1s"' in body
    assert "<html" not in body


@pytest.mark.django_db
def test_asking_without_javascript_redirects_to_the_new_turn(owner_client, conversation):
    response = owner_client.post(
        reverse("chat:conversation_question", args=[conversation.pk]), {"question": "为什么？"}
    )
    session = conversation.sessions.get()
    assert response.status_code == 302
    assert response["Location"].endswith(f"#turn-{session.public_id}")


@pytest.mark.django_db
def test_an_empty_question_is_refused_with_a_message(owner_client, conversation):
    response = owner_client.post(
        reverse("chat:conversation_question", args=[conversation.pk]), {"question": "  "}, **HTMX
    )
    assert "请输入问题" in response.content.decode()
    assert response["HX-Retarget"] == "#ask-error"
    assert not conversation.sessions.exists()


@pytest.mark.django_db
def test_the_progress_partial_shows_stage_tool_calls_and_elapsed_time(owner_client, conversation):
    running = session_make(conversation=conversation, status="running")
    response = owner_client.get(reverse("chat:session_progress", args=[running.public_id]), **HTMX)
    body = response.content.decode()
    assert 'hx-trigger="every 1s"' in body
    assert "取证" in body  # the executor stage in plain words
    assert "query_metrics" in body and "metric=db_pool_active_connections" in body
    assert "trace-1" in body and "成功" in body
    assert "query_logs" in body and "进行中" in body
    assert "已用时 0:1" in body


@pytest.mark.django_db
def test_the_polling_partial_stops_when_the_session_is_done(owner_client, conversation):
    running = session_make(conversation=conversation, status="running")
    url = reverse("chat:session_progress", args=[running.public_id])
    assert "every 1s" in owner_client.get(url, **HTMX).content.decode()

    DiagnosisSession.objects.filter(pk=running.pk).update(status="failed", stage="done")
    body = owner_client.get(url, **HTMX).content.decode()
    assert "hx-trigger" not in body
    assert "诊断失败" in body


@pytest.mark.django_db
def test_a_failed_session_offers_a_retry_that_asks_the_same_question_again(
    owner_client, conversation
):
    failed = session_make(conversation=conversation, status="failed", question="为什么失败？")
    page = owner_client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    assert reverse("chat:session_retry", args=[failed.public_id]) in page.content.decode()

    response = owner_client.post(reverse("chat:session_retry", args=[failed.public_id]), **HTMX)
    assert response.status_code == 200
    retried = conversation.sessions.exclude(pk=failed.pk).get()
    assert retried.original_query == "为什么失败？"
    assert retried.status == "queued"


@pytest.mark.django_db
def test_a_completed_session_cannot_be_retried(owner_client, answered):
    response = owner_client.post(reverse("chat:session_retry", args=[answered.public_id]))
    assert response.status_code == 409


@pytest.mark.django_db
def test_the_answer_shows_decision_markdown_and_the_evidence_of_each_allowed_claim(
    owner_client, conversation, answered
):
    body = owner_client.get(
        reverse("chat:conversation_detail", args=[conversation.pk])
    ).content.decode()
    assert "证据充分" in body
    assert "<strong>结论</strong>" in body  # Markdown rendered
    # Allowed claims with their classification badges.
    assert "payment-service 的数据库连接池在 10:22 后打满（50/50）" in body
    assert "直接观测" in body and "合理推断" in body
    # The binding: tool, trace ref, arguments, the excerpt marked in its surrounding lines.
    assert "trace-1" in body and "metric: db_pool_active_connections" in body
    assert "<mark>window max 50 at 2026-03-02T10:31:00Z</mark>" in body
    assert "1 series matched, most anomalous first:" in body  # a surrounding line
    # The metric chart with baseline and incident window.
    assert "<svg" in body and 'class="baseline"' in body and 'class="window"' in body
    # Hypotheses, missing information, recommended actions: in the answer, once.
    assert body.count("连接泄漏导致连接池耗尽") == 1
    assert "没有 mysql 慢查询日志" in body
    # (a hyphenated identifier is kept whole on one line: chat_tags.identifiers_whole)
    assert '检查 <span class="ident">payment-service</span> 连接池上限与泄漏' in body
    # The statement that was not accepted, folded away, and why.
    assert 'class="not-accepted"' in body
    assert "根因是 mysql 主库磁盘故障" in body
    assert "摘录不在工具输出中" in body and "缺乏支持" in body


@pytest.mark.django_db
def test_older_answers_load_their_evidence_on_demand_with_a_link_fallback(
    owner_client, conversation
):
    older = session_make(conversation=conversation, question="第一个问题")
    session_make(conversation=conversation, question="第二个问题")
    body = owner_client.get(
        reverse("chat:conversation_detail", args=[conversation.pk])
    ).content.decode()
    url = reverse("chat:session_detail", args=[older.public_id])
    assert f'hx-get="{url}"' in body and f'href="{url}"' in body
    partial = owner_client.get(url, **HTMX).content.decode()
    assert f'id="evidence-{older.public_id}"' in partial and "<html" not in partial
    page = owner_client.get(url).content.decode()
    assert "<html" in page and "<mark>" in page


@pytest.mark.django_db
def test_every_hx_get_on_the_conversation_page_has_an_href(owner_client, conversation):
    import re

    session_make(conversation=conversation)
    session_make(conversation=conversation)
    session_make(conversation=conversation, status="running")
    body = owner_client.get(
        reverse("chat:conversation_detail", args=[conversation.pk])
    ).content.decode()
    targets = re.findall(r'hx-get="([^"]+)"', body)
    assert targets
    for target in targets:
        if target.endswith("/progress/"):
            target = target.removesuffix("progress/")
        assert f'href="{target}"' in body, target


@pytest.mark.django_db
def test_feedback_is_stored_once_per_user_and_can_be_changed(owner_client, owner, answered):
    url = reverse("chat:session_feedback", args=[answered.public_id])
    response = owner_client.post(url, {"helpful": "1", "comment": "准确"}, **HTMX)
    assert response.status_code == 200
    assert "已记录你的反馈" in response.content.decode()
    owner_client.post(url, {"helpful": "0", "comment": "漏了 mysql"})
    feedback = Feedback.objects.get()
    assert feedback.user == owner and feedback.session == answered
    assert feedback.helpful is False and feedback.comment == "漏了 mysql"


@pytest.mark.django_db
def test_feedback_without_a_choice_is_refused(owner_client, answered):
    url = reverse("chat:session_feedback", args=[answered.public_id])
    assert owner_client.post(url, {"comment": "?"}).status_code == 400
    assert not Feedback.objects.exists()


@pytest.mark.django_db
def test_csrf_is_enforced_on_every_post(owner, conversation, answered):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    failed = session_make(conversation=conversation, status="failed")
    posts = [
        (reverse("chat:conversation_new"), {"environment": conversation.environment_id}),
        (reverse("chat:conversation_question", args=[conversation.pk]), {"question": "q"}),
        (reverse("chat:session_retry", args=[failed.public_id]), {}),
        (reverse("chat:session_feedback", args=[answered.public_id]), {"helpful": "1"}),
    ]
    for url, data in posts:
        assert client.post(url, data, **HTMX).status_code == 403, url
    assert not Feedback.objects.exists()
    assert conversation.sessions.count() == 2

    # With the token from the page's hx-headers, the same request goes through.
    page = client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    token = str(page.context["csrf_token"])
    assert f'"X-CSRFToken": "{token}"' in page.content.decode()
    url = reverse("chat:session_feedback", args=[answered.public_id])
    assert client.post(url, {"helpful": "1"}, HTTP_X_CSRFTOKEN=token, **HTMX).status_code == 200


@pytest.mark.django_db
def test_get_only_and_post_only_views_refuse_the_other_method(owner_client, conversation, answered):
    assert (
        owner_client.get(reverse("chat:conversation_question", args=[conversation.pk])).status_code
        == 405
    )
    assert (
        owner_client.post(reverse("chat:session_detail", args=[answered.public_id])).status_code
        == 405
    )


@pytest.mark.django_db
def test_the_environment_picker_preselects_the_default_environment_and_shows_slugs(
    owner_client, settings
):
    from diagnosis.models import Environment

    Environment.objects.create(slug="aaa-first", name="甲")
    chosen = Environment.objects.create(slug="zzz-default", name="乙")
    settings.DIAGNOSIS_DEFAULT_ENVIRONMENT = "zzz-default"
    body = owner_client.get(reverse("chat:conversation_list")).content.decode()
    assert f'<option value="{chosen.pk}" selected>zzz-default — 乙' in body
    assert "aaa-first — 甲" in body


@pytest.mark.django_db
def test_hypotheses_and_next_steps_are_shown_once_in_the_answer_not_again_as_evidence(
    owner_client, conversation
):
    session_make(
        conversation=conversation,
        answer="**结论**\n\n- x\n\n**可能的原因（待证实）**\n\n- 连接泄漏导致连接池耗尽\n",
    )
    page = owner_client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    body = page.content.decode()
    assert body.count("连接泄漏导致连接池耗尽") == 1
    assert "假设（未经证实）" not in body and "建议的操作" not in body
