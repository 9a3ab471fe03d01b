from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.models import Conversation
from diagnosis.contracts import ConflictError
from diagnosis.models import ApiSubmission, DiagnosisSession, ToolInvocation
from diagnosis.services import diagnosis_cancel
from tests.api.conftest import client_for, completed_session_make, session_make

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_flow_runs(no_flow_runs):
    """These tests build sessions in the database; the flow itself is not run here."""


def _create(api, body, **headers):
    return api.post("/api/v1/diagnoses", body, format="json", **headers)


# --- create ------------------------------------------------------------------------------


def test_submitting_a_question_queues_an_api_session_and_answers_202_with_its_location(
    api, owner, owner_key, environment, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = _create(
            api,
            {
                "question": "checkout-service 错误率为什么升高？",
                "environment": "shop",
                "context": {
                    "services": ["checkout-service"],
                    "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:30:00Z"},
                },
                "language": "en",
            },
        )
    assert response.status_code == 202
    body = response.json()
    session = DiagnosisSession.objects.get(public_id=body["id"])
    assert response["Location"] == f"/api/v1/diagnoses/{session.public_id}"
    assert session.owner == owner
    assert session.source == DiagnosisSession.Source.API
    assert session.environment == environment
    assert session.language == "en"
    assert session.context["services"] == ["checkout-service"]
    assert session.context["window_hint"] == {
        "start": "2026-03-02T10:00:00Z",
        "end": "2026-03-02T10:30:00Z",
    }
    assert session.api_submission.api_key == owner_key.api_key
    assert body["status"] == "queued" and body["environment"] == "shop"
    assert body["progress"][0]["stage"] == "queued"


def test_the_environment_defaults_to_the_configured_one(api, environment, settings):
    settings.DIAGNOSIS_DEFAULT_ENVIRONMENT = "shop"
    response = _create(api, {"question": "为什么慢？"})
    assert response.status_code == 202
    assert DiagnosisSession.objects.get().environment == environment


def test_a_retry_with_the_same_idempotency_key_returns_the_same_session(api, environment):
    body = {"question": "为什么慢？", "environment": "shop"}
    first = _create(api, body, HTTP_IDEMPOTENCY_KEY="req-1")
    again = _create(api, body, HTTP_IDEMPOTENCY_KEY="req-1")
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert DiagnosisSession.objects.count() == 1


def test_the_same_idempotency_key_with_a_different_body_is_a_409(api, environment):
    _create(api, {"question": "为什么慢？", "environment": "shop"}, HTTP_IDEMPOTENCY_KEY="req-1")
    response = _create(
        api, {"question": "另一个问题", "environment": "shop"}, HTTP_IDEMPOTENCY_KEY="req-1"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"
    assert DiagnosisSession.objects.count() == 1


def test_idempotency_keys_are_per_owner(api, outsider_api, environment):
    body = {"question": "为什么慢？", "environment": "shop"}
    mine = _create(api, body, HTTP_IDEMPOTENCY_KEY="req-1").json()["id"]
    theirs = _create(outsider_api, body, HTTP_IDEMPOTENCY_KEY="req-1").json()["id"]
    assert mine != theirs
    assert DiagnosisSession.objects.count() == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "question"),
        ({"question": ""}, "question"),
        ({"question": "q", "language": "fr"}, "language"),
        ({"question": "q", "callback_url": "ftp://example.org/x"}, "callback_url"),
        ({"question": "q", "callback_url": "javascript:alert(1)"}, "callback_url"),
        ({"question": "q", "context": {"services": "not-a-list"}}, "context"),
        ({"question": "q", "context": {"services": [7]}}, "context"),
        ({"question": "q", "context": {"services": ["pay\u0000ment"]}}, "context"),
        ({"question": "q", "conversation": "5"}, "conversation"),
        ({"question": "q", "context": {"window": {"start": "2026-03-02T10:00:00Z"}}}, "context"),
        ({"question": 123}, "question"),
        ({"question": "q", "callbackurl": "https://ops.example.com/hook"}, "callbackurl"),
        ({"question": "q", "context": {"service": ["payment-service"]}}, "context"),
    ],
)
def test_invalid_input_is_a_400_naming_the_field(api, environment, body, field):
    response = _create(api, {"environment": "shop", **body} if "environment" not in body else body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["details"]["fields"]
    assert DiagnosisSession.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"question": "q", "environment": "nowhere"}, "environment"),
        ({"question": "q", "conversation": 999999}, "conversation"),
    ],
)
def test_a_body_naming_what_does_not_exist_is_a_404_naming_the_field(api, environment, body, field):
    # The schema cannot know which environments and conversations exist: "not found".
    response = _create(api, body)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert list(error["details"]["fields"]) == [field]
    assert DiagnosisSession.objects.count() == 0


