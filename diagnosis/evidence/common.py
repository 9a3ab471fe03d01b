"""Types shared by the evidence tools and their backends."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from diagnosis.evidence.timeutil import time_format

DEFAULT_WINDOW = timedelta(minutes=30)
# The baseline is the period right before the window: four windows long, at most two hours
# (or one window, when the window itself is longer than two hours).
BASELINE_FACTOR = 4
BASELINE_CAP = timedelta(hours=2)


class ToolFailure(Exception):
    """A failure the model can act on; becomes an invocation with status ``error``."""


class ToolTimeout(Exception):
    """The backend ran past the tool timeout; becomes an invocation with status ``timeout``."""


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() value
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(at=time.monotonic() + seconds, seconds=seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise ToolTimeout(f"the backend did not answer within {self.seconds:g}s")


@dataclass(frozen=True)
class QueryWindow:
    start: datetime
    end: datetime
    baseline_start: datetime

    @property
    def baseline_end(self) -> datetime:
        return self.start

    @classmethod
    def around(cls, *, start: datetime, end: datetime) -> QueryWindow:
        length = end - start
        baseline = min(length * BASELINE_FACTOR, max(length, BASELINE_CAP))
        return cls(start=start, end=end, baseline_start=start - baseline)

    def as_dict(self) -> dict[str, str]:
        return {"start": time_format(self.start), "end": time_format(self.end)}

    def baseline_dict(self) -> dict[str, str]:
        return {"start": time_format(self.baseline_start), "end": time_format(self.baseline_end)}

    def describe(self) -> str:
        return (
            f"window {time_format(self.start)} to {time_format(self.end)}; "
            f"baseline {time_format(self.baseline_start)} to {time_format(self.baseline_end)}"
        )


@dataclass
class BackendOutput:
    status: str  # "ok" or "no_data"
    output: str
    summary: dict[str, Any] = field(default_factory=dict)


def num_format(value: float | None) -> str:
    """A short, stable rendering of a measurement (no exponent for ordinary magnitudes)."""
    if value is None:
        return "n/a"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    magnitude = abs(value)
    if magnitude >= 100_000:
        text = f"{value:.0f}"
    elif magnitude >= 100:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    elif magnitude >= 0.001:
        text = f"{value:.4g}"
        return text if "e" not in text else f"{value:.6f}".rstrip("0").rstrip(".")
    elif magnitude == 0:
        return "0"
    else:
        return f"{value:.3e}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def num_value(value: float | None) -> float | None:
    """The number as shown (so summary values equal what the output says)."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return float(num_format(value))
