"""Schemathesis CLI hooks for a run against the served API (``SCHEMATHESIS_HOOKS``).

The world the run meets is read from the file ``ROOTPROOF_SERVED_WORLD`` names (what
``tests.api.served.world_seed`` wrote): every request is aimed at it before it is sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import schemathesis
from schemathesis.generation.case import Case

from tests.api.served import case_aim

WORLD = json.loads(Path(os.environ["ROOTPROOF_SERVED_WORLD"]).read_text(encoding="utf-8"))


@schemathesis.hook
def before_call(context: Any, case: Case, **kwargs: Any) -> None:
    case_aim(
        case,
        run_key_id=WORLD["key_id"],
        decoy_key_id=WORLD["decoy_id"],
        receiver=WORLD["receiver"],
    )
