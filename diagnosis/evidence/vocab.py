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

# --- a metric name's words --------------------------------------------------------------
# A metric name is words joined by separators. The naming convention changes the separator,
# not the words: Prometheus joins them with ``_`` (``jvm_gc_pause_seconds``), OpenTelemetry
# with ``.`` (``jvm.gc.duration``), JMX and node exporter's meminfo fields by capitals
# (``node_memory_MemAvailable_bytes``), others with ``-``. So a name is read from its words,
# split once by ``name_words`` and joined back with ``_`` (``name_padded``): a fragment of the
# vocabulary below then means the same in every convention.
#
# Two kinds of entry. A fragment (``RESOURCE_METRIC``, ``LATENCY_METRIC``...) matches
# anywhere in the ``_``-joined name: the prefix or stem of a real word (``hikari``,
# ``throttl``, ``retrans``) or words written with their ``_``s (``working_set``). A short
# abbreviation matches only as a whole word or run of words (``RESOURCE_WORDS``,
# ``LATENCY_WORDS``): inside a longer word it is part of another word (``mem`` in
# ``member``, ``ram`` in ``param``, ``rt`` in ``start``, ``io`` in ``ratio``).
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of a metric name (or label value), whatever joins them: any
    character other than a letter or digit, or a capital starting a word (``MemAvailable``,
    ``HTTPServer``). Digits stay with their word (``load1``, ``p99``, ``5xx``)."""
    return tuple(w for w in _SEPARATORS.split(_CAMEL.sub("_", name or "").lower()) if w)


def name_padded(name: str) -> str:
    """The name's words joined by ``_``, with a ``_`` at each end, so that a fragment's or a
    whole word's ``_``s match at the name's ends too."""
    return "_" + "_".join(name_words(name)) + "_"


def _has_word(padded: str, words: tuple[str, ...]) -> bool:
    """Whether ``padded`` (``name_padded``) holds one of ``words`` (a word, or words joined
    by ``_``) whole: between separators, never inside a longer word."""
    return any(f"_{w}_" in padded for w in words)


# resource subkind -> metric-name fragments (matched on ``name_padded``). The order is the
# order they are tried in: a memory pool (``jvm_memory_pool_bytes_used``) is memory; a CPU's
# time waiting on IO (``cpu_iowait``) is the CPU's, as node exporter counts it by mode.
RESOURCE_METRIC = {
    # a buffer pool (client_java's ``jvm_buffer_pool_used_bytes``) holds direct memory
    "memory": ("memory", "heap", "rss", "working_set", "oom", "swap", "jvm_mem", "buffer_pool"),
    "pool": (
        "hikari",
        "pool",
        "connections_active",
        "connections_pending",
        "db_connections",
        # OpenTelemetry's connection-pool semantic conventions (``db.client.connections.usage``,
        # later ``db.client.connection.count``)
        "db_client_connection",
        "connections_used",
        "connection_pool",
        "pgbouncer",
        "max_connections",
        "threads_connected",
    ),
    "cpu": ("cpu", "throttl", "load1", "load5", "load15"),
    # "fs" a word of its own (``RESOURCE_WORDS``): cAdvisor's ``container_cpu_cfs_throttled_*``
    # is the CPU's Completely Fair Scheduler, not a disk
    "disk": ("disk", "filesystem", "inode", "volume", "storage", "binlog"),
    "threads": ("thread", "goroutine", "worker_busy", "workers_busy", "executor_active"),
    "fd": ("file_descriptor", "open_fds", "open_files", "_fds", "filefd"),
    "queue": ("queue", "backlog", "lag"),
}
# resource subkind -> whole words (or runs of words) of it, short ones that are part of other
# words when not whole: ``mem``/``ram`` (``mem_used_bytes``, ``ram_usage``), a load average,
# IO (node exporter's pressure ``node_pressure_io_stalled_seconds_total``, ``iops``, cgroup v1's
# ``blkio``), a descriptor count (``fd``).
RESOURCE_WORDS = {
    "memory": ("mem", "ram", "gc"),
    "cpu": ("load_avg", "loadavg", "load_average"),
    "disk": ("fs", "io", "iops", "iowait", "io_wait", "blkio"),
    "fd": ("fd",),
}
# Words that make an "io" the network's: ``system.network.io`` counts bytes moved on a
# network interface, not a disk's.
NETWORK_WORDS = frozenset(
    {"network", "net", "tcp", "udp", "dns", "icmp", "packet", "packets", "socket", "sockets"}
    | {"retrans", "retransmit", "retransmits", "retransmitted", "retransmission"}
    | {"retransmissions", "conntrack", "netstat", "rx", "tx", "nic", "resolver"}
)
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
# ``rt``: response time, as many systems name it (``avg_rt``, ``rt_ms``)
LATENCY_WORDS = ("rt",)
ERROR_METRIC = ("error", "5xx", "fail", "exception", "fault", "rejected", "timeout")
# Health that is good when high: a drop is the error signal (availability, success rate, apdex).
HEALTH_METRIC = ("availability", "success", "apdex", "uptime", "_ok_ratio", "slo_")
# Replicas that are not serving (kube-state-metrics' ``kube_deployment_status_replicas_
# unavailable``): an availability symptom that rises as pods fail. "deployment" there names
# the object the series is of, not a deploy; a rollout shows in its generation or revision.
UNAVAILABLE_WORDS = ("unavailable", "not_ready")
# Their complement, good when high: a drop is the symptom.
AVAILABLE_WORDS = ("replicas_available", "replicas_ready")
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

# What a second, narrower query asks for when a service's first answer was cut short: every
# series the vocabulary reads as a resource, its limits and restarts. A regex of Prometheus'
# RE2 (no lookaround), matched against the whole name: a fragment anywhere, a short word only
# between separators (``_``, or ``.`` in a UTF-8 name). Kept short: the selector is quoted in
# every request that shows the call.
_SELECTOR_SEPARATOR = "[._]"


def _name_selector(fragments: tuple[str, ...], words: tuple[str, ...]) -> str:
    """A ``__name__`` regex matching a name that holds one of ``fragments`` or ``words``."""
    sep = _SELECTOR_SEPARATOR

    def spelled(entry: str) -> str:
        return re.escape(entry).replace("_", sep)

    bare = tuple(dict.fromkeys(f.strip("_") for f in fragments))
    # a fragment holding another adds nothing ("connections" finds "db_connections")
    kept = [f for f in bare if not any(o != f and o in f for o in bare)]
    anywhere = "|".join(spelled(f) for f in kept)
    whole = "|".join(spelled(w) for w in words)
    return f'{{__name__=~".*({anywhere}).*|(.*{sep})?({whole})({sep}.*)?"}}'


RESOURCE_SELECTOR = _name_selector(
    (
        *dict.fromkeys(f for fragments in RESOURCE_METRIC.values() for f in fragments),
        "connections",
        "limit",
        "max",
        "restart",
    ),
    tuple(dict.fromkeys(w for words in RESOURCE_WORDS.values() for w in words)),
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
    name = name_padded(metric)
    label_text = " ".join(f"{k}={v}" for k, v in sorted((labels or {}).items())).lower()
    if _has_any(name, RESTART_METRIC):
        sub = "memory" if "oom" in name else ""
        return "restart", sub
    if _has_word(name, UNAVAILABLE_WORDS):
        return "errors", ""  # before the change words: "deployment" there is the object
    if _has_word(name, AVAILABLE_WORDS):
        return "errors", "health"
    if _has_any(name, CHANGE_METRIC):
        return "change", ""
    sub = resource_subkind(name)
    if sub:
        return "resource", sub  # "pool" latency (connection acquire time) is still a pool signal
    named = " ".join((labels or {}).get(k, "") for k in RESOURCE_LABELS)
    sub = resource_subkind(name_padded(named)) if named.strip() else ""
    if sub:
        return "resource", sub  # a series of several resources, told by its label
    if _has_any(name, HEALTH_METRIC):
        return "errors", "health"
    if _has_any(name, ERROR_METRIC) or re.search(r'(?:status|code)="?5\d\d', label_text):
        return "errors", ""
    if _has_any(name, LATENCY_METRIC) or _has_word(name, LATENCY_WORDS):
        return "latency", ""
    if _has_any(name, TRAFFIC_METRIC):
        return "traffic", ""
    return "other", ""


def resource_subkind(padded: str) -> str:
    """The resource a ``name_padded`` name measures by its fragments or whole words
    (``RESOURCE_METRIC``, ``RESOURCE_WORDS``, tried in that order of subkinds), "" for none.
    An "io" of a network (``system.network.io``) is the network's traffic, no disk's."""
    network = not NETWORK_WORDS.isdisjoint(padded.split("_"))
    for sub, fragments in RESOURCE_METRIC.items():
        words = RESOURCE_WORDS.get(sub, ())
        if network and sub == "disk":
            words = tuple(w for w in words if w != "io")
        if _has_any(padded, fragments) or _has_word(padded, words):
            return sub
    return ""


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
    words = set(name_words(metric))
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
        RESOURCE_METRIC["memory"], RESOURCE_LOG["memory"], ("mem", "gc_", "_gc", "garbage", "堆")
    ),
    # the whole words of ``RESOURCE_WORDS`` long enough not to sit inside prose's words
    "cpu": _words(
        RESOURCE_METRIC["cpu"], RESOURCE_LOG["cpu"],
        ("load average", "loadavg", "load_avg", "处理器"),
    ),
    "disk": _words(
        RESOURCE_METRIC["disk"], RESOURCE_LOG["disk"],
        ("fs_", "iops", "iowait", "io_wait", "blkio", "no space", "存储"),
    ),
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