def test_a_malformed_body_is_a_400_before_any_lookup(api, environment):
    response = _create(api, {"question": "", "environment": "nowhere", "conversation": 999999})
    assert response.status_code == 400
    assert list(response.json()["error"]["details"]["fields"]) == ["question"]


def test_a_conversation_of_another_owner_is_not_found(api, outsider, environment):
    theirs = Conversation.objects.create(owner=outsider, environment=environment)
    response = _create(api, {"question": "q", "conversation": theirs.pk})
    assert response.status_code == 404
    assert "conversation" in response.json()["error"]["details"]["fields"]


@pytest.mark.parametrize(
    ("given", "used"),
    [
        # in either order
        (
            ("2026-03-02T10:30:00Z", "2026-03-02T10:00:00Z"),
            ("2026-03-02T10:00:00Z", "2026-03-02T10:30:00Z"),
        ),
        # empty: the minute that ends there
        (
            ("2026-03-02T10:30:00Z", "2026-03-02T10:30:00Z"),
            ("2026-03-02T10:29:00Z", "2026-03-02T10:30:00Z"),
        ),
        # too long: its last 7 days
        (
            ("2026-01-01T00:00:00Z", "2026-03-02T10:30:00Z"),
            ("2026-02-23T10:30:00Z", "2026-03-02T10:30:00Z"),
        ),
        # the calendar's first moment: the minute that starts there
        (
            ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
            ("0001-01-01T00:00:00Z", "0001-01-01T00:01:00Z"),
        ),
    ],
)
def test_any_two_moments_make_a_window_and_the_answer_shows_the_one_used(
    api, environment, given, used
):
    window = {"start": given[0], "end": given[1]}
    response = _create(api, {"question": "q", "environment": "shop", "context": {"window": window}})
    assert response.status_code == 202
    expected = {"start": used[0], "end": used[1]}
    assert response.json()["context"]["window"] == expected
    assert DiagnosisSession.objects.get().context["window_hint"] == expected


def test_a_conversation_of_ones_own_links_the_session_and_gives_its_environment(
    api, owner, environment
):
    conversation = Conversation.objects.create(owner=owner, environment=environment)
    response = _create(api, {"question": "q", "conversation": conversation.pk})
    assert response.status_code == 202
    session = DiagnosisSession.objects.get()
    assert session.conversation == conversation and session.environment == environment


def test_a_callback_needs_an_api_key(owner, environment):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(owner)
    response = client.post(
        "/api/v1/diagnoses",
        {"question": "q", "environment": "shop", "callback_url": "https://example.org/hook"},
        format="json",
    )
    assert response.status_code == 400
    assert "callback_url" in response.json()["error"]["details"]["fields"]


def test_a_callback_url_is_stored_with_a_pending_state(api, environment):
    response = _create(
        api, {"question": "q", "environment": "shop", "callback_url": "https://example.org/hook"}
    )
    session = DiagnosisSession.objects.get(public_id=response.json()["id"])
    assert session.callback_url == "https://example.org/hook"
    assert session.api_submission.callback_state == ApiSubmission.CallbackState.PENDING
    assert response.json()["callback"]["state"] == "pending"


# --- detail ------------------------------------------------------------------------------


