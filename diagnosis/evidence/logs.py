"""query_logs: log lines from pack files or Loki, clustered into templates with drain3.

The file backend streams every file in blocks of whole lines (memory does not grow with
the file); each matching line lands in a template cluster that keeps counts for the window
and the baseline, first/last seen and a few verbatim sample lines.

``service`` is a service name, or ``/regex/`` for every service whose whole name the
expression matches (on Loki a ``service=~`` stream selector). Without a service, or with a
selector, the query is fleet-wide: the templates of every service are ranked together
(new or surging errors first, each with its service), in one pass over the files or one
query per range on Loki.

Summary keys (``BackendOutput.summary``):

- ``window``, ``baseline``: the two ranges compared, RFC 3339 ``start``/``end``.
- ``total_window``, ``total_baseline``: matching lines in each range.
- ``templates``: the shown templates, most unusual first, each with ``template``,
  ``service``, ``level``, ``count_window``, ``count_baseline``, ``first_seen``,
  ``last_seen``, ``is_new``, ``surge_ratio``, ``line`` (its output line) and ``samples``.
- ``omitted``: templates ranked below the shown ones.
- ``fleet`` (fleet-wide queries with data only): ``services`` (services with a matching
  line), ``lines_window``, ``lines_baseline``, ``templates`` (all templates),
  ``new_or_surging`` (templates new in the window or surging, see ``template_surging``),
  ``new_or_surging_services`` (services with such a template), ``line`` (the output's
  ``fleet:`` totals line), ``services_ranked``: up to ``MAX_TEMPLATES_SHOWN`` of those
  services, most unusual first, each with ``service``, ``new_or_surging``,
  ``lines_window``, ``lines_baseline`` and ``line``, and ``services_omitted`` (the rest).
  The names follow ``query_metrics``' fleet summary.
  On Loki past its line limit, ``lines_window``/``lines_baseline`` are Loki's exact counts
  while services and per-service figures come from the lines it returned (lower bounds).

Big unfiltered file scans are counted by masked line, in parallel, by ``logscan`` (same
result as the line-by-line scan here).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

import httpx
from drain3.drain import Drain

from diagnosis.evidence.common import (
    BackendOutput,
    Deadline,
    QueryWindow,
    ToolFailure,
    ToolTimeout,
    num_format,
    num_value,
)
from diagnosis.evidence.formats import (
    LogRecord,
    jsonl_line_parse,
    level_normalise,
    log_time_parse,
    plain_line_parse,
)
from diagnosis.evidence.timeutil import time_format, time_from_unix

DEFAULT_SAMPLE_LIMIT = 3
MAX_SAMPLE_LIMIT = 20
MAX_TEMPLATES_SHOWN = 10
MAX_CLUSTERS = 5000
MAX_SAMPLE_CHARS = 400
MASK_CACHE_SIZE = 50_000
RAW_CACHE_SIZE = 4096  # small: it only pays off for messages that repeat verbatim
SHAPE_CACHE_SIZE = 20_000
READ_BLOCK_BYTES = 1 << 16
LOKI_MAX_LINES = 5000
# A template surges when its window rate is this many times its baseline rate, and the
# window count lies this many standard deviations above what an unchanged rate gives.
SURGE_FACTOR = 2.0
SURGE_Z = 3.0
LEVEL_WEIGHT = {"FATAL": 3.0, "CRITICAL": 3.0, "ERROR": 3.0, "WARN": 2.0}
LEVEL_ALIASES = {
    "WARN": ("warn", "warning"),
    "ERROR": ("error", "err"),
    "CRITICAL": ("critical", "crit"),
    "FATAL": ("fatal", "panic", "emerg"),
    "INFO": ("info",),
    "DEBUG": ("debug", "dbg"),
}

_MaskGuard = Callable[[str], bool] | None
# (pattern, placeholder, cheap guard that must hold for the pattern to possibly match)
_MASKS: tuple[tuple[re.Pattern[str], str, _MaskGuard], ...] = (
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<UUID>",
        lambda m: m.count("-") >= 4,
    ),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>", lambda m: "." in m),
    (
        re.compile(
            r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{12,}\b"
        ),
        "<HEX>",
        None,
    ),
    # Ids such as O26030277937 or pod-h466w: a word with a run of three or more digits.
    (re.compile(r"\b[A-Za-z](?=[\w-]*\d{3})[\w-]*"), "<ID>", None),
    (re.compile(r"(?<![A-Za-z0-9])[-+]?\d+(?:[.,]\d+)*"), "<NUM>", None),
)
_DIGIT = re.compile(r"\d")


def message_mask(message: str) -> str:
    """Replace ids, addresses and numbers so lines differing only in them share a template."""
    if not _DIGIT.search(message):
        return message
    for pattern, placeholder, guard in _MASKS:
        if guard is None or guard(message):
            message = pattern.sub(placeholder, message)
    return message


_Piece = str | tuple[int, int]


def _mask_pieces(text: str) -> list[_Piece]:
    """``message_mask(text)`` as placeholders and the (start, end) slices of text that remain.

    Each pattern can be run on the remaining slices one by one: no pattern matches a
    placeholder's characters, and ``<``/``>`` look like the string's edges to ``\\b`` and to
    the lookarounds.
    """
    pieces: list[_Piece] = [(0, len(text))]
    if not _DIGIT.search(text):
        return pieces
    for pattern, placeholder, _guard in _MASKS:
        masked: list[_Piece] = []
        for piece in pieces:
            if isinstance(piece, str):
                masked.append(piece)
                continue
            start, end = piece
            pos = start
            for match in pattern.finditer(text[start:end]):
                if start + match.start() > pos:
                    masked.append((pos, start + match.start()))
                masked.append(placeholder)
                pos = start + match.end()
            if pos < end:
                masked.append((pos, end))
        pieces = masked
    return pieces


_ONE_DIGIT = bytes.maketrans(b"0123456789", b"1111111111")
# The masked text, or a %-template, what fills it from the message, and the offsets of the
# message's characters it takes (None when it masks the message itself).
_Recipe = str | tuple[str, Callable[[str], Any], tuple[int, ...] | None]


class MessageMasker:
    """``message_mask`` with a cache keyed by the message's shape.

    Every pattern treats the ASCII digits alike except through the literal ``0x``, so two
    ASCII messages without ``0x`` that differ only in their digits are masked at the same
    places. The shape (each digit written as ``1``) keys a recipe: the masked text itself
    when no digit survives masking, else a %-template taking the surviving digits from
    the message. Lines that differ only in ids and numbers then cost a translate and a
    dict lookup instead of five regular-expression passes.
    """

    def __init__(self) -> None:
        self.recipes: dict[bytes, _Recipe] = {}

    def mask(self, message: str) -> str:
        if "0x" in message or not message.isascii():
            return message_mask(message)
        recipe = self.recipe(message.encode("ascii").translate(_ONE_DIGIT))
        if isinstance(recipe, str):
            return recipe
        return recipe[0] % recipe[1](message)

    def recipe(self, shape: bytes) -> _Recipe:
        """How to mask ASCII messages without ``0x`` of this shape (digits written as 1)."""
        recipe = self.recipes.get(shape)
        if recipe is None:
            recipe = _recipe_learn(shape.decode("ascii"))
            if len(self.recipes) >= SHAPE_CACHE_SIZE:
                self.recipes.clear()
            self.recipes[shape] = recipe
        return recipe


def _recipe_learn(shape: str) -> _Recipe:
    masked = message_mask(shape)
    if "1" not in masked:
        return masked
    parts = []
    positions = []
    for piece in _mask_pieces(shape):
        if isinstance(piece, str):
            parts.append(piece)
            continue
        for i in range(*piece):
            if shape[i] == "1":
                parts.append("%s")
                positions.append(i)
            else:
                parts.append("%%" if shape[i] == "%" else shape[i])
    template, pick = "".join(parts), itemgetter(*positions)
    if template % pick(shape) == masked:
        return template, pick, tuple(positions)
    # Cannot happen while the argument in _mask_pieces holds; if it did, stay right.
    return "%s", message_mask, None


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


@dataclass(slots=True)
class TemplateStats:
    service: str
    level: str
    cluster_id: int
    count_window: int = 0
    count_baseline: int = 0
    first_seen: float = math.inf
    last_seen: float = -math.inf
    samples: list[str] = field(default_factory=list)
    baseline_samples: list[str] = field(default_factory=list)


class LogClusterer:
    """Counts matching records per (service, level, template) for the window and the baseline."""

    def __init__(self, *, window: QueryWindow, limit: int) -> None:
        self.window_start = window.start.timestamp()
        self.window_end = window.end.timestamp()
        self.baseline_start = window.baseline_start.timestamp()
        self.limit = limit
        self.drain = Drain(depth=4, sim_th=0.4, max_children=100)
        self.masker = MessageMasker()
        self.mask_cache: dict[str, int | None] = {}
        self.raw_cache: dict[str, int | None] = {}
        self.stats: dict[tuple[str, str, int], TemplateStats] = {}
        # Lines beyond MAX_CLUSTERS templates, by (in the window, level, service); the totals
        # are summed from these and the templates' counts when asked for, not kept per line.
        self.unclustered_lines: Counter[tuple[bool, str, str]] = Counter()

    @property
    def total_window(self) -> int:
        clustered = sum(stats.count_window for stats in self.stats.values())
        return clustered + sum(n for (window, *_), n in self.unclustered_lines.items() if window)

    @property
    def total_baseline(self) -> int:
        clustered = sum(stats.count_baseline for stats in self.stats.values())
        unclustered = self.unclustered_lines.items()
        return clustered + sum(n for (window, *_), n in unclustered if not window)

    @property
    def levels_window(self) -> Counter[str]:
        levels: Counter[str] = Counter()
        for stats in self.stats.values():
            if stats.count_window:
                levels[stats.level or "-"] += stats.count_window
        for (in_window, level, _service), n in self.unclustered_lines.items():
            if in_window:
                levels[level or "-"] += n
        return levels

    @property
    def unclustered(self) -> int:
        return sum(self.unclustered_lines.values())

    def in_range(self, ts: float) -> bool:
        return self.baseline_start <= ts <= self.window_end

    def _cluster_id(self, message: str) -> int | None:
        """The cluster of a message not in the raw cache (which then remembers it)."""
        masked = self.masker.mask(message)
        found = self.mask_cache.get(masked, -1)
        if found == -1:
            found = self._cluster_id_masked(masked)
        if len(self.raw_cache) >= RAW_CACHE_SIZE:
            self.raw_cache.clear()
        self.raw_cache[message] = found
        return found

    def _cluster_id_masked(self, masked: str) -> int | None:
        """The cluster of a masked message not in the mask cache (which then remembers it)."""
        if len(self.drain.id_to_cluster) < MAX_CLUSTERS:
            cluster, _ = self.drain.add_log_message(masked)
            found: int | None = cluster.cluster_id
        else:
            match = self.drain.match(masked)
            found = match.cluster_id if match else None
        if len(self.mask_cache) >= MASK_CACHE_SIZE:
            self.mask_cache.clear()
        self.mask_cache[masked] = found
        return found

    def add(self, record: LogRecord) -> None:
        self.add_fields(
            record.ts, record.ts_text, record.service, record.level, record.message, record.sample
        )

    def add_fields(
        self,
        ts: float,
        ts_text: str,
        service: str,
        level: str,
        message: str,
        sample: str | None = None,
    ) -> None:
        """Count one record; ``sample`` None means the JSON-lines sample, built only if kept."""
        # Identical messages are common (retries, health checks): skip masking for them.
        cluster_id = self.raw_cache.get(message, -1)
        if cluster_id == -1:
            cluster_id = self._cluster_id(message)
        if cluster_id is None:
            self.unclustered_lines[ts >= self.window_start, level, service] += 1
            return
        key = (service, level, cluster_id)
        stats = self.stats.get(key)
        if stats is None:
            stats = self.stats[key] = TemplateStats(service, level, cluster_id)
        if ts < stats.first_seen:
            stats.first_seen = ts
        if ts > stats.last_seen:
            stats.last_seen = ts
        if ts >= self.window_start:
            stats.count_window += 1
            samples = stats.samples
        else:
            stats.count_baseline += 1
            samples = stats.baseline_samples
        if len(samples) < self.limit:
            if sample is None:
                sample = f"{ts_text} {service} {level or '-'} {message}"
            samples.append(_sample_text(sample))

    def template(self, cluster_id: int) -> str:
        cluster = self.drain.id_to_cluster.get(cluster_id)
        return cluster.get_template() if cluster else "<unknown>"


def _sample_text(sample: str) -> str:
    return sample if len(sample) <= MAX_SAMPLE_CHARS else sample[: MAX_SAMPLE_CHARS - 1] + "…"


def _minutes(seconds: float) -> float:
    return max(seconds / 60.0, 1.0 / 60.0)


def template_surging(*, count_window: int, count_baseline: int, window_share: float) -> bool:
    """Whether a template seen in the baseline is logged clearly more often in the window.

    Its rate in the window is at least ``SURGE_FACTOR`` times its baseline rate, and that is
    not chance: under an unchanged rate each of the template's lines falls in the window
    with probability ``window_share`` (the window's part of the whole time range), and the
    window's count lies ``SURGE_Z`` standard deviations or more above that expectation.
    """
    if count_baseline <= 0 or count_window <= 0 or not 0 < window_share < 1:
        return False
    rate_ratio = (count_window / window_share) / (count_baseline / (1 - window_share))
    if rate_ratio < SURGE_FACTOR:
        return False
    lines = count_window + count_baseline
    expected = lines * window_share
    spread = math.sqrt(lines * window_share * (1 - window_share))
    return (count_window - expected - 0.5) >= SURGE_Z * spread


def _fleet_summary(
    *,
    clusterer: LogClusterer,
    rows: list[tuple[float, float, bool, str, TemplateStats]],
    total_window: int,
    total_baseline: int,
    window_share: float,
) -> dict[str, Any]:
    """Totals over every service, and the services with new or surging templates, worst first."""
    per_service: dict[str, dict[str, Any]] = {}

    def entry(service: str) -> dict[str, Any]:
        found = per_service.get(service)
        if found is None:
            found = per_service[service] = {
                "service": service,
                "new_or_surging": 0,
                "lines_window": 0,
                "lines_baseline": 0,
                "score": -math.inf,
            }
        return found

    unusual = 0
    for score, _surge, is_new, _template, stats in rows:
        item = entry(stats.service)
        item["lines_window"] += stats.count_window
        item["lines_baseline"] += stats.count_baseline
        if is_new or template_surging(
            count_window=stats.count_window,
            count_baseline=stats.count_baseline,
            window_share=window_share,
        ):
            unusual += 1
            item["new_or_surging"] += 1
            item["score"] = max(item["score"], score)
    for (in_window, _level, service), n in clusterer.unclustered_lines.items():
        entry(service)["lines_" + ("window" if in_window else "baseline")] += n
    services = len(per_service)
    line = (
        f"fleet: {services} services, {total_window} lines in the window, "
        f"{total_baseline} in the baseline, {unusual} new or surging templates"
    )
    suspects = sorted(
        (item for item in per_service.values() if item["new_or_surging"]),
        key=lambda item: (-item["score"], -item["lines_window"], item["service"]),
    )
    top = []
    for item in suspects[:MAX_TEMPLATES_SHOWN]:
        top.append(
            {
                "service": item["service"],
                "new_or_surging": item["new_or_surging"],
                "lines_window": item["lines_window"],
                "lines_baseline": item["lines_baseline"],
                "line": (
                    f"fleet service {item['service'] or '-'}: {item['new_or_surging']} new or "
                    f"surging templates, {item['lines_window']} lines in the window, "
                    f"{item['lines_baseline']} in the baseline"
                ),
            }
        )
    return {
        "services": services,
        "lines_window": total_window,
        "lines_baseline": total_baseline,
        "templates": len(rows),
        "new_or_surging": unusual,
        "new_or_surging_services": len(suspects),
        "line": line,
        "services_ranked": top,
        "services_omitted": len(suspects) - len(top),
    }


def fleet_omitted_line(omitted: int) -> str:
    return f"fleet: {omitted} more services with new or surging templates omitted"


def logs_render(
    *,
    clusterer: LogClusterer,
    window: QueryWindow,
    log_filter: LogFilter,
    notes: Iterable[str] = (),
    total_window: int | None = None,
    total_baseline: int | None = None,
) -> BackendOutput:
    """The report; ``total_window``/``total_baseline`` replace the clustered lines' totals.

    A backend that knows more lines matched than it clustered (Loki's line limit) passes
    the exact totals; the per-level split of the window is then left out, since it covers
    only the clustered lines.
    """
    counted_window = clusterer.total_window
    if total_window is None:
        total_window = counted_window
    if total_baseline is None:
        total_baseline = clusterer.total_baseline
    window_minutes = _minutes(clusterer.window_end - clusterer.window_start)
    baseline_minutes = _minutes(clusterer.window_start - clusterer.baseline_start)
    rows = []
    for stats in clusterer.stats.values():
        surge = ((stats.count_window + 1) / window_minutes) / (
            (stats.count_baseline + 1) / baseline_minutes
        )
        is_new = stats.count_baseline == 0 and stats.count_window > 0
        score = LEVEL_WEIGHT.get(stats.level, 1.0) * math.log(surge) + (2.0 if is_new else 0.0)
        template = clusterer.template(stats.cluster_id)
        rows.append((score, surge, is_new, template, stats))
    rows.sort(key=lambda r: (-r[0], -r[4].count_window, r[4].service, r[3]))
    shown = rows[:MAX_TEMPLATES_SHOWN]
    omitted = len(rows) - len(shown)
    levels = ""
    if total_window == counted_window:
        levels = ", ".join(
            f"{lvl} {n}"
            for lvl, n in sorted(clusterer.levels_window.items(), key=lambda i: (-i[1], i[0]))
        )
    lines = [f"query_logs {log_filter.describe()}", window.describe()]
    lines.extend(notes)
    totals = (
        f"totals: {total_window} lines in the window"
        + (f" ({levels})" if levels else "")
        + f", {total_baseline} lines in the baseline, {len(rows)} templates"
    )
    lines.append(totals)
    if clusterer.unclustered:
        lines.append(
            f"{clusterer.unclustered} lines beyond {MAX_CLUSTERS} templates "
            "were counted but not clustered"
        )
    summary: dict[str, Any] = {
        "window": window.as_dict(),
        "baseline": window.baseline_dict(),
        "total_window": total_window,
        "total_baseline": total_baseline,
        "templates": [],
        "omitted": omitted,
    }
    if total_window == 0 and total_baseline == 0:
        lines.append("no data: no log lines matched in the window or the baseline")
        return BackendOutput(status="no_data", output="\n".join(lines), summary=summary)
    if log_filter.fleet:
        fleet = _fleet_summary(
            clusterer=clusterer,
            rows=rows,
            total_window=total_window,
            total_baseline=total_baseline,
            window_share=window_minutes / (window_minutes + baseline_minutes),
        )
        lines.append(fleet["line"])
        lines.extend(entry["line"] for entry in fleet["services_ranked"])
        if fleet["services_omitted"]:
            lines.append(fleet_omitted_line(fleet["services_omitted"]))
        summary["fleet"] = fleet
    if total_window == 0:
        lines.append("no log lines matched in the window (only in the baseline)")
    for _score, surge, is_new, template, stats in shown:
        head = f'{stats.service} {stats.level or "-"} template "{template}": '
        facts = [f"{stats.count_window} in window", f"{stats.count_baseline} in baseline"]
        if is_new:
            facts.append("NEW (absent from the baseline)")
        facts.append(f"surge {num_format(surge)}x")
        facts.append(f"first seen {time_format(time_from_unix(stats.first_seen))}")
        facts.append(f"last seen {time_format(time_from_unix(stats.last_seen))}")
        line = head + ", ".join(facts)
        samples = stats.samples or stats.baseline_samples
        lines.append(line)
        lines.extend(f"  sample: {s}" for s in samples)
        summary["templates"].append(
            {
                "template": template,
                "service": stats.service,
                "level": stats.level,
                "count_window": stats.count_window,
                "count_baseline": stats.count_baseline,
                "first_seen": time_format(time_from_unix(stats.first_seen)),
                "last_seen": time_format(time_from_unix(stats.last_seen)),
                "is_new": is_new,
                "surge_ratio": num_value(surge) or 0.0,
                "line": line,
                "samples": list(samples),
            }
        )
    if omitted:
        lines.append(f"{omitted} more templates omitted (lower rank)")
    status = "ok" if total_window else "no_data"
    return BackendOutput(status=status, output="\n".join(lines), summary=summary)


# --- file backend -----------------------------------------------------------


# A string character json.loads takes as it is: not a quote, a backslash or a control.
_C = r"[ !#-\[\]-\U0010ffff]"
_JSON_NUMBER = r"-?(?:0|[1-9][0-9]{0,50})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_UTC_STAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z"
# The layout json.dumps writes: ts, service, level and message first, then flat fields.
# A line that matches is valid JSON whose fields json.loads would return verbatim (no
# escapes, no control characters, no repeated key among the four), so the fields are
# taken from the match; any other line is parsed by jsonl_line_parse. The stamp is UTC
# with fixed-width fields, so its first 19 characters sort as the time does.
_JSONL_COMMON = re.compile(
    rf'^\{{"ts": "({_UTC_STAMP})", "service": "({_C}+)", "level": "({_C}*)", "message": "({_C}*)"'
    rf'(?:, "(?!(?:ts|service|level|message)"){_C}*": (?:"{_C}*"|true|false|null|{_JSON_NUMBER}))*'
    r"\}\n",
    re.MULTILINE,
)


def _text_blocks(path: Path, deadline: Deadline) -> Iterator[str]:
    r"""The file as text, in blocks of whole lines that each end with a newline.

    Decoded and split as ``open(path, encoding="utf-8", errors="replace")`` would: ``\r\n``
    and a lone ``\r`` end a line too. A block never splits a line (nor a ``\r\n``), and
    ``\n`` never occurs inside a multi-byte character, so decoding block by block gives
    the same text as decoding the whole file.
    """
    pending: list[bytes] = []
    with path.open("rb") as handle:
        while True:
            deadline.check()
            chunk = handle.read(READ_BLOCK_BYTES)
            if not chunk:
                break
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                pending.append(chunk)
                continue
            if pending:
                data: bytes | memoryview = b"".join([*pending, chunk[:cut]])
            else:
                data = memoryview(chunk)[:cut]
            pending = [chunk[cut:]] if cut < len(chunk) else []
            yield _text_decode(data)
    if pending:
        yield _text_decode(b"".join(pending) + b"\n")


def _text_decode(data: bytes | memoryview) -> str:
    text = str(data, "utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _second_floor(moment: datetime) -> str | None:
    """The time as the first 19 characters of an RFC 3339 UTC stamp, when they sort as times."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") if 1000 <= moment.year <= 9999 else None


class _FileScan:
    """Feeds the records of pack files, in file order, to a clusterer."""

    def __init__(
        self, *, clusterer: LogClusterer, log_filter: LogFilter, window: QueryWindow
    ) -> None:
        self.clusterer = clusterer
        self.log_filter = log_filter
        # A stamp whose first 19 characters sort before the baseline's second (or after the
        # window's end second) is outside the range whatever its fraction: skip it unparsed.
        self.head_low = _second_floor(window.baseline_start) or ""
        self.head_high = _second_floor(window.end) or "\uffff"
        self.levels: dict[str, str] = {}

    def record(self, record: LogRecord) -> None:
        clusterer = self.clusterer
        if clusterer.in_range(record.ts) and self.log_filter.matches(record):
            clusterer.add(record)

    def plain_file(self, path: Path, deadline: Deadline) -> None:
        service = path.stem
        for text in _text_blocks(path, deadline):
            for line in text.split("\n"):
                if not line.strip():
                    continue
                try:
                    record = plain_line_parse(line, service=service)
                except ValueError:
                    continue
                self.record(record)

    def jsonl_file(self, path: Path, deadline: Deadline) -> None:
        needles = self.log_filter.raw_prefilter()
        for text in _text_blocks(path, deadline):
            if needles:
                text = _lines_with(text, needles)
            self._jsonl_block(text)

    def _jsonl_block(self, text: str) -> None:
        """Every line of ``text``: the common layout read from the match, others parsed."""
        rows = _JSONL_COMMON.findall(text)
        if len(rows) == text.count("\n"):  # each match is one whole line: all matched
            self._jsonl_common(rows)
            return
        rows = []
        pos = 0
        for match in _JSONL_COMMON.finditer(text):
            if match.start() != pos:  # lines in between: parse them in their turn
                self._jsonl_common(rows)
                rows = []
                self._jsonl_other(text[pos : match.start()])
            rows.append(match.groups())
            pos = match.end()
        self._jsonl_common(rows)
        if pos != len(text):
            self._jsonl_other(text[pos:])

    def _jsonl_common(self, rows: list[tuple[str, str, str, str]]) -> None:
        clusterer = self.clusterer
        add = clusterer.add_fields
        baseline_start, window_end = clusterer.baseline_start, clusterer.window_end
        head_low, head_high = self.head_low, self.head_high
        levels = self.levels
        fields_match = self.log_filter.fields_match if self.log_filter.selective else None
        fromisoformat = datetime.fromisoformat
        for ts_text, service, level_text, message in rows:
            head = ts_text[:19]
            if head < head_low or head > head_high:
                continue
            try:
                ts = fromisoformat(ts_text).timestamp()
            except ValueError:
                try:
                    ts = log_time_parse(ts_text)[0]
                except ValueError:
                    continue
            if not baseline_start <= ts <= window_end:
                continue
            level = levels.get(level_text)
            if level is None:
                if len(levels) >= 1000:
                    levels.clear()
                level = levels[level_text] = level_normalise(level_text)
            if fields_match is not None and not fields_match(service, level, message):
                continue
            add(ts, ts_text, service, level, message)

    def _jsonl_other(self, lines: str) -> None:
        needles = self.log_filter.raw_prefilter()
        for line in lines.split("\n"):
            if needles and not all(n in line for n in needles):
                continue
            if not line.strip():
                continue
            try:
                record = jsonl_line_parse(line)
            except ValueError:
                continue
            self.record(record)


def _lines_with(text: str, needles: list[str]) -> str:
    """The lines of ``text`` that hold every needle, found with str.find (each keeps its \\n)."""
    first, others = needles[0], needles[1:]
    kept = []
    found = text.find(first)
    while found >= 0:
        start = text.rfind("\n", 0, found) + 1
        end = text.index("\n", found) + 1
        line = text[start:end]
        if all(n in line for n in others):
            kept.append(line)
        found = text.find(first, end)
    return "".join(kept)


def logs_from_files(
    *,
    files: Iterable[Path],
    log_filter: LogFilter,
    window: QueryWindow,
    limit: int,
    deadline: Deadline,
) -> BackendOutput:
    files = list(files)
    if log_filter.text is None and log_filter.pattern is None:
        # Text and pattern filters are cut with str.find first: only count big unfiltered scans.
        from diagnosis.evidence import logscan

        if sum(path.stat().st_size for path in files) >= logscan.AGGREGATE_MIN_BYTES:
            counted = logscan.files_count(
                files=files, log_filter=log_filter, window=window, limit=limit, deadline=deadline
            )
            if counted is not None:
                return logs_render(clusterer=counted, window=window, log_filter=log_filter)
    clusterer = LogClusterer(window=window, limit=limit)
    scan = _FileScan(clusterer=clusterer, log_filter=log_filter, window=window)
    for path in sorted(files):
        if path.suffix != ".log":
            scan.jsonl_file(path, deadline)
        elif log_filter.service_allows(path.stem):
            scan.plain_file(path, deadline)
    return logs_render(clusterer=clusterer, window=window, log_filter=log_filter)


# --- Loki backend -----------------------------------------------------------


def _logql_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def logql_build(log_filter: LogFilter) -> str:
    """LogQL for the filter: stream selector, line filter, and a coarse level line filter.

    The level is matched in the line text (not as a label) because deployments differ in
    whether level is a stream label; each returned line's level is checked exactly afterwards.
    """
    if log_filter.service:
        selector = f"{{service={_logql_string(log_filter.service)}}}"
    elif log_filter.service_pattern is not None:
        selector = f"{{service=~{_logql_string(log_filter.service_pattern.pattern)}}}"
    else:
        selector = '{service=~".+"}'

    parts = [selector]
    if log_filter.text is not None:
        parts.append(f"|= {_logql_string(log_filter.text)}")
    if log_filter.pattern is not None:
        parts.append(f"|~ {_logql_string(log_filter.pattern.pattern)}")
    if log_filter.level:
        names = LEVEL_ALIASES.get(log_filter.level, (log_filter.level.lower(),))
        parts.append(f"|~ {_logql_string('(?i)(' + '|'.join(names) + ')')}")
    return " ".join(parts)


def _loki_record(stream: dict[str, str], ns: str, line: str) -> LogRecord:
    """A Loki entry as a log record: JSON lines and plain lines are read like pack files."""
    ts = int(ns) / 1e9
    service = (
        stream.get("service")
        or stream.get("service_name")
        or stream.get("app")
        or stream.get("job")
        or ""
    )
    stream_level = level_normalise(stream.get("level") or stream.get("detected_level") or "")
    text = line.rstrip("\r\n")
    ts_text = time_format(time_from_unix(ts))
    data: object = None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if isinstance(data, dict):
        message = data.get("message", data.get("msg"))
        if isinstance(message, str):
            level = level_normalise(data.get("level") or data.get("severity")) or stream_level
            line_service = data.get("service")
            service = line_service if isinstance(line_service, str) and line_service else service
            sample = f"{ts_text} {service} {level or '-'} {message}"
            return LogRecord(ts, ts_text, service, level, message, sample)
    try:
        parsed = plain_line_parse(text, service=service)
    except ValueError:
        return LogRecord(ts, ts_text, service, stream_level, text, f"{ts_text} {text}")
    return LogRecord(
        ts, parsed.ts_text, service, parsed.level or stream_level, parsed.message, text
    )


def _loki_headers(token_env: str, tenant: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    if token_env:
        token = os.environ.get(token_env, "")
        if not token:
            raise ToolFailure(f"the environment variable {token_env} (the Loki token) is empty")
        headers["Authorization"] = f"Bearer {token}"
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    return headers


def _loki_get(
    *,
    base_url: str,
    path: str,
    params: dict[str, str],
    headers: dict[str, str],
    deadline: Deadline,
) -> dict[str, Any]:
    """One GET of the Loki HTTP API; the ``data`` object of its JSON answer."""
    url = base_url.rstrip("/") + path
    try:
        response = httpx.get(
            url, params=params, headers=headers, timeout=max(deadline.remaining(), 0.05)
        )
    except httpx.TimeoutException as exc:
        raise ToolTimeout(
            f"Loki at {base_url} did not answer within {deadline.seconds:g}s"
        ) from exc
    except httpx.HTTPError as exc:
        raise ToolFailure(f"cannot reach Loki at {base_url}: {exc}") from exc
    if response.status_code != 200:
        raise ToolFailure(
            f"Loki rejected the query {params['query']!r} "
            f"(HTTP {response.status_code}): {response.text[:300].strip()}"
        )
    try:
        body = response.json()
    except ValueError:
        raise ToolFailure(f"Loki at {base_url} answered without JSON") from None
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, dict) else {}


def loki_query_range(
    *,
    base_url: str,
    headers: dict[str, str],
    logql: str,
    start: float,
    end: float,
    deadline: Deadline,
) -> tuple[list[LogRecord], bool]:
    """One ``/loki/api/v1/query_range`` call; the records and whether the line limit was hit."""
    params = {
        "query": logql,
        "start": str(int(start * 1e9)),
        "end": str(int(end * 1e9)),
        "limit": str(LOKI_MAX_LINES),
        "direction": "backward",
    }
    data = _loki_get(
        base_url=base_url,
        path="/loki/api/v1/query_range",
        params=params,
        headers=headers,
        deadline=deadline,
    )
    if data.get("resultType") != "streams":
        raise ToolFailure("Loki returned no streams result (expected resultType 'streams')")
    records = []
    for stream in data.get("result") or []:
        labels = stream.get("stream") or {}
        for value in stream.get("values") or []:
            ns, line = value[0], value[1]
            records.append(_loki_record(labels, ns, line))
    return records, len(records) >= LOKI_MAX_LINES


def _logql_duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def logql_count_build(logql: str, range_ms: int) -> str:
    """LogQL counting the lines ``logql`` matches in the ``range_ms`` up to the query time."""
    return f"sum(count_over_time({logql} [{_logql_duration(range_ms)}]))"


def loki_count(
    *,
    base_url: str,
    headers: dict[str, str],
    logql: str,
    start: float,
    end: float,
    deadline: Deadline,
) -> int:
    """The number of lines ``logql`` matches from ``start`` (inclusive) to ``end`` (exclusive).

    An instant ``/loki/api/v1/query`` of ``sum(count_over_time(...))``. Loki's range vector
    is ``(time - range, time]`` and LogQL ranges go down to milliseconds, so the query is
    evaluated 1 ms before ``end`` over the range's length: ``[start, end)`` exactly for
    stamps in whole milliseconds, the same split ``query_range`` makes.
    """
    range_ms = round((end - start) * 1000)
    query = logql_count_build(logql, range_ms)
    params = {"query": query, "time": str(round(end * 1e9) - 1_000_000)}
    data = _loki_get(
        base_url=base_url,
        path="/loki/api/v1/query",
        params=params,
        headers=headers,
        deadline=deadline,
    )
    if data.get("resultType") != "vector":
        raise ToolFailure("Loki returned no vector result (expected resultType 'vector')")
    total = 0.0
    for sample in data.get("result") or []:
        try:
            total += float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            raise ToolFailure(f"Loki returned an unreadable sample for {query!r}") from None
    if not math.isfinite(total) or total < 0:
        raise ToolFailure(f"Loki returned an unreadable count for {query!r}")
    return round(total)


def _loki_total(
    *,
    label: str,
    log_filter: LogFilter,
    fetched: int,
    counted: int,
    loki_total: int | None,
    failure: str,
    notes: list[str],
) -> int:
    """The total for one range after ``query_range`` hit its line limit there.

    ``fetched`` lines came back, ``counted`` of them passed the exact check; ``loki_total``
    is Loki's own count of the lines the LogQL matches (None when that query failed).
    """
    if loki_total is not None and loki_total <= fetched:
        return counted  # every line came back after all: the clustered count is exact
    if loki_total is not None and not log_filter.level:
        notes.append(
            f"Loki returned {fetched} of the {loki_total} matching lines for the {label}; "
            f"the {label} total is Loki's exact count (count_over_time), "
            "the template counts there come from the lines returned and are lower bounds"
        )
        return loki_total
    note = (
        f"Loki returned its limit of {LOKI_MAX_LINES} lines for the {label}; "
        "counts there are lower bounds"
    )
    if loki_total is not None:
        note += (
            f" (Loki counts {loki_total} lines matching the LogQL there, an upper bound: "
            "the level is matched in the line text)"
        )
    elif failure:
        note += f" (the count query failed: {failure})"
    notes.append(note)
    return counted


def logs_from_loki(
    *,
    base_url: str,
    token_env: str,
    tenant: str,
    log_filter: LogFilter,
    window: QueryWindow,
    limit: int,
    deadline: Deadline,
) -> BackendOutput:
    """Lines of each range from ``query_range``, clustered; exact totals from Loki when capped.

    ``query_range`` returns at most ``LOKI_MAX_LINES`` lines; when a range reaches that,
    its total comes from a ``count_over_time`` metric query instead (falling back to the
    lines returned, marked as lower bounds, when that query fails).
    """
    headers = _loki_headers(token_env, tenant)
    logql = logql_build(log_filter)
    clusterer = LogClusterer(window=window, limit=limit)
    notes = [f"LogQL: {logql}"]
    baseline_start, start, end = (
        window.baseline_start.timestamp(),
        window.start.timestamp(),
        window.end.timestamp(),
    )
    # (label, query_range start and end, count_over_time start and end): the window's
    # end is inclusive, so its count runs to 1 ms past it.
    ranges = (
        ("baseline", baseline_start, start - 1e-9, baseline_start, start),
        ("window", start, end + 1e-9, start, end + 1e-3),
    )
    # Ranges that hit the line limit: (label, count start and end, lines returned, counted).
    capped_ranges: list[tuple[str, float, float, int, int]] = []
    for label, range_start, range_end, count_start, count_end in ranges:
        records, capped = loki_query_range(
            base_url=base_url,
            headers=headers,
            logql=logql,
            start=range_start,
            end=range_end,
            deadline=deadline,
        )
        before = clusterer.total_window + clusterer.total_baseline
        records.sort(key=lambda r: r.ts)
        for record in records:
            if clusterer.in_range(record.ts) and log_filter.matches(record):
                clusterer.add(record)
        if capped:
            counted = clusterer.total_window + clusterer.total_baseline - before
            capped_ranges.append((label, count_start, count_end, len(records), counted))
    # Counted after both line queries, so a slow count cannot cost the window's lines.
    totals: dict[str, int] = {}
    for label, count_start, count_end, fetched, counted in capped_ranges:
        loki_total: int | None = None
        failure = ""
        try:
            loki_total = loki_count(
                base_url=base_url,
                headers=headers,
                logql=logql,
                start=count_start,
                end=count_end,
                deadline=deadline,
            )
        except (ToolFailure, ToolTimeout) as exc:
            failure = str(exc)
        totals[label] = _loki_total(
            label=label,
            log_filter=log_filter,
            fetched=fetched,
            counted=counted,
            loki_total=loki_total,
            failure=failure,
            notes=notes,
        )
    return logs_render(
        clusterer=clusterer,
        window=window,
        log_filter=log_filter,
        notes=notes,
        total_window=totals.get("window"),
        total_baseline=totals.get("baseline"),
    )


__all__ = [
    "DEFAULT_SAMPLE_LIMIT",
    "MAX_SAMPLE_LIMIT",
    "LogClusterer",
    "LogFilter",
    "log_time_parse",
    "logql_build",
    "logql_count_build",
    "logs_from_files",
    "logs_from_loki",
    "loki_count",
    "message_mask",
]
