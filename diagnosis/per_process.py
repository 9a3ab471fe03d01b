"""Values built once per process and kept for it: network clients shared by its threads.

A client built before a fork (a Celery prefork child, a gunicorn ``--preload`` worker)
holds the parent's sockets and TLS state; a child sharing it would write on the same
connections as its parent and its siblings. So the cache is keyed by process id: a child
finds its parent's values under another pid and builds its own, the parent keeps its own.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Hashable
from typing import Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class _ProcessValues(Generic[R]):
    """One process's values. Its lock is its own: a child never takes a lock its parent
    held at the fork (another thread's, it would stay held in the child for ever)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.values: dict[Hashable, R] = {}
        self.lock = threading.Lock()


def per_process(*, maxsize: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``build``'s value for the same arguments, built once per process.

    At most ``maxsize`` values; past it the oldest is dropped (not closed: a caller may
    still hold it). Two threads racing on a fresh child's first call may each build a
    value; one is kept, the other used once.
    """

    def decorate(build: Callable[P, R]) -> Callable[P, R]:
        current: list[_ProcessValues[R]] = [_ProcessValues()]

        @functools.wraps(build)
        def cached(*args: P.args, **kwargs: P.kwargs) -> R:
            mine = current[0]
            if mine.pid != os.getpid():
                mine = _ProcessValues()
                current[0] = mine
            key = (args, tuple(sorted(kwargs.items())))
            found = mine.values.get(key)
            if found is not None:
                return found
            with mine.lock:
                found = mine.values.get(key)
                if found is None:
                    found = build(*args, **kwargs)
                    if len(mine.values) >= maxsize:
                        del mine.values[next(iter(mine.values))]
                    mine.values[key] = found
            return found

        return cached

    return decorate
