"""Run a check in a forked child, as a Celery prefork child or a gunicorn worker runs."""

from __future__ import annotations

import os
from collections.abc import Callable


def forked_child_check(check: Callable[[], bool]) -> bool:
    """``check()`` as the child of a fork saw it (False if it raised)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        ok = False
        try:
            ok = check()
        finally:
            os.write(write_end, b"1" if ok else b"0")
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 1)
    os.close(read_end)
    os.waitpid(pid, 0)
    return answer == b"1"
