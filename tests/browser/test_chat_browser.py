"""The chat in Debian's headless Chromium: log in, ask, watch, read the evidence, switch, leave."""

import pytest

from tests.browser.conftest import SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUESTION = "payment-service 从 10:20 开始大量超时，订单也下不了，帮我看看原因"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(90_000)
    yield page
    context.close()


@pytest.fixture
def sre(django_user_model):
    return django_user_model.objects.create_user(username="sre", password="pw-sre-browser")


def test_an_sre_asks_watches_reads_the_evidence_switches_language_and_logs_out(
    live_server, page, sre, pack_environment
):
    from playwright.sync_api import expect

    from chat.models import Conversation
    from diagnosis.models import DiagnosisSession
    from tests.chat.factories import session_make

    expect.set_options(timeout=90_000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    # Log in.
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")
    page.get_by_label("用户名").fill("sre")
    page.get_by_label("密码").fill("pw-sre-browser")
    page.get_by_role("button", name="登录").click()
    expect(page.get_by_role("heading", name="新对话")).to_be_visible()

    # Start a conversation on the demo incident.
    page.get_by_label("环境（演示故障或线上系统）").select_option(
        label=f"{pack_environment.slug} — {pack_environment.name} · 场景包"
    )
    page.get_by_role("button", name="开始对话").click()
    conversation = Conversation.objects.get(owner=sre)
    expect(page).to_have_url(f"{live_server.url}/conversations/{conversation.pk}/")

    # Ask with Enter; the run is eager, so the answer comes back with the question.
    box = page.get_by_label("你的问题")
    box.fill(QUESTION)
    box.press("Shift+Enter")
    box.type("谢谢")
    assert box.input_value() == QUESTION + "\n谢谢"
    box.fill(QUESTION)
    box.press("Enter")
    answer = page.locator(".turn .answer").last
    expect(answer).to_be_visible()
    expect(page.locator(".turn .question-text").last).to_contain_text("payment-service")
    expect(box).to_have_value("")
    session = DiagnosisSession.objects.get(conversation=conversation)
    assert session.status == "completed", session.error
    expect(answer.locator(".decision")).to_have_text(session.get_decision_display())
    expect(answer).to_be_focused()

    answer.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "answer-zh.png"))

    # Open the confirmed claims: the excerpt is highlighted in its lines, metrics are charted.
    claims = answer.locator("details.claim")
    assert claims.count() >= 1
    claims.first.locator("summary").click()
    expect(claims.first.locator("pre.output mark").first).to_be_visible()
    claims.first.screenshot(path=str(SCREENSHOTS / "claim-zh.png"))
    charted = answer.locator("details.claim", has=page.locator(".chart svg")).first
    if charted.get_attribute("open") is None:
        charted.locator("summary").click()
    expect(charted.locator(".chart svg").first).to_be_visible()
    expect(charted.locator(".chart svg rect.window").first).to_be_attached()
    charted.locator(".binding", has=page.locator(".chart")).first.screenshot(
        path=str(SCREENSHOTS / "chart-zh.png")
    )
    page.screenshot(path=str(SCREENSHOTS / "answer-evidence-zh.png"), full_page=True)

    # Watch progress: a running session polls, then its answer replaces the progress.
    running = session_make(conversation=conversation, status="running", question="还在跑吗？")
    page.reload()
    progress = page.locator(f"#progress-{running.public_id}")
    expect(progress).to_contain_text("query_metrics")
    expect(progress).to_contain_text("取证")
    page.screenshot(path=str(SCREENSHOTS / "progress-zh.png"), full_page=True)
    DiagnosisSession.objects.filter(pk=running.pk).update(status="failed", stage="done")
    failed_answer = page.locator(f"#answer-{running.public_id}")
    expect(failed_answer).to_contain_text("诊断失败")
    expect(progress).to_have_count(0)

    # Retry the failed question: a new session with the same question gets an answer.
    failed_answer.get_by_role("button", name="重试").click()
    expect(page.locator(".turn")).to_have_count(3)
    retried = DiagnosisSession.objects.filter(conversation=conversation).order_by("-id").first()
    assert retried.original_query == "还在跑吗？"
    expect(page.locator(f"#answer-{retried.public_id}")).to_be_visible()

    # Feedback on the first answer.
    first = page.locator(f"#answer-{session.public_id}")
    first.get_by_label("补充说明（可选）").fill("定位准确")
    first.get_by_role("button", name="有帮助", exact=True).click()
    expect(first.locator(".saved")).to_be_visible()

    # Switch to English; the choice sticks on the next page.
    page.get_by_role("button", name="English").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    page.goto(f"{live_server.url}/conversations/{conversation.pk}/")
    expect(page.get_by_role("heading", name="Evidence").first).to_be_visible()
    # Older answers load their evidence when scrolled into view.
    page.locator(f"#answer-{session.public_id} .evidence-lazy").scroll_into_view_if_needed()
    page.locator(f"#answer-{session.public_id} details.claim summary").first.click()
    expect(page.locator(f"#answer-{session.public_id} pre.output mark").first).to_be_visible()
    page.locator(f"#answer-{session.public_id}").screenshot(path=str(SCREENSHOTS / "answer-en.png"))

    # Log out.
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.goto(f"{live_server.url}/conversations/{conversation.pk}/")
    expect(page).to_have_url(
        f"{live_server.url}/accounts/login/?next=/conversations/{conversation.pk}/"
    )
