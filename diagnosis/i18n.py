"""The languages answers are written in, as Django translation languages."""

from __future__ import annotations

from django.utils import translation


def language_override(language: str) -> translation.override:
    """Activate an answer language for a ``with`` block: English for ``en…``, else Chinese.

    ``language`` is a session's or a receiver's language (``zh-CN``, ``en``) or its
    key (``zh``, ``en``); gettext inside the block answers in it.
    """
    return translation.override("en" if language.lower().startswith("en") else "zh-hans")
