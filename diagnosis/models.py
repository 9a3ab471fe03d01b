"""The diagnosis domain: environments, sessions, tool invocations, model calls, runbooks."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from diagnosis import contracts
from diagnosis.contracts import ParseStatus as _Parse

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


def validate_service_url(value: str) -> None:
    """http(s) URL; unlike URLValidator it accepts cluster-internal hosts (http://prometheus:9090)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValidationError(_("不是有效的地址。")) from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValidationError(_("地址必须以 http:// 或 https:// 开头并包含主机名。"))


# What Prometheus and Loki accept as a label name; ``__…`` names are reserved for internal use.
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# PromQL is free text for us (the backend reports a failed query); only control characters
# other than whitespace are refused, so nothing unprintable reaches Prometheus or the admin.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
CALL_EDGES_QUERY_MAX_LENGTH = 2000
# The label that names a series' or stream's service when an environment names none.
SERVICE_LABEL = "service"


def label_name_is(value: str) -> bool:
    """Whether ``value`` is a Prometheus/Loki label name a user may set (not ``__…``)."""
    return bool(_LABEL_NAME.fullmatch(value)) and not value.startswith("__")


def validate_label_name(value: str) -> None:
    """A Prometheus/Loki label name such as ``job`` or ``app_kubernetes_io_name``."""
    if not label_name_is(value):
        raise ValidationError(_("标签名只能包含字母、数字和下划线，不能以数字或两个下划线开头。"))


def validate_query_text(value: str) -> None:
    """Query text: not only whitespace, no control characters (its syntax is the backend's)."""
    if not value.strip() or _CONTROL.search(value):
        raise ValidationError(_("查询不能只有空白，也不能包含控制字符。"))


def _service_label_field(verbose_name: StrOrPromise, help_text: StrOrPromise) -> models.CharField:
    """An optional label name: the label that names a service in one of the backends."""
    return models.CharField(
        verbose_name,
        max_length=100,
        blank=True,
        validators=[validate_label_name],
        help_text=help_text,
    )


class Environment(models.Model):
    """Where evidence comes from: a scenario pack on disk, or a live Prometheus/Loki (and
    Jaeger or Tempo for traces)."""

    class Kind(models.TextChoices):
        SCENARIO = "scenario", _("场景包")
        LIVE = "live", _("线上系统")

    class TracesKind(models.TextChoices):
        JAEGER = "jaeger", _("Jaeger（/api/traces）")
        JAEGER_V2 = "jaeger_v2", _("Jaeger v2（/api/v3/traces，OTLP/JSON）")
        TEMPO = "tempo", _("Grafana Tempo（TraceQL）")

    slug = models.SlugField(_("标识"), max_length=100, unique=True)
    name = models.CharField(_("名称"), max_length=200)
    kind = models.CharField(_("类型"), max_length=20, choices=Kind.choices, default=Kind.SCENARIO)
    description = models.TextField(_("说明"), blank=True)
    pack_path = models.CharField(_("场景包路径"), max_length=500, blank=True)
    prometheus_url = models.CharField(
        _("Prometheus 地址"), max_length=500, blank=True, validators=[validate_service_url]
    )
    loki_url = models.CharField(
        _("Loki 地址"), max_length=500, blank=True, validators=[validate_service_url]
    )
    # Credentials are never stored: only the name of the environment variable holding them.
    prometheus_token_env = models.CharField(
        _("Prometheus 令牌环境变量名"), max_length=100, blank=True
    )
    loki_token_env = models.CharField(_("Loki 令牌环境变量名"), max_length=100, blank=True)
    loki_tenant = models.CharField(_("Loki 租户 (X-Scope-OrgID)"), max_length=100, blank=True)
    # Fleets name their services with different labels (job, app, service_name, …).
    metrics_service_label = _service_label_field(
        _("指标的服务标签"),
        _("Prometheus 中标明服务名的标签，例如 job 或 app；留空表示 service。"),
    )
    logs_service_label = _service_label_field(
        _("日志的服务标签"),
        _("Loki 日志流中标明服务名的标签，例如 app 或 service_name；留空表示 service。"),
    )
    call_edges_query = models.TextField(
        _("调用关系查询"),
        max_length=CALL_EDGES_QUERY_MAX_LENGTH,
        blank=True,
        # A TextField's max_length only sizes the form's textarea: the validator enforces it.
        validators=[MaxLengthValidator(CALL_EDGES_QUERY_MAX_LENGTH), validate_query_text],
        help_text=_(
            "PromQL，其结果序列的标签给出调用方和被调用方（如 source_workload 与 "
            "destination_workload）；留空表示使用 CALL_EDGES_QUERY 设置。"
        ),
    )
    traces_url = models.CharField(
        _("链路追踪地址"), max_length=500, blank=True, validators=[validate_service_url]
    )
    traces_kind = models.CharField(
        _("链路追踪后端"), max_length=20, choices=TracesKind.choices, blank=True
    )
    traces_token_env = models.CharField(_("链路追踪令牌环境变量名"), max_length=100, blank=True)
    traces_timeout_seconds = models.FloatField(
        _("链路追踪超时（秒）"),
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text=_("留空表示使用 TOOL_TIMEOUT_SECONDS。"),
    )
    services = models.JSONField(_("服务列表"), default=list, blank=True)
    is_active = models.BooleanField(_("启用"), default=True)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("环境")
        verbose_name_plural = pgettext_lazy("plural", "环境")

    def __str__(self) -> str:
        return self.name

    @property
    def metrics_label(self) -> str:
        """The label that names a metric series' service in this environment's Prometheus."""
        return _label_or_default(self.metrics_service_label)

    @property
    def logs_label(self) -> str:
        """The label that names a log stream's service in this environment's Loki."""
        return _label_or_default(self.logs_service_label)


def _label_or_default(value: str) -> str:
    """The label as set, when it is a label name: a row saved without validation (a shell,
    a migration) cannot put other text into a query."""
    if label_name_is(value):
        return value
    return SERVICE_LABEL


class DiagnosisSession(models.Model):
    class Source(models.TextChoices):
        CHAT = "chat", pgettext_lazy("session source", "对话")
        API = "api", _("API")
        ALERT = "alert", _("告警")

    class Status(models.TextChoices):
        QUEUED = "queued", _("排队中")
        RUNNING = "running", _("运行中")
        COMPLETED = "completed", _("已完成")
        FAILED = "failed", _("失败")
        CANCELLED = "cancelled", _("已取消")

    class Stage(models.TextChoices):
        QUEUED = "queued", _("排队")
        PLANNER = "planner", _("规划")
        EXECUTOR = "executor", _("取证")
        GATEKEEPER = "gatekeeper", _("证据校验")
        VERIFIER = "verifier", _("核验")
        COMPOSER = "composer", _("撰写")
        DONE = "done", _("结束")

    # The values are the contracts' enums (one enum per concept); a stored decision is
    # never RETRY (the router loops on it).
    class Decision(models.TextChoices):
        PASS = contracts.Decision.PASS.value, _("证据充分")
        LOW_CONFID = contracts.Decision.LOW_CONFID.value, _("置信度低")
        REJECT = contracts.Decision.REJECT.value, _("无法确认")

    class ParseStatus(models.TextChoices):
        PARSED_V2 = _Parse.PARSED_V2.value, _Parse.PARSED_V2.value
        PARSED_V1 = _Parse.PARSED_V1.value, _Parse.PARSED_V1.value
        EMPTY = _Parse.EMPTY.value, _Parse.EMPTY.value
        INVALID_JSON = _Parse.INVALID_JSON.value, _Parse.INVALID_JSON.value
        NOT_AN_OBJECT = _Parse.NOT_AN_OBJECT.value, _Parse.NOT_AN_OBJECT.value
        SCHEMA_INVALID = _Parse.SCHEMA_INVALID.value, _Parse.SCHEMA_INVALID.value
        TRUNCATED = _Parse.TRUNCATED.value, _Parse.TRUNCATED.value

    class RootCause(models.TextChoices):
        CONFIRMED = "confirmed", _("根因已确认")
        INFERRED = "inferred", _("根因为推断")
        HYPOTHESISED = "hypothesised", _("根因仅为假设")
        UNDETERMINED = "undetermined", _("根因未确定")

    class AnswerSource(models.TextChoices):
        COMPOSER = contracts.AnswerSource.COMPOSER.value, _("撰写器")
        FALLBACK = contracts.AnswerSource.FALLBACK.value, _("确定性渲染")

    TERMINAL_STATUSES = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    public_id = models.UUIDField(_("公开 ID"), default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("提问人"),
        on_delete=models.PROTECT,
        related_name="diagnosis_sessions",
        null=True,
        blank=True,
    )
    requested_by = models.CharField(_("请求方"), max_length=200, blank=True)
    source = models.CharField(_("来源"), max_length=10, choices=Source.choices, default=Source.CHAT)
    environment = models.ForeignKey(
        Environment, verbose_name=_("环境"), on_delete=models.PROTECT, related_name="sessions"
    )
    conversation = models.ForeignKey(
        "chat.Conversation",
        verbose_name=pgettext_lazy("singular", "对话"),
        on_delete=models.CASCADE,
        related_name="sessions",
        null=True,
        blank=True,
    )
    original_query = models.TextField(_("问题"))
    language = models.CharField(_("回答语言"), max_length=10, default="zh-CN")
    context = models.JSONField(_("上下文"), default=dict, blank=True)
    status = models.CharField(
        _("状态"), max_length=10, choices=Status.choices, default=Status.QUEUED
    )
    stage = models.CharField(_("阶段"), max_length=12, choices=Stage.choices, default=Stage.QUEUED)
    decision = models.CharField(_("结论"), max_length=12, choices=Decision.choices, blank=True)
    root_cause_status = models.CharField(
        _("根因"), max_length=12, choices=RootCause.choices, blank=True
    )
    attempt_count = models.PositiveSmallIntegerField(_("执行次数"), default=0)
    plan = models.JSONField(_("计划"), default=dict, blank=True)
    executor_final_answer = models.TextField(_("Executor 原始回答"), blank=True)
    executor_structured_output = models.JSONField(_("Executor 结构化输出"), null=True, blank=True)
    executor_output_parse_status = models.CharField(
        _("解析状态"), max_length=16, choices=ParseStatus.choices, blank=True
    )
    self_evaluation = models.JSONField(_("自我评估"), default=dict, blank=True)
    final_answer = models.TextField(_("最终回答"), blank=True)
    answer_source = models.CharField(
        _("回答来源"), max_length=10, choices=AnswerSource.choices, blank=True
    )
    llm_usage = models.JSONField(_("模型用量"), default=dict, blank=True)
    error = models.TextField(_("错误"), blank=True)
    idempotency_key = models.CharField(_("幂等键"), max_length=200, blank=True)
    callback_url = models.URLField(_("回调地址"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(_("开始时间"), null=True, blank=True)
    finished_at = models.DateTimeField(_("结束时间"), null=True, blank=True)
    heartbeat_at = models.DateTimeField(_("心跳时间"), null=True, blank=True)
    # host:pid of the worker process running the flow, to tell a redelivery from a duplicate.
    runner = models.CharField(_("执行进程"), max_length=200, blank=True)
    restarts = models.PositiveSmallIntegerField(_("重启次数"), default=0)
    cancel_requested = models.BooleanField(_("已请求取消"), default=False)

    class Meta:
        db_table = "diagnosis_session"
        ordering = ["-created_at", "-id"]
        verbose_name = _("诊断会话")
        verbose_name_plural = pgettext_lazy("plural", "诊断会话")
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="session_owner_created"),
            models.Index(fields=["status", "-created_at"], name="session_status_created"),
            models.Index(fields=["status", "heartbeat_at"], name="session_status_heartbeat"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="session_owner_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.original_query[:40]}"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL_STATUSES

    def is_running_elsewhere(self, runner: str) -> bool:
        """Running, by a runner other than ``runner`` (it was taken over)."""
        return self.status == self.Status.RUNNING and self.runner != runner

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class ToolInvocation(models.Model):
    class Status(models.TextChoices):
        OK = "ok", _("成功")
        NO_DATA = "no_data", _("无数据")
        ERROR = "error", _("错误")
        TIMEOUT = "timeout", _("超时")

    session = models.ForeignKey(
        DiagnosisSession,
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="invocations",
    )
    attempt = models.PositiveSmallIntegerField(_("执行次数"), default=1)
    sequence = models.PositiveIntegerField(_("序号"))
    trace_ref = models.CharField(_("追踪引用"), max_length=20)
    tool_name = models.CharField(_("工具"), max_length=50)
    arguments = models.JSONField(_("参数"), default=dict, blank=True)
    status = models.CharField(_("状态"), max_length=10, choices=Status.choices)
    # Exactly what the model read; the Gatekeeper searches this text.
    output = models.TextField(_("输出"), blank=True)
    output_size = models.PositiveBigIntegerField(_("原始大小"), default=0)
    truncated = models.BooleanField(_("已截断"), default=False)
    summary = models.JSONField(_("摘要"), default=dict, blank=True)
    error = models.TextField(_("错误"), blank=True)
    started_at = models.DateTimeField(_("开始时间"))
    duration_ms = models.PositiveIntegerField(_("耗时 (毫秒)"), default=0)

    class Meta:
        db_table = "tool_invocation"
        ordering = ["session", "sequence"]
        verbose_name = pgettext_lazy("singular", "工具调用")
        verbose_name_plural = pgettext_lazy("plural", "工具调用")
        constraints = [
            models.UniqueConstraint(fields=["session", "sequence"], name="invocation_session_seq"),
            models.UniqueConstraint(
                fields=["session", "trace_ref"], name="invocation_session_trace_ref"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trace_ref} {self.tool_name}"


class LLMCall(models.Model):
    """One model call, kept so a reviewer can see what each agent produced."""

    class Status(models.TextChoices):
        OK = "ok", _("成功")
        ERROR = "error", _("错误")
        TIMEOUT = "timeout", _("超时")
        TRUNCATED = "truncated", _("被截断")
        EMPTY = "empty", _("空回答")
        REJECTED = "rejected", _("被拒绝")

    session = models.ForeignKey(
        DiagnosisSession,
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="llm_calls",
    )
    attempt = models.PositiveSmallIntegerField(_("执行次数"), default=1)
    sequence = models.PositiveIntegerField(_("序号"))
    role = models.CharField(_("角色"), max_length=20)
    provider = models.CharField(_("提供方"), max_length=20)
    model = models.CharField(_("模型"), max_length=200, blank=True)
    request_chars = models.PositiveIntegerField(_("请求字符数"), default=0)
    request = models.JSONField(_("请求"), default=dict, blank=True)
    raw_response = models.TextField(_("原始回答"), blank=True)
    tokens_in = models.PositiveIntegerField(_("输入 tokens"), default=0)
    tokens_out = models.PositiveIntegerField(_("输出 tokens"), default=0)
    latency_ms = models.PositiveIntegerField(_("延迟 (毫秒)"), default=0)
    status = models.CharField(_("状态"), max_length=10, choices=Status.choices)
    error = models.TextField(_("错误"), blank=True)
    created_at = models.DateTimeField(_("时间"), auto_now_add=True)

    class Meta:
        ordering = ["session", "sequence"]
        verbose_name = pgettext_lazy("singular", "模型调用")
        verbose_name_plural = pgettext_lazy("plural", "模型调用")
        constraints = [
            models.UniqueConstraint(fields=["session", "sequence"], name="llmcall_session_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.sequence}"


class SessionEvent(models.Model):
    """Progress a page or an API client can follow while a session runs."""

    class Kind(models.TextChoices):
        STAGE = "stage", _("阶段")
        TOOL_CALL = "tool_call", _("工具调用")
        TOOL_RESULT = "tool_result", _("工具结果")
        INFO = "info", _("信息")
        ERROR = "error", _("错误")

    session = models.ForeignKey(
        DiagnosisSession,
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="events",
    )
    sequence = models.PositiveIntegerField(_("序号"))
    kind = models.CharField(_("类型"), max_length=12, choices=Kind.choices)
    stage = models.CharField(_("阶段"), max_length=12, blank=True)
    message = models.CharField(_("消息"), max_length=500, blank=True)
    data = models.JSONField(_("数据"), default=dict, blank=True)
    created_at = models.DateTimeField(_("时间"), auto_now_add=True)

    class Meta:
        ordering = ["session", "sequence"]
        verbose_name = _("进度事件")
        verbose_name_plural = pgettext_lazy("plural", "进度事件")
        constraints = [
            models.UniqueConstraint(fields=["session", "sequence"], name="event_session_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.message}"


class KnowledgeDocument(models.Model):
    """A runbook or past-incident note, imported from Markdown and editable in admin."""

    slug = models.SlugField(_("标识"), max_length=200)
    environment = models.ForeignKey(
        Environment,
        verbose_name=_("环境"),
        on_delete=models.CASCADE,
        related_name="knowledge_documents",
        null=True,
        blank=True,
        help_text=_("留空表示所有环境共享"),
    )
    title = models.CharField(_("标题"), max_length=300)
    body = models.TextField(_("正文 (Markdown)"))
    source_path = models.CharField(_("来源文件"), max_length=500, blank=True)
    updated_at = models.DateTimeField(_("更新时间"), auto_now=True)

    class Meta:
        ordering = ["title"]
        verbose_name = _("知识文档")
        verbose_name_plural = pgettext_lazy("plural", "知识文档")
        constraints = [
            models.UniqueConstraint(fields=["environment", "slug"], name="knowledge_env_slug"),
        ]

    def __str__(self) -> str:
        return self.title


class KnowledgeChunk(models.Model):
    document = models.ForeignKey(
        KnowledgeDocument,
        verbose_name=_("知识文档"),
        on_delete=models.CASCADE,
        related_name="chunks",
    )
    chunk_id = models.CharField(_("块 ID"), max_length=300, unique=True)
    ordinal = models.PositiveIntegerField(_("序号"))
    heading = models.CharField(_("小节"), max_length=300, blank=True)
    text = models.TextField(_("内容"))

    class Meta:
        ordering = ["document", "ordinal"]
        verbose_name = _("知识块")
        verbose_name_plural = pgettext_lazy("plural", "知识块")

    def __str__(self) -> str:
        return self.chunk_id


# --- REST API: keys, submissions, callbacks, Alertmanager receivers -------------------


class ApiKey(models.Model):
    """A bearer key a user creates for an integration; only a hash of its secret is kept."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("所有者"),
        on_delete=models.CASCADE,
        related_name="api_keys",
    )
    name = models.CharField(_("名称"), max_length=100)
    # The public part of the key ("rp_<prefix>_<secret>"), used to find the row.
    prefix = models.CharField(_("前缀"), max_length=16, unique=True)
    secret_hash = models.CharField(_("密钥哈希 (SHA-256)"), max_length=64)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("最近使用"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("吊销时间"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("API 密钥")
        verbose_name_plural = pgettext_lazy("plural", "API 密钥")

    def __str__(self) -> str:
        return f"{self.name} (rp_{self.prefix}_…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ApiSubmission(models.Model):
    """How a session arrived through the API: the key, the request fingerprint, its callback."""

    class CallbackState(models.TextChoices):
        NONE = "none", _("无回调")
        PENDING = "pending", _("待发送")
        DELIVERED = "delivered", _("已送达")
        FAILED = "failed", _("发送失败")

    session = models.OneToOneField(
        DiagnosisSession,
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="api_submission",
    )
    api_key = models.ForeignKey(
        ApiKey,
        verbose_name=_("API 密钥"),
        on_delete=models.SET_NULL,
        related_name="submissions",
        null=True,
        blank=True,
    )
    # SHA-256 of the canonical request body, to tell a retry from a different request.
    request_hash = models.CharField(_("请求指纹"), max_length=64)
    callback_state = models.CharField(
        _("回调状态"), max_length=10, choices=CallbackState.choices, default=CallbackState.NONE
    )
    callback_delivered_at = models.DateTimeField(_("回调送达时间"), null=True, blank=True)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)

    class Meta:
        verbose_name = _("API 提交")
        verbose_name_plural = pgettext_lazy("plural", "API 提交")

    def __str__(self) -> str:
        return str(self.session_id)


class CallbackAttempt(models.Model):
    """One POST of a finished session's result to its callback URL."""

    session = models.ForeignKey(
        DiagnosisSession,
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="callback_attempts",
    )
    attempt = models.PositiveSmallIntegerField(_("第几次"))
    url = models.URLField(_("地址"), max_length=500)
    status_code = models.PositiveSmallIntegerField(_("HTTP 状态码"), null=True, blank=True)
    error = models.CharField(_("错误"), max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField(_("耗时 (毫秒)"), default=0)
    at = models.DateTimeField(_("时间"), auto_now_add=True)

    class Meta:
        ordering = ["session", "attempt"]
        verbose_name = _("回调尝试")
        verbose_name_plural = pgettext_lazy("plural", "回调尝试")
        constraints = [
            models.UniqueConstraint(fields=["session", "attempt"], name="callback_session_attempt"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} #{self.attempt} {self.status_code or self.error[:40]}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class AlertmanagerReceiver(models.Model):
    """An Alertmanager webhook target: its token, environment and the user sessions belong to."""

    slug = models.SlugField(_("标识 (URL 中使用)"), max_length=100, unique=True)
    name = models.CharField(_("名称"), max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("会话所有者"),
        on_delete=models.PROTECT,
        related_name="alertmanager_receivers",
    )
    environment = models.ForeignKey(
        Environment,
        verbose_name=_("环境"),
        on_delete=models.PROTECT,
        related_name="alertmanager_receivers",
    )
    token_hash = models.CharField(_("令牌哈希 (SHA-256)"), max_length=64, blank=True)
    language = models.CharField(_("问题与回答语言"), max_length=10, default="zh-CN")
    window_before_minutes = models.PositiveIntegerField(
        _("窗口起点 (告警开始前的分钟数)"), default=30
    )
    is_active = models.BooleanField(_("启用"), default=True)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("最近使用"), null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("Alertmanager 接收器")
        verbose_name_plural = pgettext_lazy("plural", "Alertmanager 接收器")

    def __str__(self) -> str:
        return self.name


class AlertGroupStart(models.Model):
    """A firing alert group that started a session; a repeat of it starts nothing new."""

    receiver = models.ForeignKey(
        AlertmanagerReceiver,
        verbose_name=_("Alertmanager 接收器"),
        on_delete=models.CASCADE,
        related_name="group_starts",
    )
    group_key = models.TextField(_("groupKey"))
    group_key_hash = models.CharField(_("groupKey 哈希"), max_length=64)
    starts_at = models.DateTimeField(_("最早开始时间"))
    session = models.ForeignKey(
        DiagnosisSession,
        verbose_name=_("诊断会话"),
        on_delete=models.SET_NULL,
        related_name="alert_group_starts",
        null=True,
        blank=True,
    )
    notifications = models.PositiveIntegerField(_("收到通知次数"), default=1)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)
    last_seen_at = models.DateTimeField(_("最近通知"), auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("告警组")
        verbose_name_plural = pgettext_lazy("plural", "告警组")
        constraints = [
            models.UniqueConstraint(
                fields=["receiver", "group_key_hash", "starts_at"], name="alert_group_start_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.receiver_id} {self.group_key[:60]} @ {self.starts_at:%Y-%m-%dT%H:%M:%SZ}"
