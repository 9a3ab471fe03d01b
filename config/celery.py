import os
from pathlib import Path

from celery import Celery, Task
from celery.signals import after_setup_logger, task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("rootproof")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["diagnosis.callbacks"])  # its tasks module: the callback's task

# A worker keeps its database connection from task to task, as a web process keeps it
# from request to request: Django's CONN_MAX_AGE and CONN_HEALTH_CHECKS decide, checked
# at each task's start and end (below). Celery's Django fixup otherwise closes it after
# every task, and a new PostgreSQL connection (a backend process, cold catalog caches)
# is most of the time between one session's end and the next one's start (bench/flow.py
# at latency 0, one worker: 15-30 ms without, 7-11 ms with). The fixup closes per task
# because a connection broken mid-query (a time limit's signal) can look usable; the
# health check's SELECT 1 at a task's first query finds it. The count (the fixup closes
# after this many tasks) is no limit: the age and the health check are.
app.conf["CELERY_DB_REUSE_MAX"] = 1_000_000

app.conf.beat_schedule = {
    "reap-stale-sessions": {"task": "diagnosis.reap_stale", "schedule": 60.0},
}


def broker_folders_ensure() -> None:
    """The filesystem transport needs its folders before a worker or a producer starts."""
    options = app.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


def task_enqueue(name: str, *args: object, countdown: int = 0) -> None:
    """Enqueue the registered task ``name`` (eager under ``task_always_eager``).

    Services enqueue by name instead of importing the task module, which imports
    them; ``countdown`` delays the run by that many seconds.
    """
    task = app.tasks[name]
    if countdown:
        task.apply_async(args, countdown=countdown)
    else:
        task.delay(*args)


@app.on_after_configure.connect
def _on_configure(sender: Celery, **kwargs: object) -> None:
    broker_folders_ensure()


@app.on_after_finalize.connect
def _tasks_import(sender: Celery, **kwargs: object) -> None:
    """Register the project's tasks in every process, not only in workers.

    Services enqueue a task by its registered name (``task_enqueue``) rather than
    importing the task module (which imports them); this makes the name resolve
    in a web process too, and an eager test run stays eager.
    """
    sender.loader.import_default_modules()


@after_setup_logger.connect
def _on_worker_logging(*args: object, **kwargs: object) -> None:
    broker_folders_ensure()


@task_prerun.connect
@task_postrun.connect
def _connections_recycle(sender: Task | None = None, **kwargs: object) -> None:
    """Close a connection that is too old or fails its health check, as Django does at
    each request's start and end (an eager task runs inside its caller's connection)."""
    if sender is not None and not getattr(sender.request, "is_eager", False):
        close_old_connections()
