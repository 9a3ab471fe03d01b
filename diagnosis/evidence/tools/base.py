"""What every tool is: a ``ToolDefinition`` (name, description, arguments as ``Arg``, its
backend ``run``, its kind and how its summary becomes facts) and the ``ToolCall`` a backend
runs on (the session, its environment and pack, the cleaned arguments, the time window).

Each tool's own definition lives in its folder, ``diagnosis/evidence/tools/<name>/``; the
registry of them all is ``diagnosis.evidence.tools``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.utils import timezone

from diagnosis.evidence.common import (
    DEFAULT_WINDOW,
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    clamp_record,
)
from diagnosis.evidence.packs import PackError, ScenarioPack, pack_header_load
from diagnosis.evidence.timeutil import TimeFormatError, duration_parse, time_format, time_parse
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation

logger = logging.getLogger(__name__)

MAX_RANGE = timedelta(days=31)


# --- arguments --------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # string | integer | number | labels | time | duration
    description: str
    required: bool = False
    minimum: int | None = None
    maximum: int | None = None

    def range_text(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"allowed {self.minimum} to {self.maximum}"
        if self.maximum is not None:
            return f"at most {self.maximum}"
        return f"at least {self.minimum}"

    def schema(self) -> dict[str, Any]:
        if self.kind == "integer":
            out: dict[str, Any] = {"type": "integer", "description": self.description}
            if self.minimum is not None:
                out["minimum"] = self.minimum
            if self.maximum is not None:
                out["maximum"] = self.maximum
            return out
        if self.kind == "number":
            out = {"type": "number", "description": self.description}
            if self.minimum is not None:
                out["minimum"] = self.minimum
            return out
        if self.kind == "labels":
            return {
                "type": "object",
                "description": self.description,
                "additionalProperties": {"type": "string"},
            }
        out = {"type": "string", "description": self.description}
        if self.kind == "time":
            out["format"] = "date-time"
        return out

    def clean(self, value: Any, tool: str, clamps: dict[str, dict[str, Any]]) -> Any:
        where = f"argument {self.name!r} of {tool}"
        if self.kind in {"string", "time"}:
            if not isinstance(value, str):
                raise ToolFailure(f"{where} must be a string, got {type(value).__name__} {value!r}")
            if not value.strip():
                return None
            if self.kind == "time":
                try:
                    return time_parse(value)
                except TimeFormatError as exc:
                    raise ToolFailure(f"{where}: {exc}") from None
            return value.strip()
        if self.kind == "duration":
            try:
                return duration_parse(value)
            except TimeFormatError as exc:
                raise ToolFailure(f"{where}: {exc}") from None
        if self.kind == "integer":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ToolFailure(f"{where} must be an integer, got {value!r}")
            # Out of range is clamped, not refused: the call still answers, and says so.
            used = value
            if self.minimum is not None and used < self.minimum:
                used = self.minimum
            if self.maximum is not None and used > self.maximum:
                used = self.maximum
            if used != value:
                clamp_record(clamps, self.name, given=value, used=used, why=self.range_text())
            return used
        if self.kind == "number":
            if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
                raise ToolFailure(f"{where} must be a number, got {value!r}")
            if self.minimum is not None and value < self.minimum:
                clamp_record(
                    clamps, self.name, given=value, used=self.minimum, why=self.range_text()
                )
                return self.minimum
            return value
        if self.kind == "labels":
            if not isinstance(value, dict):
                raise ToolFailure(
                    f'{where} must be an object of label to value, e.g. {{"pool": "main"}}'
                )
            bad = [
                k
                for k, v in value.items()
                if not isinstance(v, str | int | float) or isinstance(v, bool)
            ]
            if bad:
                raise ToolFailure(
                    f"{where}: label value(s) for {', '.join(map(repr, bad))} must be strings"
                )
            return {str(k): str(v) for k, v in value.items()}
        raise AssertionError(self.kind)


TIME_ARGS = (
    Arg("start", "time", "Start of the window, RFC 3339 (default: the session's window start)."),
    Arg("end", "time", "End of the window, RFC 3339 (default: the session's 'now')."),
)


# --- the call context -------------------------------------------------------


@dataclass
class ToolCall:
    session: DiagnosisSession
    environment: Environment
    tool_name: str
    given: dict[str, Any]  # as the model sent them
    args: dict[str, Any]  # cleaned; absent arguments missing
    deadline: Deadline
    clamps: dict[str, dict[str, Any]] = field(default_factory=dict)
    _pack: ScenarioPack | None = field(default=None, repr=False)

    @property
    def pack(self) -> ScenarioPack:
        if self._pack is None:
            try:
                self._pack = pack_header_load(self.environment.pack_path)
            except PackError as exc:
                raise ToolFailure(
                    f"the scenario pack of environment {self.environment.slug} "
                    f"cannot be loaded: {exc}"
                ) from None
        return self._pack

    def now(self) -> datetime:
        context = self.session.context or {}
        if context.get("now"):
            try:
                return time_parse(context["now"])
            except TimeFormatError:
                logger.warning(
                    "session %s has a bad context.now %r", self.session.pk, context["now"]
                )
        if self.environment.kind == Environment.Kind.SCENARIO and self.environment.pack_path:
            return self.pack.now
        return timezone.now()

    def _default_range(self) -> tuple[datetime, datetime]:
        context = self.session.context or {}
        window = context.get("window")
        if isinstance(window, dict) and window.get("start") and window.get("end"):
            try:
                start, end = time_parse(window["start"]), time_parse(window["end"])
            except TimeFormatError:
                logger.warning("session %s has a bad context.window %r", self.session.pk, window)
            else:
                if start < end:
                    return start, end
        end = self.now()
        return end - DEFAULT_WINDOW, end

    def window(self) -> QueryWindow:
        default_start, default_end = self._default_range()
        length = default_end - default_start
        # Arg.clean made them datetimes (TIME_ARGS); one absent keeps the default length.
        given_start: datetime | None = self.args.get("start")
        given_end: datetime | None = self.args.get("end")
        if given_end is not None:
            end = given_end
            start = given_start if given_start is not None else end - length
        elif given_start is not None:
            start = given_start
            end = default_end if default_end > start else start + length
        else:
            start, end = default_start, default_end
        if start > end:
            self._clamp_times(start, end, end, start, "start was after end: swapped")
            start, end = end, start
        elif start == end:
            self._clamp_times(start, end, end - length, end, "an empty range: the default length")
            start = end - length
        if end - start > MAX_RANGE:
            self._clamp_times(start, end, end - MAX_RANGE, end, "at most 31 days")
            start = end - MAX_RANGE
        return QueryWindow.around(start=start, end=end)

    def _clamp_times(
        self, start: datetime, end: datetime, new_start: datetime, new_end: datetime, why: str
    ) -> None:
        for name, given, used in (("start", start, new_start), ("end", end, new_end)):
            if given != used:
                clamp_record(
                    self.clamps, name, given=time_format(given), used=time_format(used), why=why
                )


# --- shared by the backends --------------------------------------------------


def no_files(call: ToolCall, what: str) -> ToolFailure:
    return ToolFailure(
        f"nothing was recorded for this call: scenario pack {call.pack.id} has no {what} and no "
        f"recorded invocation of {call.tool_name} with these arguments"
    )


def source_missing(call: ToolCall, source: str, empty: dict[str, Any]) -> BackendOutput | None:
    """``no_data`` when the environment has no ``source`` ("metrics", "logs" or "traces").

    Absent data is a gap, not a failure: the summary marks it with ``missing_source``
    so an answer can name the missing source once. A replay pack (with ``recorded/``)
    that lacks the call stays an error: something was asked that was not recorded.
    """
    env = call.environment
    if env.kind == Environment.Kind.LIVE:
        configured = {
            "metrics": env.prometheus_url,
            "logs": env.loki_url,
            "traces": env.traces_url,
        }[source]
        if configured:
            return None
    else:
        paths = call.pack.paths
        files = {"metrics": paths.metrics, "logs": paths.logs, "traces": paths.traces}[source]
        if files or paths.recorded:
            return None
    reason = f"no {source} source configured for environment {env.slug}"
    described = " ".join(f"{k}={v}" for k, v in call.given.items() if v is not None)
    return BackendOutput(
        status=ToolInvocation.Status.NO_DATA,
        output=f"{call.tool_name} {described}".rstrip() + f"\nno data: {reason}",
        summary={**empty, "missing_source": source, "reason": reason},
    )


def no_facts(summary: dict[str, Any]) -> list[str]:
    """No facts from the summary: the trace summary falls back to the output's lines."""
    return []


