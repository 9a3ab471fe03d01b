"""Series selectors: ``name{label="v", …}`` as PromQL writes them, parsed and built.

Inside Rootproof a series names its service in the label ``service``; a Prometheus whose
fleet names services with another label (``job``, ``app``, …) is spoken to in its own
names: ``Selector.relabelled`` on the way out, ``labels_from_backend`` on the way back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnosis.models import SERVICE_LABEL

# Names that OpenMetrics reserves for monotonic counters: these are compared as per-second rates.
COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")

_SELECTOR = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(\{.*\})?\s*$", re.DOTALL)
_MATCHER = re.compile(
    r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)', re.DOTALL
)
# Where a backend series' own ``service`` label goes when another label names its service:
# Prometheus' own name for a label displaced by a clash (``honor_labels: false``).
EXPORTED_SERVICE_LABEL = "exported_service"


def label_to_backend(name: str, service_label: str) -> str:
    """The name a backend whose services are named by ``service_label`` gives label ``name``."""
    if service_label == SERVICE_LABEL:
        return name
    if name == SERVICE_LABEL:
        return service_label
    return SERVICE_LABEL if name == EXPORTED_SERVICE_LABEL else name


def labels_from_backend(labels: dict[str, str], service_label: str) -> dict[str, str]:
    """A backend series' labels as Rootproof names them: ``service_label`` becomes
    ``service``, and a ``service`` label of the series' own becomes ``exported_service``."""
    if service_label == SERVICE_LABEL:
        return labels
    renamed = {SERVICE_LABEL: EXPORTED_SERVICE_LABEL, service_label: SERVICE_LABEL}
    return {renamed.get(k, k): v for k, v in labels.items()}


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op == "=~" else not found

    def render(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op}"{escaped}"'


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[Matcher, ...]

    def render(self) -> str:
        inner = ",".join(m.render() for m in self.matchers)
        return f"{self.name or ''}{{{inner}}}" if inner or not self.name else self.name

    def relabelled(self, service_label: str) -> Selector:
        """This selector as a backend whose services are named by ``service_label`` needs it."""
        if service_label == SERVICE_LABEL:
            return self
        matchers = (
            Matcher(label_to_backend(m.name, service_label), m.op, m.value) for m in self.matchers
        )
        return Selector(name=self.name, matchers=tuple(matchers))

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        if self.name and name != self.name:
            return False
        with_name = {**labels, "__name__": name}
        return all(m.matches(with_name) for m in self.matchers)


def selector_parse(text: str) -> Selector | None:
    """Parse ``name``, ``name{l="v",…}`` or ``{l=~"v"}``; None when it is not a plain selector."""
    match = _SELECTOR.match(text)
    if not match or not (match.group(1) or match.group(2)):
        return None
    matchers: list[Matcher] = []
    body = (match.group(2) or "{}")[1:-1].strip()
    position = 0
    while position < len(body):
        item = _MATCHER.match(body, position)
        if not item:
            return None
        value = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), item.group(3))
        if item.group(2) in {"=~", "!~"}:
            try:
                re.compile(value)
            except re.error:
                return None
        matchers.append(Matcher(item.group(1), item.group(2), value))
        position = item.end()
    return Selector(name=match.group(1), matchers=tuple(matchers))


def selector_build(
    *, metric: str | None, service: str | None, labels: dict[str, str]
) -> Selector | None:
    """The selector for these arguments, or None when ``metric`` is a PromQL expression."""
    base = selector_parse(metric) if metric else Selector(name=None, matchers=())
    if base is None:
        return None
    extra = [Matcher(SERVICE_LABEL, "=", service)] if service else []
    extra += [Matcher(k, "=", v) for k, v in sorted(labels.items())]
    existing = {(m.name, m.op) for m in base.matchers}
    merged = list(base.matchers) + [m for m in extra if (m.name, m.op) not in existing]
    return Selector(name=base.name, matchers=tuple(merged))
