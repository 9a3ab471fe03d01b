"""Types shared by the evidence tools and their backends."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
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
    at: float  # ``clock()`` value
    seconds: float
    # The clock ``at`` is read on (time.monotonic; a test passes its own, so no test waits).
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(at=clock() + seconds, seconds=seconds, clock=clock)

    def remaining(self) -> float:
        return self.at - self.clock()

    def check(self) -> None:
        if self.clock() > self.at:
            raise ToolTimeout(f"the backend did not answer within {self.seconds:g}s")

    def share(self, fraction: float) -> Deadline:
        """A stage's deadline: ``fraction`` of the call's time, counted from the call's start,
        so a stage that ends early leaves its time to the next, and one that runs late stops
        where its share ends, never past this deadline."""
        start = self.at - self.seconds
        return Deadline(
            at=min(start + fraction * self.seconds, self.at),
            seconds=fraction * self.seconds,
            clock=self.clock,
        )


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


def clamp_record(
    clamps: dict[str, dict[str, Any]], name: str, *, given: Any, used: Any, why: str
) -> None:
    """Note that argument ``name`` was used as ``used`` instead of ``given`` (and why)."""
    clamps[name] = {"given": given, "used": used, "reason": why}


def clamp_lines(clamps: dict[str, Any]) -> list[str]:
    """One line per clamped argument (items that are not clamp records are skipped)."""
    return [
        f"clamped: {name} given {item.get('given')}, used {item.get('used')} ({item.get('reason')})"
        for name, item in clamps.items()
        if isinstance(item, dict)
    ]


def clamps_apply(result: BackendOutput, clamps: dict[str, dict[str, Any]]) -> BackendOutput:
    """State the clamps in the output (after its first line) and in ``summary["clamped"]``."""
    if not clamps:
        return result
    head, _, rest = result.output.partition("\n")
    output = "\n".join([head, *clamp_lines(clamps), *([rest] if rest else [])])
    return BackendOutput(
        status=result.status, output=output, summary={**result.summary, "clamped": clamps}
    )


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
        # Fixed point with three significant digits: an exponent would split the number.
        digits = min(-math.floor(math.log10(magnitude)) + 2, 15)
        text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
        return text if text not in {"-0", ""} else "0"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def num_value(value: float | None) -> float | None:
    """The number as shown (so summary values equal what the output says)."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return float(num_format(value))


_BINARY_PREFIXES = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DURATIONS = ((3600.0, "h"), (60.0, "min"), (1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _three_digits(value: float) -> str:
    magnitude = abs(value)
    text = (
        f"{value:.0f}"
        if magnitude >= 100
        else f"{value:.1f}"
        if magnitude >= 10
        else f"{value:.2f}"
    )
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def quantity_format(value: float, unit: str) -> str:
    """``value`` (in ``bytes``, ``bytes/s`` or ``seconds``) in human units: 1.95 GiB, 230 ms.

    "" for other units, zero and non-finite values (the raw number says it all).
    """
    if not math.isfinite(value) or value == 0 or unit not in {"bytes", "bytes/s", "seconds"}:
        return ""
    magnitude = abs(value)
    if unit == "seconds":
        for size, name in _DURATIONS:
            if magnitude >= size or size == _DURATIONS[-1][0]:
                return f"{_three_digits(value / size)} {name}"
    index = 0
    while magnitude >= 1024 and index < len(_BINARY_PREFIXES) - 1:
        magnitude /= 1024
        index += 1
    suffix = "/s" if unit == "bytes/s" else ""
    return f"{_three_digits(value / 1024**index)} {_BINARY_PREFIXES[index]}{suffix}"