def summary_as_is(summary: dict[str, Any], output: str) -> dict[str, Any]:
    """A summary with nothing that a truncated output can lose."""
    return summary


def summary_lines_cut(summary: dict[str, Any], output: str, key: str) -> dict[str, Any]:
    """``summary`` with only the ``key`` entries and fleet ranks whose lines (and samples,
    trend line) the truncated ``output`` still shows; the entries dropped are counted in
    ``omitted`` and ``fleet.services_omitted``."""
    out = dict(summary)
    if isinstance(out.get(key), list):
        kept = [
            item
            for item in out[key]
            if item.get("line", "") in output
            and all(s in output for s in item.get("samples", []))
            and item.get("trend_line", "") in output
        ]
        out["omitted"] = out.get("omitted", 0) + len(out[key]) - len(kept)
        out[key] = kept
    fleet = out.get("fleet")
    if isinstance(fleet, dict) and isinstance(fleet.get("services_ranked"), list):
        ranked = fleet["services_ranked"]
        kept_ranks = [r for r in ranked if isinstance(r, dict) and r.get("line", "") in output]
        out["fleet"] = {
            **fleet,
            "services_ranked": kept_ranks,
            "services_omitted": fleet.get("services_omitted", 0) + len(ranked) - len(kept_ranks),
        }
    return out


