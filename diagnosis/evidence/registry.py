"""The one tool registry: each evidence tool's name, description, JSON schema, argument
validation and backend, and ``tool_invoke`` which persists every call as a ToolInvocation.

``tool_invoke`` never raises for what a model sends: unknown tools, bad arguments, broken
backends and timeouts all become an invocation row with status ``error`` or ``timeout``
and a message the model can act on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from diagnosis.evidence.common import (
    DEFAULT_WINDOW,
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    ToolTimeout,
    clamp_record,
    clamps_apply,
)
from diagnosis.evidence.knowledge import DEFAULT_K, MAX_K, knowledge_lookup
from diagnosis.evidence.logs import (
    DEFAULT_SAMPLE_LIMIT,
    MAX_SAMPLE_LIMIT,
    LogFilter,
    logs_from_files,
    logs_from_loki,
)
from diagnosis.evidence.metrics import metrics_query
from diagnosis.evidence.packs import PackError, ScenarioPack, pack_header_load
from diagnosis.evidence.recorded import recorded_find
from diagnosis.evidence.timeutil import TimeFormatError, duration_parse, time_format, time_parse
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from diagnosis.storable import nul_free

logger = logging.getLogger(__name__)

TOOL_NAMES = ("query_metrics", "query_logs", "lookup_knowledge")
MAX_RANGE = timedelta(days=31)
TRUNCATION_MARKER = "\n[output truncated: {shown} of {total} characters shown]"


@dataclass(frozen=True)
class ToolResult:
    invocation_id: int
    trace_ref: str
    tool_name: str
    status: str
    output: str
    summary: dict[str, Any]


# --- arguments --------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # string | integer | labels | time | duration
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


_TIME_ARGS = (
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
        start: datetime | None = self.args.get("start")
        end: datetime | None = self.args.get("end")
        if start is None and end is None:
            start, end = default_start, default_end
        elif start is None:
            assert end is not None
            start = end - length
        elif end is None:
            end = default_end if default_end > start else start + length
        assert start is not None and end is not None
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


# --- backends ---------------------------------------------------------------


def _no_files(call: ToolCall, what: str) -> ToolFailure:
    return ToolFailure(
        f"nothing was recorded for this call: scenario pack {call.pack.id} has no {what} and no "
        f"recorded invocation of {call.tool_name} with these arguments"
    )


def _source_missing(call: ToolCall, source: str, empty: dict[str, Any]) -> BackendOutput | None:
    """``no_data`` when the environment has no ``source`` ("metrics" or "logs") at all.

    Absent data is a gap, not a failure: the summary marks it with ``missing_source``
    so an answer can name the missing source once. A replay pack (with ``recorded/``)
    that lacks the call stays an error: something was asked that was not recorded.
    """
    env = call.environment
    if env.kind == Environment.Kind.LIVE:
        configured = env.prometheus_url if source == "metrics" else env.loki_url
        if configured:
            return None
    else:
        paths = call.pack.paths
        if (paths.metrics if source == "metrics" else paths.logs) or paths.recorded:
            return None
    reason = f"no {source} source configured for environment {env.slug}"
    described = " ".join(f"{k}={v}" for k, v in call.given.items() if v is not None)
    return BackendOutput(
        status=ToolInvocation.Status.NO_DATA,
        output=f"{call.tool_name} {described}".rstrip() + f"\nno data: {reason}",
        summary={**empty, "missing_source": source, "reason": reason},
    )


def _run_query_metrics(call: ToolCall) -> BackendOutput:
    missing = _source_missing(call, "metrics", _metrics_empty())
    if missing is not None:
        return missing
    env = call.environment
    live = env.kind == Environment.Kind.LIVE
    if not live and not call.pack.paths.metrics:
        raise _no_files(call, "metrics files")
    return metrics_query(
        service=call.args.get("service"),
        metric=call.args.get("metric"),
        labels=call.args.get("labels") or {},
        window=call.window(),
        step=call.args.get("step"),
        deadline=call.deadline,
        files=None if live else call.pack.paths.metrics,
        prometheus_url=env.prometheus_url if live else None,
        prometheus_token_env=env.prometheus_token_env if live else "",
        clamps=call.clamps,
    )


def _run_query_logs(call: ToolCall) -> BackendOutput:
    log_filter = LogFilter.build(
        service=call.args.get("service"), query=call.args.get("query"), level=call.args.get("level")
    )
    limit = call.args.get("limit", DEFAULT_SAMPLE_LIMIT)
    window = call.window()
    missing = _source_missing(call, "logs", _logs_empty())
    if missing is not None:
        return missing
    env = call.environment
    if env.kind == Environment.Kind.LIVE:
        return logs_from_loki(
            base_url=env.loki_url,
            token_env=env.loki_token_env,
            tenant=env.loki_tenant,
            log_filter=log_filter,
            window=window,
            limit=limit,
            deadline=call.deadline,
        )
    if not call.pack.paths.logs:
        raise _no_files(call, "log files")
    return logs_from_files(
        files=call.pack.paths.logs,
        log_filter=log_filter,
        window=window,
        limit=limit,
        deadline=call.deadline,
    )


def _run_lookup_knowledge(call: ToolCall) -> BackendOutput:
    return knowledge_lookup(
        environment=call.environment, query=call.args["query"], k=call.args.get("k", DEFAULT_K)
    )


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    args: tuple[Arg, ...]
    run: Callable[[ToolCall], BackendOutput]
    empty_summary: Callable[[], dict[str, Any]]
    replayable: bool = True

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


def _metrics_empty() -> dict[str, Any]:
    return {"window": None, "baseline": None, "series": [], "omitted": 0}


def _logs_empty() -> dict[str, Any]:
    return {
        "window": None,
        "baseline": None,
        "total_window": 0,
        "total_baseline": 0,
        "templates": [],
        "omitted": 0,
    }


def _knowledge_empty() -> dict[str, Any]:
    return {"query": "", "chunks": []}


TOOLS: dict[str, ToolDefinition] = {
    "query_metrics": ToolDefinition(
        name="query_metrics",
        description=(
            "Metrics compared between the query window and the baseline right before it. "
            "Without a service it ranks the whole environment in one query: a totals line "
            "(services, series, anomalous), the most anomalous services, and the most anomalous "
            "series (at most 3 per service) - start there on a large fleet, then drill into "
            "the top suspects with service=... . One line per series: direction (up/down since "
            "the change point, or no sustained shift), level vs baseline median, ratio, anomaly "
            "score, then window max/min/mean; bytes and seconds also in human units; then a "
            "short trend line. Counters (*_total, *_count, *_sum, *_bucket) are shown as "
            "per-second rates. Out-of-range arguments are clamped and the output says so."
        ),
        args=(
            Arg(
                "service",
                "string",
                "Service name (the 'service' label), e.g. payment-service. Omit to rank "
                "across all services of the environment.",
            ),
            Arg(
                "metric",
                "string",
                'Metric name or selector, e.g. hikaricp_connections_active{pool="main"}; '
                "any PromQL on a live Prometheus. Omit to get all metrics (of the service, "
                "or of every service).",
            ),
            Arg("labels", "labels", 'Extra label matchers, e.g. {"pool": "main"}.'),
            *_TIME_ARGS,
            Arg("step", "duration", "Resolution such as 60s or 5m (default 60s)."),
        ),
        run=_run_query_metrics,
        empty_summary=_metrics_empty,
    ),
    "query_logs": ToolDefinition(
        name="query_logs",
        description=(
            "Log lines of the window clustered into templates, each with its count in the "
            "window and in the baseline before it, NEW when absent from the baseline, surge "
            "ratio, first/last seen, level and service, and a few verbatim sample lines. "
            "Templates are ranked by how unusual they are (new or surging errors first). "
            "Without a service (or with service=/regex/) it ranks the templates of every "
            "service together in one query, with a 'fleet:' totals line (services, lines, new "
            "or surging templates) and the services with new or surging templates, worst "
            "first - start there on a large fleet, then drill into the top suspects."
        ),
        args=(
            Arg(
                "service",
                "string",
                "Service name, e.g. payment-service, or /regex/ for every service whose whole "
                "name matches. Omit to rank across all services of the environment.",
            ),
            Arg(
                "query",
                "string",
                "Text the message must contain; /regex/ for a regular expression.",
            ),
            Arg("level", "string", "Log level: ERROR, WARN, INFO, DEBUG…"),
            *_TIME_ARGS,
            Arg(
                "limit",
                "integer",
                f"Sample lines per template (default {DEFAULT_SAMPLE_LIMIT}; "
                f"larger values are clamped to {MAX_SAMPLE_LIMIT}).",
                minimum=1,
                maximum=MAX_SAMPLE_LIMIT,
            ),
        ),
        run=_run_query_logs,
        empty_summary=_logs_empty,
    ),
    "lookup_knowledge": ToolDefinition(
        name="lookup_knowledge",
        description=(
            "Search the runbooks and past-incident notes (Chinese or English). Each result "
            "starts with '=== <chunk_id> | <title> / <section> ===' followed by the section "
            "text; cite a chunk by its chunk_id. Runbooks describe what may happen, not what "
            "is happening now."
        ),
        args=(
            Arg(
                "query",
                "string",
                "What to look for, e.g. 连接池耗尽 or connection pool exhausted.",
                required=True,
            ),
            Arg(
                "k",
                "integer",
                f"How many chunks to return (default {DEFAULT_K}).",
                minimum=1,
                maximum=MAX_K,
            ),
        ),
        run=_run_lookup_knowledge,
        empty_summary=_knowledge_empty,
    ),
}
assert tuple(TOOLS) == TOOL_NAMES


def tool_specs() -> list[dict[str, Any]]:
    """The tools for OpenAI Chat Completions ``tools=``."""
    return [TOOLS[name].spec() for name in TOOL_NAMES]


# --- invocation -------------------------------------------------------------


def output_bound(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut ``text`` at a line boundary so that it and the marker fit in ``max_chars``."""
    if len(text) <= max_chars:
        return text, False
    marker_room = len(TRUNCATION_MARKER.format(shown=max_chars, total=len(text)))
    cut = max(max_chars - marker_room, 0)
    newline = text.rfind("\n", 0, cut)
    if newline > cut // 2:
        cut = newline
    return text[:cut] + TRUNCATION_MARKER.format(shown=cut, total=len(text)), True


