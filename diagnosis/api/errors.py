"""One error shape for every API error: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, JsonResponse
from django.utils.functional import Promise
from django.utils.translation import gettext, gettext_lazy
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, parsers, serializers, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from diagnosis.api.auth import seconds_to_wait
from diagnosis.contracts import ConflictError

logger = logging.getLogger(__name__)

API_PATH_PREFIX = "/api/"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = gettext_lazy("请求体太大。")
    default_code = "payload_too_large"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = gettext_lazy("请求与当前状态冲突。")
    default_code = "conflict"


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, but JSON nested too deeply for Python's decoder is a 400, not a 500."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(gettext("JSON 解析错误：嵌套太深。")) from None
        except exceptions.ParseError as exc:
            # DRF's text is English whatever the language, and quotes the decoder.
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, json.JSONDecodeError):
                message = gettext("请求体不是有效的 JSON（第 %(line)s 行第 %(column)s 列）。") % {
                    "line": cause.lineno,
                    "column": cause.colno,
                }
            else:
                message = gettext("请求体不是有效的 JSON。")
            raise exceptions.ParseError(message) from None


class FieldNotFound(exceptions.NotFound):
    """A 404 for what a request field names when no such object exists for the caller.

    A schema cannot know which environments, conversations or pages exist, so naming
    one that does not is "not found", not invalid input; ``details.fields`` still says
    which field named it, as for a 400.
    """

    def __init__(self, field: str, message: str | Promise, *, code: str = "not_found") -> None:
        super().__init__(str(message), code)
        self.field = field


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _first_code(codes: Any) -> str | None:
    if isinstance(codes, str):
        return codes
    if isinstance(codes, list) and codes:
        return _first_code(codes[0])
    if isinstance(codes, dict) and codes:
        return _first_code(next(iter(codes.values())))
    return None


def _details_of(exc: exceptions.APIException) -> dict[str, Any]:
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if isinstance(detail, dict):
            return {"fields": detail}
        return {"fields": {"non_field_errors": detail}}
    if isinstance(exc, FieldNotFound):
        return {"fields": {exc.field: [exc.detail]}}
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        return {"retry_after_seconds": seconds_to_wait(exc.wait)}
    return {}


def _as_api_exception(exc: Exception) -> Exception:
    """Django's and the services' errors as the DRF exception with the same status."""
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied()
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, DjangoValidationError):
        fields = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return exceptions.ValidationError(fields)
    if isinstance(exc, ConflictError):
        return Conflict(exc.message, code=exc.code)
    return exc


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF EXCEPTION_HANDLER: every exception in an API view becomes the one error shape."""
    exc = _as_api_exception(exc)
    if not isinstance(exc, exceptions.APIException):
        logger.exception("unhandled API error", exc_info=exc)
        set_rollback()
        return Response(
            error_body("server_error", gettext("服务器内部错误。")),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )

    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        headers["Retry-After"] = str(seconds_to_wait(exc.wait))

    if isinstance(exc, exceptions.ValidationError):
        code, message = "invalid", gettext("请求无效，详见 details.fields。")
    else:
        code = _first_code(exc.get_codes()) or exc.default_code
        message = str(exc.detail) if not isinstance(exc.detail, dict | list) else str(exc)
    set_rollback()
    return Response(
        error_body(str(code), message, _details_of(exc)), status=exc.status_code, headers=headers
    )


def request_size_check(request: HttpRequest) -> None:
    """413 from the declared Content-Length, before anything reads or parses the body."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except ValueError:
        raise exceptions.ParseError(gettext("Content-Length 请求头无效。")) from None
    if length > settings.API_MAX_BODY_BYTES:
        raise PayloadTooLarge(
            gettext("请求体有 %(length)s 字节，上限是 %(limit)s 字节。")
            % {"length": length, "limit": settings.API_MAX_BODY_BYTES}
        )


@csrf_exempt  # a 404 is the answer whatever the method; no CSRF page in between
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any /api/ path that names no endpoint."""
    return JsonResponse(error_body("not_found", gettext("没有这个 API 端点。")), status=404)


def server_error(request: HttpRequest) -> Any:
    """handler500: the error shape under /api/, Django's page elsewhere."""
    if request.path.startswith(API_PATH_PREFIX):
        return JsonResponse(error_body("server_error", gettext("服务器内部错误。")), status=500)
    return defaults.server_error(request)


# --- OpenAPI ---------------------------------------------------------------------


class ErrorSerializer(serializers.Serializer):
    class ErrorBodySerializer(serializers.Serializer):
        code = serializers.CharField(
            help_text="Stable machine-readable code, e.g. invalid, not_authenticated, "
            "authentication_failed, not_found, invalid_cursor, method_not_allowed, "
            "payload_too_large, "
            "throttled, idempotency_conflict, not_cancellable, server_error."
        )
        message = serializers.CharField(help_text="A human-readable explanation.")
        details = serializers.DictField(
            help_text="For 400, and for a 404 about an object a field names: "
            "{fields: {field: [messages]}}; for 429: {retry_after_seconds}; otherwise usually "
            "empty."
        )

    error = ErrorBodySerializer()


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    descriptions = {
        400: "Invalid input: `details.fields` maps each field to its messages.",
        401: "No credentials, or an invalid or revoked key/token.",
        403: "Session authentication without a valid CSRF token.",
        404: "No such object for this owner (another owner's object is a 404 too); for an "
        "object a field names (an environment, a conversation, a cursor's page), "
        "`details.fields` names the field.",
        405: "Method not allowed on this path.",
        409: "The request conflicts with existing state.",
        413: "The body exceeds API_MAX_BODY_BYTES (checked from Content-Length).",
        429: "The key exceeded API_RATE_LIMIT; see the Retry-After header.",
        500: "Internal error.",
    }
    return {
        code: OpenApiResponse(ErrorSerializer, description=descriptions[code]) for code in codes
    }
