"""LogFilter: which log lines a query_logs call asks for (service or /regex/, text or
/regex/, level), with the cheap pre-filters the scans use."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from diagnosis.evidence.common import (
    ToolFailure,
)
from diagnosis.evidence.formats import (
    LogRecord,
    level_normalise,
)


def _regex_compile(text: str, argument: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise ToolFailure(f"{argument} /{text}/ is not a valid regular expression: {exc}") from None


def _slashed(value: str | None) -> str | None:
    """The regular expression of a ``/…/`` argument, None for plain text."""
    if value and len(value) >= 2 and value.startswith("/") and value.endswith("/"):
        return value[1:-1]
    return None


@dataclass(frozen=True)
class LogFilter:
    service: str | None = None
    text: str | None = None
    pattern: re.Pattern[str] | None = None
    level: str | None = None
    # ``service="/regex/"``: the services whose whole name the expression matches.
    service_pattern: re.Pattern[str] | None = None

    @classmethod
    def build(cls, *, service: str | None, query: str | None, level: str | None) -> LogFilter:
        text = pattern = service_pattern = None
        if query:
            regex = _slashed(query)
            if regex is not None:
                pattern = _regex_compile(regex, "query")
            else:
                text = query
        service_regex = _slashed(service)
        if service_regex is not None:
            service_pattern = _regex_compile(service_regex, "service")
            service = None
        return cls(
            service=service or None,
            text=text,
            pattern=pattern,
            level=level_normalise(level) or None,
            service_pattern=service_pattern,
        )

    @property
    def fleet(self) -> bool:
        """True when the query may span many services: no service, or a service selector."""
        return not self.service

    def service_allows(self, service: str) -> bool:
        if self.service:
            return service == self.service
        return self.service_pattern is None or self.service_pattern.fullmatch(service) is not None

    def matches(self, record: LogRecord) -> bool:
        return self.fields_match(record.service, record.level, record.message)

    def fields_match(self, service: str, level: str, message: str) -> bool:
        if self.service and service != self.service:
            return False
        if self.service_pattern is not None and self.service_pattern.fullmatch(service) is None:
            return False
        if self.level and level != self.level:
            return False
        if self.text is not None and self.text not in message:
            return False
        return not (self.pattern is not None and not self.pattern.search(message))

    @property
    def selective(self) -> bool:
        return bool(
            self.service
            or self.service_pattern
            or self.level
            or self.text is not None
            or self.pattern
        )

    def describe(self) -> str:
        parts = []
        if self.service:
            parts.append(f"service={self.service}")
        if self.service_pattern is not None:
            parts.append(f"service=/{self.service_pattern.pattern}/")
        if self.text is not None:
            parts.append(f"query={json.dumps(self.text, ensure_ascii=False)}")
        if self.pattern is not None:
            parts.append(f"query=/{self.pattern.pattern}/")
        if self.level:
            parts.append(f"level={self.level}")
        return " ".join(parts) or "all services"

    def raw_prefilter(self) -> list[str]:
        """Substrings every matching JSON line must contain verbatim (safe: plain ASCII only)."""
        needles = []
        for value in (self.service, self.text):
            if (
                value
                and value.isascii()
                and value.isprintable()
                and '"' not in value
                and "\\" not in value
            ):
                needles.append(value)
        return needles