def summary_filter(summary: dict[str, Any], output: str) -> dict[str, Any]:
    """Keep only summary entries whose lines still occur in the (possibly truncated) output."""
    out = dict(summary)
    for key in ("series", "templates"):
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
    if isinstance(out.get("chunks"), list):
        out["chunks"] = [
            c
            for c in out["chunks"]
            if f"=== {c.get('chunk_id')} |" in output and c.get("text", "") in output
        ]
    return out


def _arguments_read(arguments: object) -> dict[str, Any]:
    if isinstance(arguments, str):
        # Function-calling APIs deliver arguments as a JSON string; accept that form too.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolFailure(
                f"arguments are not valid JSON ({exc.msg}); send a JSON object"
            ) from None
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise ToolFailure(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def _invocation_save(
    *,
    session: DiagnosisSession,
    attempt: int,
    tool_name: str,
    arguments: dict[str, Any],
    status: str,
    output: str,
    output_size: int,
    truncated: bool,
    summary: dict[str, Any],
    error: str,
    started_at: datetime,
    duration_ms: int,
) -> ToolInvocation:
    for retry in range(5):
        try:
            with transaction.atomic():
                # Lock the session row so concurrent calls of one session get distinct sequences.
                DiagnosisSession.objects.select_for_update().filter(pk=session.pk).exists()
                last = ToolInvocation.objects.filter(session=session).aggregate(m=Max("sequence"))[
                    "m"
                ]
                sequence = (last or 0) + 1
                return ToolInvocation.objects.create(
                    session=session,
                    attempt=attempt,
                    sequence=sequence,
                    trace_ref=f"trace-{sequence}",
                    tool_name=tool_name[:50],
                    arguments=arguments,
                    status=status,
                    output=output,
                    output_size=output_size,
                    truncated=truncated,
                    summary=summary,
                    error=error,
                    started_at=started_at,
                    duration_ms=duration_ms,
                )
        except IntegrityError:
            if retry == 4:
                raise
    raise AssertionError("unreachable")


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))


