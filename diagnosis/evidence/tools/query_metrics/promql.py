"""PromQL as a model writes it (services in the label ``service``) spoken in the label
names of an environment whose fleet names services otherwise (``job``, ``app``, …).

The expression is tokenised, not parsed: label names stand in a few places only, and
those are renamed with ``label_to_backend``:

- a matcher inside ``{…}`` (``{service="pay"}``, ``{service=~"pay|cart"}``);
- the list of a grouping or matching clause: ``by``, ``without``, ``on``, ``ignoring``,
  ``group_left``, ``group_right`` (``sum by (service) (…)``);
- the label arguments of ``label_replace``, ``label_join``, ``count_values`` and
  ``sort_by_label[_desc]`` (``label_replace(v, "service", "$1", "pod", "(.*)-.*")``).

Strings elsewhere (matcher values, regexes), metric names, numbers, durations and
comments are left as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnosis.evidence.tools.query_metrics.selector import label_to_backend
from diagnosis.models import SERVICE_LABEL

_TOKEN = re.compile(
    r"""
      (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    | (?P<comment>\#[^\n]*)
    | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
    | (?P<matcher>=~|!~|!=|=)
    | (?P<space>\s+)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_CLAUSES = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_OPEN = {"(": ")", "{": "}", "[": "]"}


def _label_arguments(function: str, position: int) -> bool:
    """Whether argument ``position`` (from 0) of ``function`` names a label."""
    if function == "label_replace":
        return position in {1, 3}
    if function == "label_join":
        return position == 1 or position >= 3
    if function == "count_values":
        return position == 0
    if function in {"sort_by_label", "sort_by_label_desc"}:
        return position >= 1
    return False


@dataclass
class _Frame:
    bracket: str  # the opening character
    owner: str = ""  # the function or clause keyword right before "(", lower-cased
    argument: int = 0  # commas seen at this level


def _renamed_string(text: str, service_label: str) -> str:
    quote, inner = text[0], text[1:-1]
    renamed = label_to_backend(inner, service_label)
    return text if renamed == inner else quote + renamed + quote


def promql_relabelled(expression: str, service_label: str) -> str:
    """``expression`` with every label name in it as the environment names it; unchanged
    when the environment names services ``service``."""
    if service_label == SERVICE_LABEL:
        return expression
    tokens = [(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(expression)]
    meaningful = [i for i, (kind, _) in enumerate(tokens) if kind not in {"space", "comment"}]
    following = dict(zip(meaningful, [*meaningful[1:], None], strict=True))
    stack: list[_Frame] = []
    previous = ""  # the last meaningful token, when it is a name
    out: list[str] = []
    for index, (kind, text) in enumerate(tokens):
        top = stack[-1] if stack else None
        after = following.get(index)
        next_kind, next_text = tokens[after] if after is not None else ("", "")
        written = text
        in_braces = top is not None and top.bracket == "{"
        if in_braces and kind in {"name", "string"} and next_kind == "matcher":
            if kind == "name":
                text = label_to_backend(text, service_label)
            else:  # Prometheus 3: a quoted label name
                text = _renamed_string(text, service_label)
        elif kind == "name" and top is not None and top.bracket == "(":
            if top.owner in _CLAUSES:
                text = label_to_backend(text, service_label)
        elif kind == "string" and top is not None and top.bracket == "(":
            if _label_arguments(top.owner, top.argument) and next_text in {",", ")"}:
                text = _renamed_string(text, service_label)
        elif text in _OPEN:
            stack.append(_Frame(text, previous.lower() if text == "(" else ""))
        elif top is not None and text == _OPEN[top.bracket]:
            stack.pop()
        elif text == "," and top is not None:
            top.argument += 1
        if kind not in {"space", "comment"}:
            previous = written if kind == "name" else ""
        out.append(text)
    return "".join(out)
