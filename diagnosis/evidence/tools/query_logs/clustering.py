"""Clustering matching log lines into drain3 templates, with per-template counts in the
window and the baseline, first/last seen and a few sample lines."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from drain3.drain import Drain

from diagnosis.evidence.common import (
    QueryWindow,
)
from diagnosis.evidence.formats import (
    LogRecord,
)
from diagnosis.evidence.tools.query_logs.masking import MessageMasker

DEFAULT_SAMPLE_LIMIT = 3
MAX_SAMPLE_LIMIT = 20
MAX_CLUSTERS = 5000
MAX_SAMPLE_CHARS = 400
MASK_CACHE_SIZE = 50_000
RAW_CACHE_SIZE = 4096  # small: it only pays off for messages that repeat verbatim


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
            samples.append(sample_text(sample))

    def template(self, cluster_id: int) -> str:
        cluster = self.drain.id_to_cluster.get(cluster_id)
        return cluster.get_template() if cluster else "<unknown>"


def sample_text(sample: str) -> str:
    return sample if len(sample) <= MAX_SAMPLE_CHARS else sample[: MAX_SAMPLE_CHARS - 1] + "…"
