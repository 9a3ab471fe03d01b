"""What metric names and log templates mean: generic SRE vocabulary, no scenario names.

Resources are what a service can run out of (connection pools, memory, disk,
CPU, threads, file descriptors, queues). A resource signal of a service's own,
together with its own log saying it ran out, is direct evidence of a cause;
a timeout while calling someone else is only evidence of being a victim.
"""

from __future__ import annotations

import re

# The caller/callee label namings live with the call edges, in evidence.
from diagnosis.evidence.tools.query_metrics import series as query_metrics_series
from diagnosis.evidence.topology import call_label_pairs as call_label_pairs
from diagnosis.facts import text_normalize

# resource subkind -> metric-name fragments (matched on the lower-case name)
RESOURCE_METRIC = {
    "pool": (
        "hikari",
        "pool",
        "connections_active",
        "connections_pending",
        "db_connections",
        "connections_used",
        "connection_pool",
        "pgbouncer",
        "max_connections",
        "threads_connected",
    ),
    "memory": ("memory", "heap", "rss", "working_set", "oom", "gc_", "_gc", "swap", "jvm_mem"),
    # "_fs_" a word of its own (the name is matched between underscores): cAdvisor's
    # ``container_cpu_cfs_throttled_*`` is the CPU's Completely Fair Scheduler, not a disk
    "disk": ("disk", "filesystem", "_fs_", "inode", "volume", "storage", "binlog"),
    "cpu": ("cpu", "throttl", "load1", "load5", "load15"),
    "threads": ("thread", "goroutine", "worker_busy", "workers_busy", "executor_active"),
    "fd": ("file_descriptor", "open_fds", "open_files", "_fds"),
    "queue": ("queue", "backlog", "lag"),
}
LATENCY_METRIC = (
    "latency",
    "duration",
    "response_time",
    "_seconds",
    "_ms",
    "p99",
    "p95",
    "rtt",
    "slow_quer",
    "slow_requests",
)
ERROR_METRIC = ("error", "5xx", "fail", "exception", "fault", "rejected", "timeout")
# Health that is good when high: a drop is the error signal (availability, success rate, apdex).
HEALTH_METRIC = ("availability", "success", "apdex", "uptime", "_ok_ratio", "slo_")
TRAFFIC_METRIC = (
    "requests_total",
    "request_count",
    "requests",
    "rps",
    "qps",
    "throughput",
    "calls_total",
    "_total",
)
RESTART_METRIC = ("restart", "oom_kill", "oomkill", "crash", "killed")
CHANGE_METRIC = (
    "build_info",
    "version",
    "deploy",
    "release",
    "config_reload",
    "config_hash",
    "revision",
)
LIMIT_WORDS = ("max", "limit", "capacity", "size", "total_bytes", "spec_", "allocatable")
FREE_WORDS = ("free", "avail", "idle", "remaining")
# Labels whose value says which share of a resource a series counts (node exporter's
# ``node_cpu_seconds_total{mode="idle"}``) or which resource it is the limit of
# (kube-state-metrics' ``kube_pod_container_resource_limits{resource="cpu"}``).
MODE_LABELS = ("mode", "state")
RESOURCE_LABELS = ("resource",)

# What a second, narrower query asks for when a service's first answer was cut short.
RESOURCE_SELECTOR = (
    '{__name__=~".*(pool|connections|hikari|memory|heap|oom|disk|filesystem|inode|volume|'
    'cpu|throttl|thread|goroutine|fds|open_files|queue|lag|limit|max|restart).*"}'
)
CHANGE_SELECTOR = '{__name__=~".*(build_info|version|deploy|release|revision|config_hash).*"}'
CHANGE_LOG_QUERY = "/(?i)(deploy|rollout|revision|version|image|release|upgrade|starting|config)/"

# Labels that name an instance rather than what is measured.
INSTANCE_LABELS = {
    "pod",
    "instance",
    "container",
    "node",
    "host",
    "hostname",
    "namespace",
    "job",
    "id",
    "image",
    "pod_name",
    "k8s_pod_name",
    "k8s.pod.name",
    "uid",
    "ip",
    "service",
    "__name__",
}

# Of those, the labels that tell one running copy of a service from another.
REPLICA_LABELS = query_metrics_series.REPLICA_LABELS

