"""The languages answers are written in, as Django translation languages.

One rule decides an answer's language everywhere: English when the language (a
session's, a receiver's, a page's: ``zh-CN``, ``en-GB``, ``en``) starts with ``en``,
Chinese otherwise (Chinese is the default).
"""

from __future__ import annotations

from django.utils import translation


def language_key(language: str | None) -> str:
    """``en`` for an English language, ``zh`` for every other (and for none)."""
    return "en" if (language or "").strip().lower().startswith("en") else "zh"


def language_override(language: str) -> translation.override:
    """Activate an answer language for a ``with`` block: English for ``en…``, else Chinese.

    ``language`` is a session's or a receiver's language (``zh-CN``, ``en``) or its
    key (``zh``, ``en``); gettext inside the block answers in it.
    """
    return translation.override("en" if language_key(language) == "en" else "zh-hans")
