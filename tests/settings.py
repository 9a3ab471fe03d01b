"""Test settings: production settings with eager Celery and fast hashing."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")

from config.settings import *  # noqa: F403

CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# The fake Prometheus answers of the tests read series, they evaluate no PromQL: the fleet view
# reads every series unless a test ranks in a real engine (tests/evidence/test_prometheus_backend).
METRICS_ENGINE_RANK_MIN_SERIES = 0
