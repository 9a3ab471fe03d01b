"""bench/flow.py --per-call-client: a Celery worker's live backends call ``httpx.get`` for
every call again, as before the shared client (commit dd07fc1), for comparison.

Put on a worker's PYTHONPATH only (Python imports ``sitecustomize`` at start-up). The
patch is made in each pool process once it starts: Django is not set up yet when this
module runs, so the evidence modules cannot be imported here.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import httpx
from celery.signals import worker_process_init


@worker_process_init.connect
def _per_call_client(**_: Any) -> None:
    http: Any = importlib.import_module("diagnosis.evidence.http")
    # What backend_get called before the shared client: a new client per GET.
    http.http_client = lambda: SimpleNamespace(get=httpx.get)