# log template kinds (lower-case fragments)
RESOURCE_LOG = {
    "pool": (
        "connection is not available",
        "connection pool",
        "pool exhausted",
        "hikaripool",
        "too many connections",
        "max_connections",
        "cannot get a connection",
        "could not get jdbc connection",
        "unable to acquire",
        "acquire connection",
        "pool is full",
        "pool timeout",
        "remaining connection slots",
        "连接池",
    ),
    "memory": (
        "out of memory",
        "outofmemory",
        "oom",
        "heap space",
        "gc overhead",
        "memory limit",
        "cannot allocate memory",
        "memory usage",
        "killed process",
        "内存",
    ),
    "disk": (
        "no space left",
        "disk full",
        "disk quota",
        "read-only file system",
        "filesystem full",
        "disk usage",
        "write failed",
        "errcode: 28",
        "磁盘",
    ),
    "cpu": ("cpu throttl", "cpu usage", "cpu limit"),
    "threads": (
        "thread pool",
        "rejectedexecution",
        "rejected execution",
        "unable to create new native thread",
        "worker pool exhausted",
        "线程池",
    ),
    "fd": ("too many open files",),
    "queue": ("queue full", "queue is full", "backlog", "buffer full"),
}
TIMEOUT_LOG = ("timeout", "timed out", "time out", "deadline exceeded", "超时")
DEPENDENCY_LOG = (
    "timeout",
    "timed out",
    "time out",
    "connection refused",
    "connect refused",
    "connection reset",
    "upstream",
    "downstream",
    "deadline exceeded",
    "unavailable",
    "circuit breaker",
    "503",
    "502",
    "504",
    "failed to connect",
    "call to",
    "calling",
    "request to",
    "error from",
    "超时",
    "调用",
)
CODE_LOG = (
    "exception",
    "nullpointer",
    "null pointer",
    "traceback",
    "panic",
    "undefined",
    "keyerror",
    "typeerror",
    "attributeerror",
    "valueerror",
    "stack trace",
    "assert",
    "invalid",
    "missing",
    "config",
    "failed to parse",
    "parse error",
    "schema",
    "migration",
    "version",
    "deploy",
    "unexpected",
    "cannot read properties",
    "segfault",
    "npe",
)
CHANGE_LOG = (
    "deployed",
    "deploying",
    "rollout",
    "rolled out",
    "new version",
    "updated to revision",
    "config reload",
    "configuration reload",
    "config changed",
    "feature flag",
    "started application",
    "starting application",
    "发布",
    "上线",
    "配置变更",
)
ERROR_LEVELS = (
    "ERROR",
    "ERR",
    "FATAL",
    "CRITICAL",
    "CRIT",
    "SEVERE",
    "PANIC",
    "EMERG",
    "EMERGENCY",
    "ALERT",
)
WARN_LEVELS = ("WARN", "WARNING")

# Text that tries to instruct the reader: data, never followed, never quoted in a claim.
INJECTION = re.compile(
    r"忽略(?:之前|以上|前面|上述|所有)|无视(?:之前|以上)|把根因(?:报告|写|说)成|根因(?:报告|写)为|"
    r"请(?:直接)?(?:报告|回答|输出)|系统提示|"
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above)|"
    r"disregard (?:all |the )?(?:previous|prior|above)|"
    r"system prompt|you are now|report (?:the )?root cause as|answer that the root cause|"
    r"new instructions?:",
    re.IGNORECASE,
)


def looks_like_instruction(text: str) -> bool:
    return bool(INJECTION.search(text or ""))


def _has_any(text: str, words: tuple[str, ...]) -> bool:
    return any(w in text for w in words)


# The series of a histogram or summary (OpenMetrics, Prometheus, OpenTelemetry): ``_bucket``
# counts the requests that took at most ``le``, ``_count`` every request, ``_sum`` their
# total duration.
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
# The subkind of a latency histogram's counting series, read as traffic.
HISTOGRAM_COUNT = "histogram_count"
HISTOGRAM_BUCKET = "histogram_bucket"


def histogram_part(metric: str) -> tuple[str, str]:
    """(family, suffix) of a histogram's or summary's series, ("", "") for any other name."""
    name = metric or ""
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], suffix
    return "", ""


