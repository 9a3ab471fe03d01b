"""URLs under /api/: v1 endpoints, the OpenAPI schema and its docs.

Each operation is its own APIView. Where two operations share a path (GET and POST
/diagnoses), a small dispatcher picks the view by method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.views import APIView

from diagnosis.api import alerts, diagnoses, keys, tool_invocations
from diagnosis.api.errors import api_not_found, error_body

app_name = "api"

# (route under /api/v1/, url name, method, view class)
OPERATIONS: list[tuple[str, str, str, type[APIView]]] = [
    ("diagnoses", "diagnosis_collection", "GET", diagnoses.DiagnosisListApi),
    ("diagnoses", "diagnosis_collection", "POST", diagnoses.DiagnosisCreateApi),
    ("diagnoses/<uuid:public_id>", "diagnosis_detail", "GET", diagnoses.DiagnosisDetailApi),
    ("diagnoses/<uuid:public_id>/cancel", "diagnosis_cancel", "POST", diagnoses.DiagnosisCancelApi),
    (
        "diagnoses/<uuid:public_id>/tool-invocations",
        "diagnosis_tool_invocations",
        "GET",
        tool_invocations.DiagnosisToolInvocationListApi,
    ),
    (
        "diagnoses/<uuid:public_id>/callback-attempts",
        "diagnosis_callback_attempts",
        "GET",
        diagnoses.DiagnosisCallbackAttemptListApi,
    ),
    (
        "tool-invocations/<int:invocation_id>",
        "tool_invocation_detail",
        "GET",
        tool_invocations.ToolInvocationDetailApi,
    ),
    ("api-keys", "api_key_collection", "GET", keys.ApiKeyListApi),
    ("api-keys", "api_key_collection", "POST", keys.ApiKeyCreateApi),
    ("api-keys/<int:key_id>/revoke", "api_key_revoke", "POST", keys.ApiKeyRevokeApi),
    (
        "integrations/alertmanager/<slug:receiver>",
        "alertmanager_webhook",
        "POST",
        alerts.AlertmanagerWebhookApi,
    ),
]


def method_dispatch(views: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """One URL, one APIView per method; other methods get the API's 405."""
    methods = set(views) | {"OPTIONS"} | ({"HEAD"} if "GET" in views else set())
    allowed = ", ".join(sorted(methods))

    @csrf_exempt  # SessionAuthentication enforces CSRF inside the API views
    def dispatch(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        view = views.get(request.method or "")
        if view is None and request.method == "HEAD" and "GET" in views:
            view = views["GET"]
        if view is None and request.method == "OPTIONS":
            response = next(iter(views.values()))(request, *args, **kwargs)
            response["Allow"] = allowed  # every method of the path, not the first view's
            return response
        if view is None:
            response = JsonResponse(
                # DRF's own (translated) wording, the same as a 405 from inside a view.
                error_body("method_not_allowed", str(MethodNotAllowed(request.method).detail)),
                status=405,
            )
            response["Allow"] = allowed
            return response
        return view(request, *args, **kwargs)

    return dispatch


def _v1_patterns() -> list[URLPattern]:
    by_route: dict[tuple[str, str], dict[str, type[APIView]]] = {}
    for route, name, method, view_class in OPERATIONS:
        by_route.setdefault((route, name), {})[method] = view_class
    served: list[URLPattern] = []
    shadowed: list[URLPattern] = []
    for (route, name), classes in by_route.items():
        if len(classes) == 1:
            served.append(path(f"v1/{route}", next(iter(classes.values())).as_view(), name=name))
            continue
        views = {method: view_class.as_view() for method, view_class in classes.items()}
        served.append(path(f"v1/{route}", method_dispatch(views), name=name))
        # Never reached (the dispatcher above matches first); here so the schema
        # generator, which skips the dispatcher, sees each operation's APIView.
        shadowed.extend(path(f"v1/{route}", view) for view in views.values())
    return served + shadowed


urlpatterns = [
    *_v1_patterns(),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view loads its start-up script from a URL, so script-src stays 'self';
    # Swagger UI's own markup needs inline styles, allowed on this page only.
    path(
        "docs/",
        csp_update({"style-src": [SELF, UNSAFE_INLINE]})(
            SpectacularSwaggerSplitView.as_view(url_name="api:schema")
        ),
        name="docs",
    ),
    re_path(r"^[\s\S]*$", api_not_found),  # any path, one with a newline too (unlike ".")
]
