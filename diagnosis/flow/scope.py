"""What the question is about, checked against what the environment knows.

Two small, pure rules the flow applies whatever the model said:

- a service the question names that the environment does not know is said at the
  top of the answer, and such an answer cannot be PASS (the evidence cannot cover
  a service no tool can see);
- the answer's badge says whether the root cause is confirmed (an allowed
  root-cause claim observed directly), inferred (allowed, worded as a bounded
  inference), only hypothesised (hypotheses, no such claim) or undetermined
  (neither), not only whether the evidence checked out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from django.utils.translation import gettext as _

from diagnosis.contracts import ComposerInput
from diagnosis.i18n import language_override
from diagnosis.models import DiagnosisSession

RootCause = DiagnosisSession.RootCause


def _named_in(text: str, name: str) -> bool:
    pattern = rf"(?<![\w.-]){re.escape(name.lower())}(?![\w-])"
    return re.search(pattern, text.lower()) is not None


def services_unknown(*, question: str, planned: Iterable[str], known: Iterable[str]) -> list[str]:
    """Services the Planner read in the question that the environment does not list.

    Only names that really occur in the question count (a Planner may add names of
    its own), and only when the environment lists its services at all: an
    environment without a service list cannot say what it lacks.
    """
    known_lower = {k.lower() for k in known if isinstance(k, str) and k}
    if not known_lower:
        return []
    found: list[str] = []
    for name in planned:
        if not isinstance(name, str) or not name.strip():
            continue
        name = name.strip()
        if name.lower() in known_lower or name.lower() in (f.lower() for f in found):
            continue
        if _named_in(question, name):
            found.append(name)
    return found


def unknown_services_notice(*, services: list[str], environment: str, language: str) -> str:
    """The line that opens an answer about services the environment lacks."""
    with language_override(language):
        names = _("、").join(services)
        return _(
            "**注意：{services} 不在环境「{environment}」中。** 本次诊断看不到它的数据，"
            "下面的内容只涉及该环境已知的服务。"
        ).format(services=names, environment=environment)


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def window_notice(*, window: dict | None, language: str) -> str:
    """The line that closes an answer: which window it looked at, and in which timezone."""
    start = _moment((window or {}).get("start"))
    end = _moment((window or {}).get("end"))
    if start is None or end is None:
        return ""
    same_day = start.date() == end.date()
    shown_end = end.strftime("%H:%M") if same_day else end.strftime("%Y-%m-%d %H:%M")
    with language_override(language):
        return _("_查看的时间窗口：{start} 至 {end}（UTC），与其之前的基线时段比较。_").format(
            start=start.strftime("%Y-%m-%d %H:%M"), end=shown_end
        )


def root_cause_status(composer_input: ComposerInput | None) -> str:
    """The badge: the answer's one certainty (``ComposerInput.certainty``), which the
    conclusion's opening and sections read too."""
    if composer_input is None:
        return RootCause.UNDETERMINED
    return RootCause(composer_input.certainty().value)
