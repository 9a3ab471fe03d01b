"""Every URL the project registers, asked by every kind of user (architecture invariant 5).

The patterns come from the URL resolver, so a new URL without an entry in
``expectations()`` fails ``test_every_url_pattern_has_an_expectation`` with its name.

Roles: anonymous, owner (owns every row of the world), teammate, outsider, reviewer
(staff in the reviewers group) and a superuser. Rootproof has no teams: a session
belongs to one user, so a "teammate" is just another ordinary user and is expected to
get exactly what the outsider gets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from django.contrib import admin
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

from diagnosis.models import DiagnosisSession
from tests.security.conftest import World

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "owner", "teammate", "outsider", "reviewer", "superuser")
LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"

# An expected answer: a status, or (302, where the redirect must point), or None (not asked).
Expect = int | tuple[int, str] | None


def by_role(
    *,
    anonymous: Expect,
    owner: Expect,
    others: Expect,
    reviewer: Expect | type[...] = ...,
    superuser: Expect | type[...] = ...,
) -> dict[str, Expect]:
    """``others`` is what a user who owns nothing gets; reviewer and superuser default to it."""
    reviewer_expect = others if reviewer is ... else reviewer
    return {
        "anonymous": anonymous,
        "owner": owner,
        "teammate": others,  # no teams: a teammate is another user, same as the outsider
        "outsider": others,
        "reviewer": reviewer_expect,
        "superuser": reviewer_expect if superuser is ... else superuser,
    }


def everyone(expect: Expect) -> dict[str, Expect]:
    return dict.fromkeys(ROLES, expect)


@dataclass(frozen=True)
class Probe:
    method: str
    url: str
    expect: dict[str, Expect]
    data: dict | None = None
    api: bool = False  # a JSON request authenticated with the role's API key
    headers: dict[str, str] = field(default_factory=dict)


def get(url: str, expect: dict[str, Expect], **kwargs) -> Probe:
    return Probe("GET", url, expect, **kwargs)


def post(url: str, expect: dict[str, Expect], data: dict | None = None, **kwargs) -> Probe:
    return Probe("POST", url, expect, data=data or {}, **kwargs)


# --- the expectations table -------------------------------------------------------------

# Admin models by what they hold. A registered model in none of these fails the sweep.
DIAGNOSIS_DATA = {  # evidence and records: read by reviewers, changed by nobody
    "diagnosis.diagnosissession",
    "diagnosis.toolinvocation",
    "diagnosis.llmcall",
    "diagnosis.sessionevent",
    "diagnosis.apisubmission",
    "diagnosis.callbackattempt",
    "diagnosis.alertgroupstart",
    "chat.conversation",
    "audit.review",
    "audit.auditevent",
}
MANAGED = {  # configuration edited in admin by administrators; reviewers may look
    "diagnosis.knowledgedocument",
    "diagnosis.environment",
    "diagnosis.apikey",
    "diagnosis.alertmanagerreceiver",
}
ACCOUNTS = {"auth.user", "auth.group"}  # administrators only
LOGIN_RECORDS = {  # django-axes: login attempts and lockouts, administrators only
    "axes.accessattempt",
    "axes.accesslog",
    "axes.accessfailurelog",
}


def _admin_model_probes(model_key: str, model) -> dict[str, list[Probe]]:
    app_label, model_name = model_key.split(".")
    obj = model._default_manager.order_by("pk").first()
    assert obj is not None, f"the world has no {model_key} row for its admin pages"
    prefix = f"admin:{app_label}_{model_name}"
    pk = obj.pk
    change_url = reverse(f"{prefix}_change", args=[pk])

    def staff(reviewer: Expect, superuser: Expect) -> dict[str, Expect]:
        return by_role(
            anonymous=(302, ADMIN_LOGIN),
            owner=(302, ADMIN_LOGIN),
            others=(302, ADMIN_LOGIN),
            reviewer=reviewer,
            superuser=superuser,
        )

    if model_key in DIAGNOSIS_DATA:
        read, write, superuser_write = 200, 403, 403
    elif model_key in MANAGED:
        read, write, superuser_write = 200, 403, 200
    elif model_key in ACCOUNTS:
        read, write, superuser_write = 403, 403, 200
    elif model_key in LOGIN_RECORDS:
        # axes keeps these as records: nobody adds them by hand; a superuser may clear them.
        read, write, superuser_write = 403, 403, 200
    else:
        raise AssertionError(f"admin model {model_key} is in no category of the sweep")
    superuser_add = 403 if model_key in DIAGNOSIS_DATA or model_key in LOGIN_RECORDS else 200
    probes: dict[str, list[Probe]] = {
        f"{prefix}_changelist": [get(reverse(f"{prefix}_changelist"), staff(read, 200))],
        f"{prefix}_add": [
            get(reverse(f"{prefix}_add"), staff(write, superuser_add)),
            post(reverse(f"{prefix}_add"), staff(write, None if superuser_add == 200 else 403)),
        ],
        f"{prefix}_change": [
            get(change_url, staff(read, 200)),
            # Posting a change to evidence is refused even to a superuser.
            post(change_url, staff(write, None if superuser_write == 200 else 403)),
        ],
        f"{prefix}_history": [get(reverse(f"{prefix}_history", args=[pk]), staff(read, 200))],
        f"{prefix}_delete": [
            get(reverse(f"{prefix}_delete", args=[pk]), staff(write, superuser_write)),
            post(
                reverse(f"{prefix}_delete", args=[pk]),
                staff(write, None if superuser_write == 200 else 403),
                data={"post": "yes"},
            ),
        ],
        # admin/<app>/<model>/<pk>/ only redirects to the change page (for staff).
        f"route admin/{app_label}/{model_name}/<path:object_id>/": [
            get(
                f"/admin/{app_label}/{model_name}/{pk}/",
                staff((302, change_url), (302, change_url)),
            )
        ],
    }
    return probes


def expectations(w: World) -> dict[str, list[Probe]]:
    conv = w.conversation.pk
    sid = w.session.public_id
    receiver = w.receiver.slug
    session_ct = ContentType.objects.get_for_model(DiagnosisSession).pk
    login_required = (302, LOGIN)

    def chat_page(owner: Expect) -> dict[str, Expect]:
        # Reviewers and superusers are ordinary chat users: someone else's chat is a 404.
        return by_role(anonymous=login_required, owner=owner, others=404)

    def api(owner: Expect, others: Expect = 404) -> dict[str, Expect]:
        return by_role(anonymous=401, owner=owner, others=others)

    def reviewer_page(status: int = 200) -> dict[str, Expect]:
        return by_role(anonymous=login_required, owner=403, others=403, reviewer=status)

    table: dict[str, list[Probe]] = {
        # --- site
        "healthz": [get("/healthz", everyone(200))],
        "favicon": [get("/favicon.ico", everyone(301))],
        "login": [get(reverse("login"), everyone(200))],
        "logout": [get(reverse("logout"), everyone(405)), post(reverse("logout"), everyone(302))],
        "set_language": [
            get(reverse("set_language"), everyone(302)),
            post(reverse("set_language"), everyone(302), {"language": "en", "next": "/"}),
        ],
        # --- chat (pages and HTMX partials)
        "chat:conversation_list": [
            get(reverse("chat:conversation_list"), chat_page(200) | by_role_all_users(200))
        ],
        "chat:conversation_new": [
            get(reverse("chat:conversation_new"), everyone(405)),
            # No environment chosen: every signed-in user gets the form back with a 400.
            post(reverse("chat:conversation_new"), chat_page(400) | by_role_all_users(400)),
        ],
        "chat:conversation_detail": [
            get(reverse("chat:conversation_detail", args=[conv]), chat_page(200))
        ],
        "chat:conversation_question": [
            get(reverse("chat:conversation_question", args=[conv]), everyone(405)),
            post(
                reverse("chat:conversation_question", args=[conv]),
                chat_page(400),
                {"question": ""},
            ),
        ],
        "chat:session_detail": [get(reverse("chat:session_detail", args=[sid]), chat_page(200))],
        "chat:session_progress": [
            get(
                reverse("chat:session_progress", args=[sid]),
                chat_page(200),
                headers={"HX-Request": "true"},
            ),
            get(
                reverse("chat:session_progress", args=[sid]),
                chat_page((302, reverse("chat:session_detail", args=[sid]))),
            ),
        ],
        "chat:session_retry": [
            get(reverse("chat:session_retry", args=[sid]), everyone(405)),
            post(reverse("chat:session_retry", args=[sid]), chat_page(409)),  # not failed
        ],
        "chat:session_feedback": [
            get(reverse("chat:session_feedback", args=[sid]), everyone(405)),
            post(reverse("chat:session_feedback", args=[sid]), chat_page(400)),
        ],
        # --- reviewer pages
        "audit:dashboard": [get(reverse("audit:dashboard"), reviewer_page())],
        "audit:session_read": [
            get(reverse("audit:session_read", args=[sid]), reviewer_page()),
            post(reverse("audit:session_read", args=[sid]), everyone(405)),
        ],
        "audit:session_review": [
            get(reverse("audit:session_review", args=[sid]), reviewer_page()),
            # An empty form is shown again with its errors; nothing is recorded.
            post(reverse("audit:session_review", args=[sid]), reviewer_page()),
        ],
        # --- API (each role authenticates with its own API key)
        "api:diagnosis_collection": [
            get(reverse("api:diagnosis_collection"), api(200, 200), api=True),
            post(reverse("api:diagnosis_collection"), api(400, 400), api=True),
        ],
        "api:diagnosis_detail": [
            get(reverse("api:diagnosis_detail", args=[sid]), api(200), api=True)
        ],
        "api:diagnosis_cancel": [
            get(reverse("api:diagnosis_cancel", args=[sid]), api(405, 405), api=True),
            post(reverse("api:diagnosis_cancel", args=[sid]), api(409), api=True),  # completed
        ],
        "api:diagnosis_tool_invocations": [
            get(reverse("api:diagnosis_tool_invocations", args=[sid]), api(200), api=True)
        ],
        "api:diagnosis_callback_attempts": [
            get(reverse("api:diagnosis_callback_attempts", args=[sid]), api(200), api=True)
        ],
        "api:tool_invocation_detail": [
            get(reverse("api:tool_invocation_detail", args=[w.invocation.pk]), api(200), api=True)
        ],
        "api:api_key_collection": [
            get(reverse("api:api_key_collection"), api(200, 200), api=True),
            post(reverse("api:api_key_collection"), api(400, 400), api=True),
        ],
        "api:api_key_revoke": [
            get(
                reverse("api:api_key_revoke", args=[w.spare_owner_key.api_key.pk]),
                api(405, 405),
                api=True,
            ),
            post(
                reverse("api:api_key_revoke", args=[w.spare_owner_key.api_key.pk]),
                api(200),
                api=True,
            ),
        ],
        # Only the receiver's own token opens the webhook (see the receiver test below).
        "api:alertmanager_webhook": [
            get(reverse("api:alertmanager_webhook", args=[receiver]), everyone(401), api=True),
            post(reverse("api:alertmanager_webhook", args=[receiver]), everyone(401), api=True),
        ],
        "api:schema": [get(reverse("api:schema"), everyone(200))],
        "api:docs": [get(reverse("api:docs"), everyone(200))],
        # An unknown API path is the API's JSON 404 for everyone; it reveals nothing.
        r"route api/^[\s\S]*$": [get("/api/v1/no-such-thing", everyone(404), api=True)],
        # --- admin, site-wide views
        "admin:index": [get(reverse("admin:index"), staff_only(200))],
        "admin:login": [
            get(
                reverse("admin:login"),
                by_role(anonymous=200, owner=200, others=200, reviewer=(302, "/admin/")),
            )
        ],
        "admin:logout": [
            get(
                reverse("admin:logout"),
                by_role(
                    anonymous=(302, "/admin/"),
                    owner=(302, "/admin/"),
                    others=(302, "/admin/"),
                    reviewer=405,
                ),
            )
        ],
        "admin:password_change": [get(reverse("admin:password_change"), staff_only(200))],
        "admin:password_change_done": [get(reverse("admin:password_change_done"), staff_only(200))],
        # Without its query parameters the autocomplete refuses everyone.
        "admin:autocomplete": [get(reverse("admin:autocomplete"), staff_only(403))],
        "admin:jsi18n": [get(reverse("admin:jsi18n"), staff_only(200))],
        # No model has a public page, so "view on site" finds nothing to show.
        "admin:view_on_site": [
            get(reverse("admin:view_on_site", args=[session_ct, w.session.pk]), staff_only(404))
        ],
        "admin:app_list": [get(reverse("admin:app_list", args=["diagnosis"]), staff_only(200))],
        "admin:auth_user_password_change": [
            get(
                reverse("admin:auth_user_password_change", args=[w.users["owner"].pk]),
                staff_only(403, superuser=200),
            )
        ],
        "route admin/(?P<url>.*)$": [get("/admin/no-such-page/", staff_only(404))],
    }
    for model, _model_admin in admin.site._registry.items():
        table.update(_admin_model_probes(model._meta.label_lower, model))
    return table


def by_role_all_users(expect: Expect) -> dict[str, Expect]:
    """Every signed-in role gets ``expect`` (lists and forms that are not about one row)."""
    return {role: expect for role in ROLES if role != "anonymous"}


def staff_only(expect: Expect, *, superuser: Expect | type[...] = ...) -> dict[str, Expect]:
    return by_role(
        anonymous=(302, ADMIN_LOGIN),
        owner=(302, ADMIN_LOGIN),
        others=(302, ADMIN_LOGIN),
        reviewer=expect,
        superuser=superuser,
    )


# --- walking the resolver -------------------------------------------------------------


def url_pattern_keys() -> Iterator[tuple[str, str]]:
    """(key, route) for every pattern: ``namespace:name``, or ``route <route>`` if unnamed."""

    def walk(patterns, prefix: str, namespace: str) -> Iterator[tuple[str, str]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                ns = namespace
                if pattern.namespace:
                    ns = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), ns)
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                if pattern.name:
                    yield (f"{namespace}:{pattern.name}" if namespace else pattern.name), route
                else:
                    yield f"route {route}", route

    yield from walk(get_resolver().url_patterns, "", "")


# The API registers each operation's APIView a second time, unnamed, after the method
# dispatcher that serves the URL, so the schema generator sees it; no request reaches them.
SHADOWED = {"route api/v1/diagnoses", "route api/v1/api-keys"}


def test_every_url_pattern_has_an_expectation(world):
    table = expectations(world)
    missing = sorted(
        {key for key, _route in url_pattern_keys() if key not in table and key not in SHADOWED}
    )
    assert missing == [], f"add these URL patterns to the authorization sweep: {missing}"
    unknown = sorted(set(table) - {key for key, _route in url_pattern_keys()})
    assert unknown == [], f"the sweep expects URL patterns that no longer exist: {unknown}"


def test_shadowed_api_patterns_are_never_reached():
    assert resolve("/api/v1/diagnoses").url_name == "diagnosis_collection"
    assert resolve("/api/v1/api-keys").url_name == "api_key_collection"


def _client_for(role: str, world: World) -> Client:
    client = Client()
    user = world.users.get(role)
    if user is not None:
        client.force_login(user)
    return client


def _ask(client: Client, probe: Probe, role: str, world: World):
    headers = dict(probe.headers)
    if probe.api and role in world.keys:
        headers["Authorization"] = f"Bearer {world.keys[role].key}"
    if probe.method == "GET":
        return client.get(probe.url, headers=headers)
    if probe.api:
        return client.post(
            probe.url,
            json.dumps(probe.data or {}),
            content_type="application/json",
            headers=headers,
        )
    return client.post(probe.url, probe.data or {}, headers=headers)


def _matches(response, expect: Expect) -> bool:
    if isinstance(expect, tuple):
        status, target = expect
        return response.status_code == status and response.get("Location", "").startswith(target)
    return response.status_code == expect


@pytest.mark.parametrize("role", ROLES)
def test_every_url_answers_each_role_as_expected(role, world, settings):
    settings.API_RATE_LIMIT = "100000/min"
    client = _client_for(role, world)
    mismatches = []
    for key, probes in expectations(world).items():
        for probe in probes:
            expect = probe.expect.get(role)
            if expect is None:
                continue
            if probe.url == reverse("logout") and probe.method == "POST":
                response = _ask(_client_for(role, world), probe, role, world)
            else:
                response = _ask(client, probe, role, world)
            if not _matches(response, expect):
                got = (response.status_code, response.get("Location", ""))
                mismatches.append(f"{key}: {probe.method} {probe.url} expected {expect} got {got}")
    assert mismatches == [], "\n".join(mismatches)


def test_the_alertmanager_webhook_opens_only_to_its_receivers_token(world):
    url = reverse("api:alertmanager_webhook", args=[world.receiver.slug])
    client = Client()
    own = client.post(
        url,
        "{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {world.receiver_token}"},
    )
    assert own.status_code == 400  # authenticated; the empty payload is refused
    other = reverse("api:alertmanager_webhook", args=["no-such-receiver"])
    wrong = client.post(
        other,
        "{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {world.receiver_token}"},
    )
    assert wrong.status_code == 401


def test_a_reviewer_cannot_change_what_they_review(world):
    """Invariant 5, second half: the reviewer's only write is a review."""
    client = _client_for("reviewer", world)
    before = DiagnosisSession.objects.get(pk=world.session.pk)
    response = client.post(
        reverse("admin:diagnosis_diagnosissession_change", args=[world.session.pk]),
        {"final_answer": "changed", "status": "failed"},
    )
    assert response.status_code == 403
    after = DiagnosisSession.objects.get(pk=world.session.pk)
    assert (after.final_answer, after.status) == (before.final_answer, before.status)