@dataclass(frozen=True)
class ToolDefinition:
    """One tool: what the model is told (name, description, args), how it runs, and what
    the rest of the flow needs to know about it.

    - ``kind``: ``evidence`` (its output is observed data a claim can be bound to, checked by
      the Gatekeeper) or ``knowledge`` (runbooks: what may happen, not what happens).
    - ``facts``: the summary's most telling lines, most important first, for the trace
      summary the Verifier reads (``summary_facts``); none falls back to the output's lines.
    - ``recordable``: a pack's ``recorded/invocations.jsonl`` may hold calls of it, replayed
      instead of running the backend.
    - ``summary_cut``: the summary kept to what a truncated output still shows (entries
      whose lines were cut off are dropped, so no fact outlives its text).
    - ``chart``: its summary's ``series`` can be drawn as charts on the evidence page.
    - ``purpose``: what it gives, in a few words, for the Planner's tool list (the prompt
      loader's ``{{ tool_catalogue }}``); without one the description stands in.
    """

    name: str
    description: str
    args: tuple[Arg, ...]
    run: Callable[[ToolCall], BackendOutput]
    empty_summary: Callable[[], dict[str, Any]]
    kind: Literal["evidence", "knowledge"] = "evidence"
    facts: Callable[[dict[str, Any]], list[str]] = no_facts
    recordable: bool = True
    summary_cut: Callable[[dict[str, Any], str], dict[str, Any]] = summary_as_is
    chart: bool = False
    purpose: str = ""

    def summary_facts(self, summary: dict[str, Any]) -> list[str]:
        """The summary's facts for the trace summary (``[]``: use the output's lines)."""
        return self.facts(summary)

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {a.name: a.schema() for a in self.args},
                    "required": [a.name for a in self.args if a.required],
                    "additionalProperties": False,
                },
            },
        }

    def clean(
        self, given: dict[str, Any], clamps: dict[str, dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The arguments checked and typed; numbers out of range clamped into ``clamps``."""
        clamps = clamps if clamps is not None else {}
        known = {a.name: a for a in self.args}
        unknown = sorted(k for k in given if k not in known)
        if unknown:
            names = ", ".join(repr(k) for k in unknown)
            raise ToolFailure(
                f"unknown argument(s) {names} for {self.name}; "
                f"allowed arguments: {', '.join(known)}"
            )
        cleaned: dict[str, Any] = {}
        for arg in self.args:
            value = given.get(arg.name)
            if value is not None:
                value = arg.clean(value, self.name, clamps)
            if value is None:
                if arg.required:
                    raise ToolFailure(
                        f"argument {arg.name!r} of {self.name} is required ({arg.description})"
                    )
                continue
            cleaned[arg.name] = value
        return cleaned