def test_the_detail_shows_claims_with_verdicts_bindings_and_the_filtered_material(
    api, owner, environment
):
    session = completed_session_make(owner=owner, environment=environment)
    response = api.get(f"/api/v1/diagnoses/{session.public_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "completed" and body["decision"] == "LOW_CONFID"
    assert body["final_answer"].startswith("**结论**")
    assert body["answer_source"] == "composer"
    first, second = body["claims"]
    logs = ToolInvocation.objects.get(session=session, trace_ref="trace-1")
    assert first["gatekeeper"]["verdict"] == "accepted"
    assert first["verifier"] == {"classification": "direct_observation", "reason": "日志可见"}
    assert first["placement"] == "allowed_claim"
    assert first["bindings"][0]["invocation_id"] == logs.pk
    assert first["bindings"][0]["excerpt"] == "request timeout after 5000ms"
    assert first["bindings"][0]["valid"] is True
    assert second["gatekeeper"]["verdict"] == "demoted"
    assert second["gatekeeper"]["findings"][0]["code"] == "invocation_failed"
    assert second["verifier"]["classification"] == "unsupported"
    assert second["bindings"][0]["valid"] is False
    # hypotheses/missing info/actions come from the filtered Composer input
    assert body["hypotheses"] == [{"text": "连接池配置过小", "basis": "runbook", "entity": None}]
    assert body["missing_info"] == ["数据库连接池指标"]
    assert body["recommended_actions"] == [{"text": "检查连接池", "reason": "超时"}]
    assert body["executor_proposals"]["missing_info"] == ["数据库指标"]
    assert body["model_usage"]["total"]["tokens_in"] == 900
    assert body["timings"]["run_seconds"] == pytest.approx(20, abs=1)
    assert [e["stage"] for e in body["progress"]] == ["queued", "planner", "executor", "done"]
    assert body["composer"]["status"] == "ok"


def test_the_detail_says_how_the_router_changed_the_verifiers_decision(api, owner, environment):
    session = completed_session_make(owner=owner, environment=environment)
    evaluation = dict(session.self_evaluation)
    evaluation["verifier_evaluation"] = {
        **evaluation["verifier_evaluation"],
        "decision": "PASS",
        "routed_decision": "LOW_CONFID",
        "route_notes": [
            "question names services the environment lacks: PASS became LOW_CONFID",
            "an older note without a code",
        ],
        "route_note_codes": [{"code": "scope_unknown_services", "params": {"services": ["mysql"]}}],
    }
    session.self_evaluation = evaluation
    session.save(update_fields=["self_evaluation"])
    body = api.get(f"/api/v1/diagnoses/{session.public_id}").json()
    assert body["routing"]["verifier_decision"] == "PASS"
    assert body["routing"]["decision"] == "LOW_CONFID"
    coded, older = body["routing"]["notes"]
    assert coded["code"] == "scope_unknown_services"
    assert coded["params"] == {"services": ["mysql"]}
    assert coded["text"].startswith("question names services")
    assert older == {"text": "an older note without a code", "code": None, "params": {}}


def test_the_detail_shows_each_fact_of_a_claim_and_what_binds_it(api, owner, environment):
    session = completed_session_make(owner=owner, environment=environment)
    evaluation = session.self_evaluation
    evaluation["gatekeeper"]["claims"][0]["facts"] = [
        {"text": "payment-service", "kind": "service", "start": 0, "end": 15, "binding": 0,
         "via": "argument"},
        {"text": "5000", "kind": "number", "start": 20, "end": 24, "binding": None, "via": None},
        {"not": "a fact"},
    ]  # fmt: skip
    session.self_evaluation = evaluation
    session.save(update_fields=["self_evaluation"])
    first = api.get(f"/api/v1/diagnoses/{session.public_id}").json()["claims"][0]
    assert [(f["text"], f["binding"], f["via"]) for f in first["facts"]] == [
        ("payment-service", 0, "argument"),
        ("5000", None, None),
    ]


def test_another_owners_diagnosis_is_a_404_never_a_403(outsider_api, owner, environment):
    session = completed_session_make(owner=owner, environment=environment)
    for url in (
        f"/api/v1/diagnoses/{session.public_id}",
        f"/api/v1/diagnoses/{session.public_id}/tool-invocations",
        f"/api/v1/diagnoses/{session.public_id}/callback-attempts",
    ):
        response = outsider_api.get(url)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"
    response = outsider_api.post(f"/api/v1/diagnoses/{session.public_id}/cancel")
    assert response.status_code == 404


def test_a_queued_session_just_submitted_has_empty_results(api, owner, environment):
    session = session_make(owner=owner, environment=environment)
    body = api.get(f"/api/v1/diagnoses/{session.public_id}").json()
    assert body["claims"] == [] and body["hypotheses"] == [] and body["decision"] is None
    assert body["composer"] is None and body["callback"] is None


# --- tool invocations ----------------------------------------------------------------


def test_the_tool_invocations_of_a_diagnosis_come_with_their_outputs(api, owner, environment):
    session = completed_session_make(owner=owner, environment=environment)
    body = api.get(f"/api/v1/diagnoses/{session.public_id}/tool-invocations").json()
    assert [i["trace_ref"] for i in body["results"]] == ["trace-1", "trace-2"]
    assert body["results"][0]["output"].startswith("payment-service ERROR request timeout")
    assert body["results"][0]["arguments"] == {"service": "payment-service", "level": "ERROR"}
    assert body["results"][1]["status"] == "no_data"


def test_the_tool_invocations_of_a_diagnosis_page_like_the_diagnosis_list(api, owner, environment):
    session = completed_session_make(owner=owner, environment=environment)
    url = f"/api/v1/diagnoses/{session.public_id}/tool-invocations"
    first = api.get(f"{url}?page_size=1").json()
    assert [i["trace_ref"] for i in first["results"]] == ["trace-1"]
    assert first["previous"] is None and first["next"]
    second = api.get(first["next"]).json()
    assert [i["trace_ref"] for i in second["results"]] == ["trace-2"]
    assert second["next"] is None
    assert api.get(f"{url}?cursor=nonsense").status_code == 404


def test_one_tool_invocation_is_owner_checked_through_its_session(
    api, outsider_api, owner, environment
):
    session = completed_session_make(owner=owner, environment=environment)
    invocation = session.invocations.get(trace_ref="trace-1")
    mine = api.get(f"/api/v1/tool-invocations/{invocation.pk}")
    assert mine.status_code == 200
    assert mine.json()["output"] == invocation.output
    assert mine.json()["diagnosis_id"] == str(session.public_id)
    assert outsider_api.get(f"/api/v1/tool-invocations/{invocation.pk}").status_code == 404


# --- list --------------------------------------------------------------------------------


def test_the_list_shows_only_ones_own_sessions_newest_first(api, owner, outsider, environment):
    older = session_make(owner=owner, environment=environment)
    newer = session_make(owner=owner, environment=environment)
    session_make(owner=outsider, environment=environment)
    body = api.get("/api/v1/diagnoses").json()
    assert [r["id"] for r in body["results"]] == [str(newer.public_id), str(older.public_id)]
    assert body["next"] is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=completed", {"done"}),
        ("status=failed", {"failed"}),
        ("decision=PASS", {"done"}),
        ("source=alert", {"alert"}),
        ("environment=lab", {"lab"}),
        ("status=queued&source=api", {"queued"}),
    ],
)
def test_the_list_filters_combine(api, owner, environment, other_environment, query, expected):
    S = DiagnosisSession
    rows = {
        "done": session_make(
            owner=owner, environment=environment, status=S.Status.COMPLETED, decision="PASS"
        ),
        "failed": session_make(owner=owner, environment=environment, status=S.Status.FAILED),
        "alert": session_make(
            owner=owner, environment=environment, source=S.Source.ALERT, status=S.Status.RUNNING
        ),
        "lab": session_make(owner=owner, environment=other_environment, status=S.Status.CANCELLED),
        "queued": session_make(owner=owner, environment=environment),
    }
    by_id = {str(s.public_id): name for name, s in rows.items()}
    response = api.get(f"/api/v1/diagnoses?{query}")
    assert response.status_code == 200
    assert {by_id[r["id"]] for r in response.json()["results"]} == expected


