"""``python -m llama_cpp.server``, with the prompt of ``chatml-function-calling`` left as sent.

llama-cpp-python 0.3.36 renders that chat format's template with HTML autoescaping on
(``jinja2.select_autoescape`` on a template from a string escapes), so every ``"`` of a
message reaches the model as ``&#34;``: a JSON payload grows by a third in tokens and a
small model copies the entities into its answers. This runs the same server with
autoescaping off; the arguments are the server's own.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable

import jinja2


def _no(_template_name: str | None = None) -> bool:
    return False


def _never_escape(*_args: object, **_kwargs: object) -> Callable[[str | None], bool]:
    return _no


if __name__ == "__main__":
    jinja2.select_autoescape = _never_escape  # read by llama_chat_format at each request
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