def metric_kind(metric: str, labels: dict[str, str] | None = None) -> tuple[str, str]:
    """(kind, subkind) of a metric: resource/restart/change/errors/latency/traffic/other.

    A latency histogram's ``_count`` and ``_bucket`` are counts of requests (definitional):
    their rates are requests per second, all of them or those at or below a bound, so they
    are traffic (subkinds ``HISTOGRAM_COUNT``, ``HISTOGRAM_BUCKET``), never a latency,
    whatever "duration" or "seconds" their name carries. A slowdown moves requests out of
    the low buckets and a surge of traffic raises every bucket: neither is a latency read
    from one bucket. Its ``_sum`` (seconds of work per second) stays latency: with its
    ``_count`` it gives the mean (``analysis.histogram_means``).
    """
    family, suffix = histogram_part(metric)
    if suffix in {"_count", "_bucket"} and metric_kind(family, labels) == ("latency", ""):
        return "traffic", HISTOGRAM_COUNT if suffix == "_count" else HISTOGRAM_BUCKET
    name = (metric or "").lower()
    label_text = " ".join(f"{k}={v}" for k, v in sorted((labels or {}).items())).lower()
    if _has_any(name, RESTART_METRIC):
        sub = "memory" if "oom" in name else ""
        return "restart", sub
    if _has_any(name, CHANGE_METRIC):
        return "change", ""
    padded = f"_{name}_"  # so a fragment's underscores also match at the name's ends
    for sub, words in RESOURCE_METRIC.items():
        if _has_any(padded, words):
            # "pool" latency (connection acquire time) is still a pool signal
            return "resource", sub
    named = " ".join((labels or {}).get(k, "") for k in RESOURCE_LABELS).lower()
    for sub, words in RESOURCE_METRIC.items():
        if named and _has_any(f"_{named}_", words):
            return "resource", sub  # a series of several resources, told by its label
    if _has_any(name, HEALTH_METRIC):
        return "errors", "health"
    if _has_any(name, ERROR_METRIC) or re.search(r'(?:status|code)="?5\d\d', label_text):
        return "errors", ""
    if _has_any(name, LATENCY_METRIC):
        return "latency", ""
    if _has_any(name, TRAFFIC_METRIC):
        return "traffic", ""
    return "other", ""


def is_limit_metric(metric: str) -> bool:
    name = (metric or "").lower()
    return _has_any(name, LIMIT_WORDS)


def is_level_metric(metric: str) -> bool:
    """A gauge of how much is in use (not a rate, a counter or a waiting line)."""
    name = (metric or "").lower()
    return not _has_any(
        name,
        (
            "_total",
            "_count",
            "_sum",
            "_seconds",
            "_rate",
            "pending",
            "timeout",
            "wait",
            "queued",
            "rejected",
            "_created",
            "_bucket",
        ),
    )


def is_free_metric(metric: str, labels: dict[str, str] | None = None) -> bool:
    """Capacity still available (it falls as use rises): by the name, or by a mode label
    (the idle CPU seconds of a per-mode counter)."""
    name = (metric or "").lower()
    modes = " ".join((labels or {}).get(k, "") for k in MODE_LABELS).lower()
    return _has_any(name, FREE_WORDS) or (bool(modes) and _has_any(modes, FREE_WORDS))


# Micrometer's ``process_cpu_usage``/``system_cpu_usage``: "the recent CPU usage", a
# share in [0, 1] that carries no unit word.
_SHARE_SUFFIXES = ("cpu_usage",)


def is_ratio_metric(metric: str) -> bool:
    """A share of a whole (0..1 or a percentage), by its unit word. Matched as words:
    "duration" contains "ratio" and is not one."""
    name = (metric or "").lower()
    if name.endswith(_SHARE_SUFFIXES):
        return True
    words = set(re.split(r"[^a-z0-9]+", name))
    if words & {"ratio", "utilization", "utilisation", "percent", "percentage", "pct", "fraction"}:
        return True
    return _has_any(
        name,
        (
            "usage_rate",
            "saturation",
            "fraction",
        ),
    )


_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+\.\d+(?![\w.])")
_TAGGED_VERSION = re.compile(r"(?<![\w.])v\d+\.\d+(?:\.\d+)?(?![\w.])")
_CHANGE_WORDS = ("image", "revision", "rollout", "release", "deploy", "upgrade", "version")
LIMIT_SELECTOR = '{__name__=~".*(limit|max|capacity|size|total_bytes).*"}'
_LEVEL_IN_TEXT = re.compile(r"(?<![A-Za-z])(PANIC|FATAL|CRITICAL|ERROR|WARNING|WARN)(?=[:\]\s])")


def is_change_text(text: str) -> bool:
    """A deploy, version or configuration change (a plain restart is not one)."""
    lowered = (text or "").lower()
    if _has_any(lowered, CHANGE_LOG):
        return True
    if _TAGGED_VERSION.search(lowered) and (_has_any(lowered, _CHANGE_WORDS) or "start" in lowered):
        return True
    return bool(_VERSION.search(lowered)) and _has_any(lowered, _CHANGE_WORDS)