def test_the_list_filters_by_creation_time(api, owner, environment):
    old = session_make(owner=owner, environment=environment)
    DiagnosisSession.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    new = session_make(owner=owner, environment=environment)
    cutoff = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    after = api.get("/api/v1/diagnoses", {"created_after": cutoff}).json()["results"]
    before = api.get("/api/v1/diagnoses", {"created_before": cutoff}).json()["results"]
    assert [r["id"] for r in after] == [str(new.public_id)]
    assert [r["id"] for r in before] == [str(old.public_id)]


@pytest.mark.parametrize(
    "query",
    [
        "status=bogus",
        "created_after=yesterday",
        "page_size=0",
        "status=",
        "page_size=",
        "cursor=%00",
    ],
)
def test_a_bad_filter_is_a_400(api, query):
    response = api.get(f"/api/v1/diagnoses?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


@pytest.mark.parametrize("cursor", ["garbage", "%E4%BF%A1"])
def test_a_cursor_that_names_no_page_is_a_404_naming_it(api, cursor):
    # A cursor is opaque: any text is one to try, and no page answers to a made-up one.
    response = api.get(f"/api/v1/diagnoses?cursor={cursor}")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "invalid_cursor"
    assert list(error["details"]["fields"]) == ["cursor"]


def test_a_blank_cursor_is_the_first_page(api):
    assert api.get("/api/v1/diagnoses?cursor=").status_code == 200


def test_the_cursor_walks_every_session_once(api, owner, environment):
    created = {str(session_make(owner=owner, environment=environment).public_id) for _ in range(7)}
    seen: list[str] = []
    url = "/api/v1/diagnoses?page_size=3"
    pages = 0
    while url:
        body = api.get(url).json()
        seen += [r["id"] for r in body["results"]]
        url = body["next"]
        pages += 1
    assert pages == 3
    assert len(seen) == 7 and set(seen) == created


def test_the_default_page_size_follows_the_setting(api, owner, environment, settings):
    for _ in range(3):
        session_make(owner=owner, environment=environment)
    assert len(api.get("/api/v1/diagnoses").json()["results"]) == 3  # the API is loaded now
    settings.API_PAGE_SIZE = 2
    body = api.get("/api/v1/diagnoses").json()
    assert len(body["results"]) == 2
    assert body["next"]


def test_the_number_of_queries_does_not_grow_with_the_page_size(api, owner, environment):
    for _ in range(30):
        session_make(owner=owner, environment=environment)
    counts = []
    for size in (1, 10, 30):
        api.get("/api/v1/diagnoses?page_size=1")  # warm last_used_at
        with CaptureQueriesContext(connection) as ctx:
            response = api.get(f"/api/v1/diagnoses?page_size={size}")
        assert len(response.json()["results"]) == size
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] == counts[2]
    assert counts[0] <= 3


