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
# Prometheus' prefix for a label displaced by a clash (``honor_labels: false``): a series'
# own ``service`` that met the scrape's becomes ``exported_service``, a further clash
# ``exported_exported_service``. Rootproof renames the same way when another label names
# the service: the backend's own ``service`` is read as ``exported_service``, and so on.
EXPORTED_PREFIX = "exported_"
EXPORTED_SERVICE_LABEL = EXPORTED_PREFIX + SERVICE_LABEL


def _exported_depth(name: str) -> int | None:
    """k when ``name`` is ``exported_`` k times, then ``service``; None for other names."""
    depth = 0
    while name.startswith(EXPORTED_PREFIX):
        name = name[len(EXPORTED_PREFIX) :]
        depth += 1
    return depth if name == SERVICE_LABEL else None


def _exported(depth: int) -> str:
    return EXPORTED_PREFIX * depth + SERVICE_LABEL


def label_to_backend(name: str, service_label: str) -> str:
    """The name a backend whose services are named by ``service_label`` gives label ``name``.

    ``service`` is ``service_label``; the ``exported_…service`` labels shift one step down
    the clash chain (``exported_service`` is the backend's own ``service``), skipping
    ``service_label`` when it is one of them. The inverse of ``labels_from_backend``.
    """
    if service_label == SERVICE_LABEL:
        return name
    depth = _exported_depth(name)
    if depth is None:
        return name
    if depth == 0:
        return service_label
    label_depth = _exported_depth(service_label)
    below = depth - 1
    return _exported(below if label_depth is None or below < label_depth else depth)


def _label_from_backend(name: str, service_label: str) -> str:
    if name == service_label:
        return SERVICE_LABEL
    depth = _exported_depth(name)
    if depth is None:
        return name
    label_depth = _exported_depth(service_label)
    return _exported(depth + 1 if label_depth is None or depth < label_depth else depth)


def labels_from_backend(labels: dict[str, str], service_label: str) -> dict[str, str]:
    """A backend series' labels as Rootproof names them: ``service_label`` becomes
    ``service``; a ``service`` label of the series' own becomes ``exported_service`` (and
    an ``exported_service`` of its own ``exported_exported_service``: none is lost)."""
    if service_label == SERVICE_LABEL:
        return labels
    return {_label_from_backend(k, service_label): v for k, v in labels.items()}


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
