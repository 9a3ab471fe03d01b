"""Chinese by default, English complete, and the switch sticks."""

import pytest
from django.urls import reverse


@pytest.mark.django_db
def test_the_ui_is_chinese_by_default(owner_client):
    body = owner_client.get(reverse("chat:conversation_list")).content.decode()
    assert 'lang="zh-Hans"' in body and "新对话" in body


@pytest.mark.django_db
def test_switching_to_english_sticks_across_pages(owner_client, conversation, answered):
    response = owner_client.post(
        reverse("set_language"), {"language": "en", "next": reverse("chat:conversation_list")}
    )
    assert response.status_code == 302
    body = owner_client.get(reverse("chat:conversation_list")).content.decode()
    assert "New conversation" in body and "新对话" not in body
    page = owner_client.get(reverse("chat:conversation_detail", args=[conversation.pk]))
    text = page.content.decode()
    assert "Evidence" in text and "Direct observation" in text and "Well supported" in text


@pytest.mark.django_db
def test_a_question_asked_in_english_gets_an_english_answer(
    owner_client, conversation, monkeypatch
):
    from diagnosis import tasks

    monkeypatch.setattr(tasks.diagnosis_run_task, "delay", lambda *a, **k: None)
    owner_client.post(reverse("set_language"), {"language": "en", "next": "/"})
    owner_client.post(
        reverse("chat:conversation_question", args=[conversation.pk]), {"question": "why?"}
    )
    assert conversation.sessions.get().language == "en"


@pytest.mark.django_db
def test_the_login_page_renders_in_both_languages(client):
    assert "登录" in client.get(reverse("login")).content.decode()
    client.post(reverse("set_language"), {"language": "en", "next": "/"})
    assert "Log in" in client.get(reverse("login")).content.decode()


def test_every_message_in_the_english_catalogue_is_translated():
    import re
    from pathlib import Path

    from django.conf import settings

    po = Path(settings.BASE_DIR) / "locale" / "en" / "LC_MESSAGES" / "django.po"
    assert (po.with_suffix(".mo")).exists()
    text = po.read_text(encoding="utf-8")
    assert "#, fuzzy" not in text
    entries = text.split("\n\n")[1:]
    untranslated = [
        entry
        for entry in entries
        if re.search(r'^msgstr(\[\d\])? ""$', entry, re.M)
        and not re.search(r'^msgstr(\[\d\])? ""\n"', entry, re.M)
    ]
    assert untranslated == []
