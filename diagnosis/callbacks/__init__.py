"""Callbacks: when an API-submitted diagnosis ends, its result is POSTed, signed, to the
integrator's callback URL, with retries.

``services`` holds the hook every way of ending a session calls (it only queues the task,
by its registered name, so ending a session never imports the delivery machinery);
``delivery`` makes one attempt and records it; ``tasks`` is the Celery task that runs an
attempt and queues the next one.
"""
