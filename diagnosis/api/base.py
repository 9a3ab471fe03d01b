"""What every v1 endpoint shares: its base view, the diagnosis lookup, schema tags."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from diagnosis.api.auth import ApiKeyAuthentication, ApiKeyRateThrottle, rate_limit_state
from diagnosis.api.errors import JSONParser, request_size_check
from diagnosis.api.selectors import diagnosis_get_for_user
from diagnosis.models import DiagnosisSession

TAG_DIAGNOSES = "diagnoses"
TAG_KEYS = "api-keys"
TAG_ALERTS = "integrations"


# Base for every v1 endpoint: key or session auth, per-key rate limit, body-size check.
class ApiView(APIView):
    authentication_classes = [ApiKeyAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes = [ApiKeyRateThrottle]
    parser_classes = [JSONParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        request_size_check(request)
        super().initial(request, *args, **kwargs)

    def finalize_response(
        self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        # Every answer to a counted request says where its bucket stands, errors included.
        state = rate_limit_state(request)
        if state is not None:
            for name, value in state.headers().items():
                response[name] = value
        return super().finalize_response(request, response, *args, **kwargs)


def diagnosis_or_404(request: Request, public_id: UUID | str) -> DiagnosisSession:
    session = diagnosis_get_for_user(user=request.user, public_id=public_id)
    if session is None:
        raise exceptions.NotFound(_("没有这个诊断。"))
    return session


def diagnosis_url(session: DiagnosisSession) -> str:
    return reverse("api:diagnosis_detail", kwargs={"public_id": session.public_id})


ID_PARAMETER = OpenApiParameter(
    "public_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The diagnosis's id."
)