def test_the_detail_query_count_does_not_grow_with_claims_or_invocations(api, owner, environment):
    small = session_make(owner=owner, environment=environment)
    big = completed_session_make(owner=owner, environment=environment)
    api.get(f"/api/v1/diagnoses/{small.public_id}")
    counts = []
    for session in (small, big):
        with CaptureQueriesContext(connection) as ctx:
            api.get(f"/api/v1/diagnoses/{session.public_id}")
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


# --- cancel --------------------------------------------------------------------------------


def test_cancelling_a_queued_diagnosis_ends_it_as_cancelled(api, owner, environment):
    session = session_make(owner=owner, environment=environment)
    response = api.post(f"/api/v1/diagnoses/{session.public_id}/cancel")
    assert response.status_code == 200
    session.refresh_from_db()
    assert session.status == DiagnosisSession.Status.CANCELLED
    assert response.json()["status"] == "cancelled"


def test_cancelling_a_running_diagnosis_asks_it_to_stop(api, owner, environment):
    session = session_make(
        owner=owner, environment=environment, status=DiagnosisSession.Status.RUNNING
    )
    response = api.post(f"/api/v1/diagnoses/{session.public_id}/cancel")
    assert response.status_code == 200
    session.refresh_from_db()
    assert session.cancel_requested and session.status == DiagnosisSession.Status.RUNNING
    assert response.json()["cancel_requested"] is True


def test_cancelling_a_completed_diagnosis_is_a_409(api, owner, environment):
    session = completed_session_make(owner=owner, environment=environment)
    response = api.post(f"/api/v1/diagnoses/{session.public_id}/cancel")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_cancellable"
    assert response.json()["error"]["message"] == "诊断已经结束（completed）。"
    session.refresh_from_db()
    assert session.status == DiagnosisSession.Status.COMPLETED


@pytest.mark.parametrize("status", [DiagnosisSession.Status.COMPLETED, "failed"])
def test_the_cancel_service_refuses_a_finished_diagnosis(owner, environment, status):
    session = session_make(owner=owner, environment=environment, status=status)
    with pytest.raises(ConflictError) as refused:
        diagnosis_cancel(session=session)
    assert refused.value.code == "not_cancellable"
    session.refresh_from_db()
    assert session.status == status and not session.cancel_requested


def test_cancelling_a_cancelled_diagnosis_changes_nothing(api, owner, environment):
    session = session_make(
        owner=owner, environment=environment, status=DiagnosisSession.Status.CANCELLED
    )
    assert diagnosis_cancel(session=session).status == DiagnosisSession.Status.CANCELLED
    assert api.post(f"/api/v1/diagnoses/{session.public_id}/cancel").status_code == 200


def test_a_session_only_the_browser_can_see_is_visible_with_a_session_login(owner, environment):
    from rest_framework.test import APIClient

    session = session_make(
        owner=owner, environment=environment, source=DiagnosisSession.Source.CHAT
    )
    client = APIClient()
    client.force_login(owner)
    assert client.get(f"/api/v1/diagnoses/{session.public_id}").status_code == 200
    assert client_for(None).get(f"/api/v1/diagnoses/{session.public_id}").status_code == 401


@pytest.mark.parametrize(
    ("question", "expected"),
    [("why does payment-service time out?", "en"), ("payment-service 为什么超时", "zh-CN")],
)
def test_without_a_language_the_answer_follows_the_question(api, environment, question, expected):
    response = _create(api, {"question": question, "environment": "shop"})
    assert response.status_code == 202
    assert response.json()["language"] == expected
