from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from diagnosis.selectors import broker_health, database_health


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    database = database_health()
    broker = broker_health()
    ok = database.ok and broker.ok
    body = {
        "status": "ok" if ok else "unavailable",
        "database": {"ok": database.ok, "detail": database.detail},
        "broker": {"ok": broker.ok, "detail": broker.detail},
    }
    return JsonResponse(body, status=200 if ok else 503)