def level_in_text(text: str) -> str:
    """The severity a message spells out itself (``ERROR:``, ``[FATAL]``), for unlevelled logs."""
    match = _LEVEL_IN_TEXT.search(text or "")
    return match.group(1) if match else ""


def log_kind(template: str, mentions_other: bool) -> tuple[str, str]:
    """(kind, subkind) of a log template: resource/dependency/change/code/other."""
    text = (template or "").lower()
    if mentions_other and _has_any(text, DEPENDENCY_LOG):
        return "dependency", ""
    for sub, words in RESOURCE_LOG.items():
        if _has_any(text, words):
            return "resource", sub
    if is_change_text(text):
        return "change", ""
    if _has_any(text, DEPENDENCY_LOG):
        return "dependency", ""
    if _has_any(text, CODE_LOG):
        return "code", ""
    return "other", ""


# Labels with which a caller's client-side series names the service it waits on: a client
# span's or timer's peer (OpenTelemetry ``peer.service``/``server.address``/``net.peer.name``,
# as Prometheus spells them with ``_``), a proxy's ``upstream``/``target``, a client metric's
# ``server``/``callee``, the ``http_host`` it sent. ``known`` services only, whole tokens.
PEER_LABELS = (
    "peer_service",
    "server_address",
    "net_peer_name",
    "target",
    "upstream",
    "server",
    "callee",
    "http_host",
)


# --- the evidence a fault kind names ---------------------------------------------------
# Words of evidence text (tool output lines as quoted, a basis, in either answer language)
# that show each root_cause_kind: the families above, which are what the engine reads a
# kind from, as a line spells them, and their Chinese names. Matched on
# ``text_normalize``d text, so lenient: a kind is unshown only when nothing of its family
# is in the text.
_EXHAUSTIBLE = ("pool", "threads", "fd", "queue")


def _words(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w.lower() for group in groups for w in group))


KIND_WORDS = {
    "memory": _words(
        RESOURCE_METRIC["memory"], RESOURCE_LOG["memory"], ("mem", "garbage", "堆")
    ),
    "cpu": _words(RESOURCE_METRIC["cpu"], RESOURCE_LOG["cpu"], ("load average", "处理器")),
    "disk": _words(RESOURCE_METRIC["disk"], RESOURCE_LOG["disk"], ("fs_", "no space", "存储")),
    # a caller's client-side series on a peer: the time between the two ends of a call,
    # where the network is (a client wait over a flat callee is read as network)
    "network": _words(
        ("network", "packet", "tcp", "udp", "dns", "retrans", "connection reset", "socket",
         "网络", "丢包", "重传"),
        tuple(f'{label}="' for label in PEER_LABELS),
    ),
    "latency": _words(
        LATENCY_METRIC, TIMEOUT_LOG,
        ("p90", "slow", "took", "mean time", "延迟", "耗时"),
    ),
    # a health series (availability, success rate) falling is the error share rising
    "errors": _words(
        ERROR_METRIC, HEALTH_METRIC, ("错误", "异常", "失败", "可用", "成功率"),
    ),
    "code": _words(CODE_LOG, ("error", "stack", "segfault", "异常", "错误")),
    "configuration": _words(
        CHANGE_METRIC, CHANGE_LOG, _CHANGE_WORDS,
        ("config", "setting", "flag", "配置", "变更"),
    ),
    "resource_exhaustion": _words(
        *(RESOURCE_METRIC[k] for k in _EXHAUSTIBLE), *(RESOURCE_LOG[k] for k in _EXHAUSTIBLE),
        ("connection", "limit", "exhaust", "_max", "max_", "open files", "acquire", "连接",
         "耗尽", "上限"),
    ),
    # a failed call to another service: what a dependency's fault shows in its caller
    "dependency": _words(DEPENDENCY_LOG, ("依赖",)),
}  # fmt: skip
# the kind a statement names ("（类型：延迟或网络——…）" / " (kind: latency or network — …)"):
# what it concludes, never evidence of itself
KIND_NAMED = re.compile(r"[(（]\s*(?:类型|kind)\s*[:：][^()（）]*[)）]", re.IGNORECASE)


def kind_shown(kind: str | None, text: str) -> bool:
    """Whether evidence ``text`` names evidence of ``kind`` (a kind with no words: yes).

    A kind is a conclusion about what a service ran out of or got wrong; the evidence for
    it is a series or a log line of that family. A statement's own naming of its kind
    ("（类型：内存）") is removed first: a conclusion is no evidence of itself.
    """
    words = KIND_WORDS.get(kind or "")
    if words is None:
        return True
    normalized = text_normalize(KIND_NAMED.sub("", text or ""))
    return any(w in normalized for w in words)