def tool_invoke(
    *, session: DiagnosisSession, attempt: int, tool_name: str, arguments: object
) -> ToolResult:
    """Run one tool call and persist it as a ToolInvocation before returning its result."""
    started_at = timezone.now()
    started = time.monotonic()
    timeout_seconds = float(settings.TOOL_TIMEOUT_SECONDS)
    deadline = Deadline.after(timeout_seconds)
    stored_args: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
    definition = TOOLS.get(tool_name)
    error = ""
    try:
        if definition is None:
            raise ToolFailure(
                f"unknown tool {tool_name!r}; available tools: {', '.join(TOOL_NAMES)}"
            )
        given = _arguments_read(arguments)
        stored_args = given
        clamps: dict[str, dict[str, Any]] = {}
        cleaned = definition.clean(given, clamps)
        call = ToolCall(
            session=session,
            environment=session.environment,
            tool_name=tool_name,
            given=given,
            args=cleaned,
            deadline=deadline,
            clamps=clamps,
        )
        replayed = _replay(call, definition)
        result = replayed or clamps_apply(definition.run(call), call.clamps)
        deadline.check()
        status, output, summary = result.status, result.output, result.summary
        if status in {ToolInvocation.Status.ERROR, ToolInvocation.Status.TIMEOUT}:
            error = output
    except ToolFailure as exc:
        error = str(exc)
        status, output, summary = ToolInvocation.Status.ERROR, f"error: {error}", {"error": error}
    except ToolTimeout as exc:
        error = f"{tool_name} timed out after {timeout_seconds:g}s: {exc}"
        status, output, summary = (
            ToolInvocation.Status.TIMEOUT,
            f"timeout: {error}",
            {"error": error},
        )
    except Exception as exc:  # a backend bug must not end the diagnosis
        logger.exception("tool %s failed", tool_name)
        error = f"the {tool_name} backend failed: {type(exc).__name__}: {exc}"
        status, output, summary = ToolInvocation.Status.ERROR, f"error: {error}", {"error": error}
    output, error, summary = nul_free(output), nul_free(error), nul_free(summary)
    bounded, truncated = output_bound(output, int(settings.TOOL_OUTPUT_MAX_CHARS))
    if truncated and "error" not in summary:
        summary = summary_filter(summary, bounded)
    invocation = _invocation_save(
        session=session,
        attempt=attempt,
        tool_name=nul_free(tool_name if isinstance(tool_name, str) else repr(tool_name)),
        arguments=nul_free(_json_safe(stored_args)),
        status=status,
        output=bounded,
        output_size=len(output),
        truncated=truncated,
        summary=_json_safe(summary),
        error=error,
        started_at=started_at,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    return ToolResult(
        invocation_id=invocation.pk,
        trace_ref=invocation.trace_ref,
        tool_name=invocation.tool_name,
        status=invocation.status,
        output=invocation.output,
        summary=invocation.summary,
    )


def _replay(call: ToolCall, definition: ToolDefinition) -> BackendOutput | None:
    env = call.environment
    if env.kind != Environment.Kind.SCENARIO:
        return None
    recorded_path: Path | None = call.pack.paths.recorded
    if recorded_path is None:
        return None
    found = recorded_find(path=recorded_path, tool_name=call.tool_name, arguments=call.given)
    if found is None:
        return None
    summary = found.summary if found.summary is not None else definition.empty_summary()
    summary = {**summary, "recorded": True}
    if found.status in {"error", "timeout"}:
        summary.setdefault("error", found.output)
    return BackendOutput(status=found.status, output=found.output, summary=summary)
