"""Stopping a server a test started: one way for every real server the tests run."""

from __future__ import annotations

import subprocess


def process_stop(process: subprocess.Popen[bytes], *, grace_seconds: float = 20) -> None:
    """SIGTERM, then SIGKILL if the server has not ended within ``grace_seconds``; always
    reaped, so no zombie or listening port outlives the test."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace_seconds)
