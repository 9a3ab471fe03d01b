"""Rootproof settings, read from the environment (see README, Configuration)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from config.env import (
    env_bool,
    env_choice,
    env_database,
    env_float,
    env_int,
    env_list,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("ROOTPROOF_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY: must be set when DEBUG is off")
    SECRET_KEY = "dev-only-insecure-key-never-use-in-production"  # noqa: S105

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "diagnosis",
    "chat",
    "audit",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "config.middleware.PreferredLanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes requires: it turns a lockout into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'rootproof.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes first: it refuses a locked-out username+IP before a password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:conversation_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "zh-hans"
LANGUAGES = [("zh-hans", _("简体中文")), ("en", _("English"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 1_048_576, minimum=1024)

# TLS: behind a TLS-terminating proxy set SECURE_TLS=true.
SECURE_TLS = env_bool("SECURE_TLS", False)
SESSION_COOKIE_SECURE = SECURE_TLS
CSRF_COOKIE_SECURE = SECURE_TLS
SECURE_SSL_REDIRECT = SECURE_TLS
# Load balancers probe over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0) if SECURE_TLS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_TLS
SECURE_HSTS_PRELOAD = SECURE_TLS and env_bool("SECURE_HSTS_PRELOAD", True)
if SECURE_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
# htmx sends the token from the page (hx-headers), so no script needs the cookie.
CSRF_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 12 * 3600, minimum=300)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp): only the site's own scripts and styles, no inline
# code. The Swagger UI page (/api/docs/) widens style-src for itself only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
        "base-uri": [SELF],
        "object-src": [NONE],
    }
}

# Login throttling (django-axes): this many failed logins for one username from one IP
# lock that pair out for AXES_COOLOFF_MINUTES; a successful login resets the count.
AXES_ENABLED = env_bool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# Behind N reverse proxies, the client address is read from X-Forwarded-For (config.client_ip).
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=10)
AXES_CLIENT_IP_CALLABLE = "config.client_ip.client_ip"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
AXES_SENSITIVE_PARAMETERS = ["password", "api_key", "token", "key", "secret"]

# --- Celery -----------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # An unacknowledged task (its worker died) is redelivered after this many seconds;
    # keep it above CELERY_TASK_TIME_LIMIT.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1)
    }
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "rootproof")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 660, minimum=1)
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Diagnosis flow ---------------------------------------------------------
DIAGNOSIS_MAX_RETRIES = env_int("DIAGNOSIS_MAX_RETRIES", 1, minimum=0, maximum=5)
DIAGNOSIS_DEFAULT_ENVIRONMENT = env_str("DIAGNOSIS_DEFAULT_ENVIRONMENT", "payment-pool-saturation")
# A running session whose heartbeat is older than this is presumed orphaned.
DIAGNOSIS_STALE_AFTER_SECONDS = env_int("DIAGNOSIS_STALE_AFTER_SECONDS", 900, minimum=30)
DIAGNOSIS_HISTORY_MAX_CHARS = env_int("DIAGNOSIS_HISTORY_MAX_CHARS", 4000, minimum=0)
# The Verifier reads the raw Executor answer; a runaway answer is cut (head and tail kept).
DIAGNOSIS_VERIFIER_ANSWER_MAX_CHARS = env_int(
    "DIAGNOSIS_VERIFIER_ANSWER_MAX_CHARS", 20_000, minimum=1000
)
SCENARIO_PACK_DIRS = [
    Path(p) for p in env_list("SCENARIO_PACK_DIRS", [str(BASE_DIR / "scenarios")])
]

# --- Evidence tools ---------------------------------------------------------
TOOL_TIMEOUT_SECONDS = env_float("TOOL_TIMEOUT_SECONDS", 15.0, minimum=0.1)
TOOL_OUTPUT_MAX_CHARS = env_int("TOOL_OUTPUT_MAX_CHARS", 16_000, minimum=1000)
# A fleet-wide query_metrics on Prometheus over at least this many series is ranked in the
# engine, only its candidates read (0: every series is always read).
METRICS_ENGINE_RANK_MIN_SERIES = env_int("METRICS_ENGINE_RANK_MIN_SERIES", 2000, minimum=0)
# Threads one query_logs scan of a big pack file uses; 0: the cores the process may use.
# With Celery concurrency N on C cores, C / N keeps busy workers from running N x C threads.
LOG_SCAN_WORKERS = env_int("LOG_SCAN_WORKERS", 0, minimum=0, maximum=256)
TRACE_SUMMARY_TOKEN_BUDGET = env_int("TRACE_SUMMARY_TOKEN_BUDGET", 3000, minimum=200)
# query_traces refuses a pack's trace files past this many bytes (on disk, and read
# uncompressed): a clear error instead of a call that cannot end within its timeout.
TRACE_FILES_MAX_BYTES = env_int("TRACE_FILES_MAX_BYTES", 4 * 1024**3, minimum=1024)
# PromQL whose result series name caller and callee in their labels (source/destination,
# client/server, caller/callee, src/dst…): a live environment's call edges for localisation.
CALL_EDGES_QUERY = env_str("CALL_EDGES_QUERY")

# --- LLM providers ----------------------------------------------------------
LLM_ROLES = ("planner", "executor", "verifier", "composer")
LLM_PROVIDERS = ("offline", "openai", "scripted")
LLM_PROVIDER = env_choice("LLM_PROVIDER", "offline", LLM_PROVIDERS)
LLM_BASE_URL = env_str("LLM_BASE_URL")
LLM_API_KEY = env_str("LLM_API_KEY")
LLM_MODEL = env_str("LLM_MODEL", "gpt-4o-mini")
LLM_TIMEOUT_SECONDS = env_float("LLM_TIMEOUT_SECONDS", 60.0, minimum=0.1)
# How many of an environment's services a model prompt lists (the rest are counted).
LLM_PROMPT_SERVICES_MAX = env_int("LLM_PROMPT_SERVICES_MAX", 200, minimum=1)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 3, minimum=0, maximum=10)
# Output budget per call when a role sets none (LLM_<ROLE>_MAX_TOKENS below).
LLM_MAX_TOKENS = env_int("LLM_MAX_TOKENS", 4096, minimum=64)
# Sized to each contract: a plan is a few lines, an evidence report a few claims with
# bindings, a verdict one check per claim, an answer a page of Markdown (Chinese costs
# about a token a character). LLM_MAX_TOKENS, when set, replaces all four defaults.
# The schema sent for structured output is bounded to fit the budget (every list a
# maxItems, every free string a maxLength: diagnosis.llm.schemas.bounded_schema), so a
# grammar-constrained server closes the answer in time; a smaller budget, shorter strings.
LLM_ROLE_MAX_TOKENS_DEFAULTS = {
    "planner": 512,
    "executor": 2048,
    "verifier": 1024,
    "composer": 1536,
}
LLM_TEMPERATURE = env_float("LLM_TEMPERATURE", 0.0, minimum=0.0)
LLM_EXECUTOR_MAX_TOOL_ROUNDS = env_int("LLM_EXECUTOR_MAX_TOOL_ROUNDS", 8, minimum=1, maximum=50)
# tool_choice sent with the tools: auto, required (first Executor turn only; later turns
# are auto so the model can stop) or none (tools listed but never called).
LLM_TOOL_CHOICES = ("auto", "required", "none")
LLM_TOOL_CHOICE = env_choice("LLM_TOOL_CHOICE", "auto", LLM_TOOL_CHOICES)
# Where the ladder of structured output starts: json_schema (the contract's schema),
# json_object, or none (plain prompting). A server that refuses a level is asked with the
# next one, and the refusal is remembered per endpoint for the process.
LLM_RESPONSE_FORMATS = ("json_schema", "json_object", "none")
LLM_RESPONSE_FORMAT = env_choice("LLM_RESPONSE_FORMAT", "json_schema", LLM_RESPONSE_FORMATS)
# Whether the schema sent for structured output is bounded to the call's budget (every list
# a maxItems, every free string a maxLength, sized so the worst case fits max_tokens):
# "fit" for small local models that otherwise ramble inside a JSON string until the budget
# cuts the answer (a grammar-constrained server then always closes it); "off" (default)
# sends the contract's schema as it is, for models that answer within any sane budget,
# whose claims and excerpts such bounds would only shorten.
LLM_SCHEMA_BOUNDS_CHOICES = ("fit", "off")
LLM_SCHEMA_BOUNDS = env_choice("LLM_SCHEMA_BOUNDS", "off", LLM_SCHEMA_BOUNDS_CHOICES)
# How tool results go back to the model: as `tool` messages (the OpenAI protocol), or as
# `user` messages, for servers whose chat template drops tool messages (llama-cpp-python's
# chatml-function-calling format does).
LLM_TOOL_RESULT_ROLES = ("tool", "user")
LLM_TOOL_RESULT_ROLE = env_choice("LLM_TOOL_RESULT_ROLE", "tool", LLM_TOOL_RESULT_ROLES)
LLM_ROLE_SETTINGS = {
    role: {
        "provider": env_choice(f"LLM_{role.upper()}_PROVIDER", LLM_PROVIDER, LLM_PROVIDERS),
        "base_url": env_str(f"LLM_{role.upper()}_BASE_URL", LLM_BASE_URL),
        "api_key": env_str(f"LLM_{role.upper()}_API_KEY", LLM_API_KEY),
        "model": env_str(f"LLM_{role.upper()}_MODEL", LLM_MODEL),
        "max_tokens": env_int(
            f"LLM_{role.upper()}_MAX_TOKENS",
            LLM_MAX_TOKENS if env_str("LLM_MAX_TOKENS") else LLM_ROLE_MAX_TOKENS_DEFAULTS[role],
            minimum=64,
        ),
        "tool_choice": env_choice(
            f"LLM_{role.upper()}_TOOL_CHOICE", LLM_TOOL_CHOICE, LLM_TOOL_CHOICES
        ),
        "response_format": env_choice(
            f"LLM_{role.upper()}_RESPONSE_FORMAT", LLM_RESPONSE_FORMAT, LLM_RESPONSE_FORMATS
        ),
        "tool_result_role": env_choice(
            f"LLM_{role.upper()}_TOOL_RESULT_ROLE", LLM_TOOL_RESULT_ROLE, LLM_TOOL_RESULT_ROLES
        ),
        "schema_bounds": env_choice(
            f"LLM_{role.upper()}_SCHEMA_BOUNDS", LLM_SCHEMA_BOUNDS, LLM_SCHEMA_BOUNDS_CHOICES
        ),
    }
    for role in LLM_ROLES
}

# --- API --------------------------------------------------------------------
# Requests per API key (or Alertmanager receiver, or browser user): "<n>/<sec|min|hour|day>".
API_RATE_LIMIT = env_str("API_RATE_LIMIT", "120/min")
# A body whose Content-Length exceeds this is refused with 413 before it is read.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1_048_576, minimum=1024)
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 20, minimum=1, maximum=100)
API_PAGE_SIZE_MAX = env_int("API_PAGE_SIZE_MAX", 100, minimum=1, maximum=1000)
API_QUESTION_MAX_CHARS = env_int("API_QUESTION_MAX_CHARS", 4000, minimum=100)
API_CALLBACK_TIMEOUT_SECONDS = env_float("API_CALLBACK_TIMEOUT_SECONDS", 10.0, minimum=0.1)
API_CALLBACK_MAX_ATTEMPTS = env_int("API_CALLBACK_MAX_ATTEMPTS", 5, minimum=1, maximum=20)
# Wait before the 2nd attempt; it doubles after each failure (capped at one hour).
# Callbacks to private/loopback addresses are refused unless this is on (trusted networks).
API_CALLBACK_ALLOW_PRIVATE = env_bool("API_CALLBACK_ALLOW_PRIVATE", False)
API_CALLBACK_BACKOFF_SECONDS = env_int("API_CALLBACK_BACKOFF_SECONDS", 30, minimum=1)
# Each label or annotation value used in an alert's question is cut to this length.
ALERTMANAGER_TEXT_MAX_CHARS = env_int("ALERTMANAGER_TEXT_MAX_CHARS", 300, minimum=20)

# The one writer of audit events, which the core's services reach without importing the
# audit app (diagnosis/audit_trail.py).
AUDIT_EVENT_RECORDER = "audit.services.audit_event_record"

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "diagnosis.api.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["diagnosis.api.auth.ApiKeyRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "diagnosis.api.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Rootproof API",
    "DESCRIPTION": "Evidence-bound incident diagnosis. Authenticate with "
    "`Authorization: Bearer <API key>` (create keys at POST /api/v1/api-keys) or a browser "
    'session with CSRF. Every error is `{"error": {"code", "message", "details"}}`.',
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "diagnosis.api.serializers.strict_request_bodies",
        "diagnosis.api.schema.links_and_rate_limit_headers",
    ],
    "ENUM_NAME_OVERRIDES": {
        "DiagnosisStatusEnum": "diagnosis.models.DiagnosisSession.Status",
        "DiagnosisStageEnum": "diagnosis.models.DiagnosisSession.Stage",
        "DiagnosisSourceEnum": "diagnosis.models.DiagnosisSession.Source",
        "DiagnosisDecisionEnum": "diagnosis.models.DiagnosisSession.Decision",
        "AlertStatusEnum": ["firing", "resolved"],
    },
}

# API and login rate limits count in this cache: with several web processes set
# CACHE_URL=redis://… so they share one count (the default counts per process).
CACHE_URL = env_str("CACHE_URL")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL.startswith(("redis://", "rediss://"))
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"jieba": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}
