"""Language choice: pages are Chinese unless the user picked English with the switch."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.middleware.locale import LocaleMiddleware
from django.utils import translation


class PreferredLanguageMiddleware(LocaleMiddleware):
    """Pages ignore the browser's Accept-Language: Rootproof answers in Chinese by default and
    the language switch (a cookie) is the one way to change it. API clients keep
    Accept-Language for their error messages."""

    def process_request(self, request: HttpRequest) -> None:
        if request.path.startswith("/api/"):
            super().process_request(request)
            return
        chosen = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME, "")
        if chosen not in dict(settings.LANGUAGES):
            chosen = settings.LANGUAGE_CODE
        translation.activate(chosen)
        request.LANGUAGE_CODE = translation.get_language()
