"""Scenario packs written differently: the same incident, other names, times and samples.

Each transform rewrites a copied pack in place and changes how the incident is written,
not what happened in it; a diagnosis that generalises gives the same answer. Shared by
bench/robustness.py (the figures per transform) and tests/llm_offline/test_offline_robustness.py.

- ``services``: every service renamed to a neutral token, consistently in metrics, logs,
  log file names, topology, knowledge and scenario.yaml;
- ``metrics``: request, latency and availability metrics renamed to another naming
  scheme, and the ``statistic`` label renamed (values kept);
- ``time``: every timestamp shifted by a random number of days and hours (window, now,
  question and title, samples, log lines);
- ``sparse``: a share of the samples of every series dropped (AMOUNTS["drop"]);
- ``noise``: every gauge sample multiplied by a random factor in 1 ± AMOUNTS["noise"];
  counters get the factor on each increment (a factor on the running total would turn
  it into resets no real counter shows); a share (a ``_percent`` or ``_ratio`` gauge in
  its range) gets it on its distance to the nearer end of its range (``_share_noisy``);
- ``instances``: every service runs three instances (a ``pod``, ``instance`` or
  ``k8s_pod_name`` label, picked by the seed); the root cause's fault is on one of them,
  the other two carry its own baseline on;
- ``step15s`` / ``step5m``: the samples at another interval (15 s: linear interpolation
  inside gaps of at most 5 minutes; 5 minutes: only the samples on 5-minute marks — the
  PetShop packs are sampled so already);
- ``resets``: every counter restarts from zero once, at a random sample (a process
  restart), as ``rate()`` has to read;
- ``latency_only``: every series of the root cause but its latency carries its own
  baseline on, so its only changed series is its latency (logs as they were); a pack
  whose root's latency never moved is left as it is (the root would vanish);
- ``skew``: one service's clock (picked by the seed, the root cause or another) one of
  its sample intervals early or late, its metrics and its logs;
- ``family``: one metric family (picked by the seed among those the root cause reports)
  missing from the whole pack;
- ``no_topology``: nothing declares the calls: no topology.json, no traces, and no series
  whose labels name a call (a caller/callee pair, ``call_label_pairs``, or a client-side
  series' peer, ``PEER_LABELS``); logs as they were.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from diagnosis.evidence.tools.query_metrics.series import (
    RawSeries,
    declared_type_of,
    is_counter,
)
from diagnosis.evidence.tools.query_metrics.statistics import upper_bound
from diagnosis.evidence.topology import call_label_pairs
from diagnosis.evidence.vocab import PEER_LABELS, metric_kind


def vocab_metric_kind(family: str) -> str:
    """The product's own reading of a family's kind (latency, errors, resource, ...)."""
    return metric_kind(family, {})[0]


# How much the sparse and noise transforms take away (the bench sets them from its options).
AMOUNTS = {"drop": 0.3, "noise": 0.1}

# Another naming scheme for the request, latency and availability families (OpenMetrics
# family names: the _total/_sum/_count/_bucket suffixes follow the family).
METRIC_RENAMES = {
    "petshop_latency_seconds": "service_response_time_seconds",
    "petshop_requests": "service_request_count",
    "petshop_availability_percent": "service_success_rate_percent",
    "http_request_duration_seconds": "service_response_time_seconds",
    "http_requests": "service_request_count",
    "http_client_request_duration_seconds": "outbound_call_time_seconds",
    "http_client_requests": "outbound_call_count",
}
LABEL_RENAMES = {"statistic": "aggregation"}

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+(\S+))?\s*$")
_TYPE = re.compile(r"^# TYPE (\S+) (\S+)", re.M)
_SERVICE_LABEL = re.compile(r'[{,]service="([^"]*)"')
_CUMULATIVE_SUFFIXES = ("_total", "_sum", "_count", "_bucket", "_created")
# ISO stamps as packs write them: date, T or space, time, optional fraction and zone.
_ISO = r"(\d{4}-\d{2}-\d{2})([T ])(\d{2}:\d{2})(:\d{2})?([.,]\d+)?(Z|[+-]\d{2}:?\d{2})?"
_CLOCK_CJK = r"(?:凌晨|早上|上午|中午|下午|晚上)?\s*(\d{1,2})\s*点\s*(?:(\d{1,2})\s*分)?"
_CLOCK = r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])"
_ISO_ONLY = re.compile(_ISO)
_ANY_TIME = re.compile(f"{_ISO}|{_CLOCK_CJK}|{_CLOCK}")


def _text_files(pack: Path) -> list[Path]:
    return [p for p in sorted(pack.rglob("*")) if p.is_file()]


def _rewrite(path: Path, change: Callable[[str], str]) -> None:
    if path.suffix == ".gz":  # traces/*.jsonl.gz: the same text, compressed
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        path.write_bytes(gzip.compress(change(text).encode("utf-8"), mtime=0))
        return
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")


_SPAN_NANOS = re.compile(r'("(?:start|end)TimeUnixNano"\s*:\s*"?)(\d+)')


# --- services -------------------------------------------------------------------------


def _services_of(pack: Path) -> set[str]:
    """Every service name the pack uses: scenario.yaml, labels, log streams, topology."""
    scenario = yaml.safe_load((pack / "scenario.yaml").read_text(encoding="utf-8"))
    names = set(scenario.get("services") or [])
    names.add((scenario.get("expected") or {}).get("root_cause_service") or "")
    for om in pack.glob("metrics/*.om"):
        names.update(_SERVICE_LABEL.findall(om.read_text(encoding="utf-8")))
    for log in pack.glob("logs/*.jsonl"):
        for line in log.read_text(encoding="utf-8").splitlines():
            if line.strip():
                names.add(str(json.loads(line).get("service") or ""))
    names.update(log.stem for log in pack.glob("logs/*.log"))
    topology = pack / "topology.json"
    if topology.is_file():
        for edge in json.loads(topology.read_text(encoding="utf-8")).get("calls", []):
            names.update((edge["caller"], edge["callee"]))
    return {n for n in names if n}


def services_rename(*, pack: Path, rng: random.Random) -> None:
    names = sorted(_services_of(pack), key=lambda n: (-len(n), n))
    tokens = rng.sample(range(1000, 10000), len(names))
    mapping = {name: f"svc{token}" for name, token in zip(names, tokens, strict=True)}
    # Longest first, so a name inside a longer one (x, x-lambda) goes with the longer one;
    # a pod or host name that starts with a service's name follows it.
    pattern = re.compile(
        r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])"
    )
    for path in _text_files(pack):
        _rewrite(path, lambda text: pattern.sub(lambda m: mapping[m.group(1)], text))
        if path.stem in mapping and path.parent.name in ("logs", "metrics"):
            path.rename(path.with_name(mapping[path.stem] + path.suffix))


# --- metric names ---------------------------------------------------------------------


def metrics_rename(*, pack: Path, rng: random.Random) -> None:
    del rng  # one fixed scheme: the point is a scheme other than the packs' own
    families = "|".join(map(re.escape, sorted(METRIC_RENAMES, key=len, reverse=True)))
    suffixes = "|".join(_CUMULATIVE_SUFFIXES)
    family = re.compile(rf"(?<![A-Za-z0-9_:])({families})(?=(?:{suffixes})?(?![A-Za-z0-9_:]))")
    labels = re.compile(r"(?<=[{,])(" + "|".join(LABEL_RENAMES) + r")(?==)")

    def change(text: str) -> str:
        text = family.sub(lambda m: METRIC_RENAMES[m.group(1)], text)
        return labels.sub(lambda m: LABEL_RENAMES[m.group(1)], text)

    for path in _text_files(pack):
        if path.suffix in (".om", ".md", ".yaml", ".json", ".jsonl", ".log"):
            _rewrite(path, change)


# --- time -----------------------------------------------------------------------------


def _iso_shift(match: re.Match[str], offset: timedelta) -> str:
    date, sep, hm, sec, frac, zone = match.groups()[:6]
    moment = datetime.fromisoformat(f"{date}T{hm}{sec or ''}") + offset
    text = moment.strftime("%Y-%m-%d") + sep + moment.strftime("%H:%M")
    return text + (moment.strftime(":%S") if sec else "") + (frac or "") + (zone or "")


def _clock_shift(hour: int, minute: int, offset: timedelta) -> str:
    moment = datetime(2000, 1, 1, hour % 24, minute) + offset
    return moment.strftime("%H:%M")


def _any_time_shift(match: re.Match[str], offset: timedelta) -> str:
    if match.group(1):
        return _iso_shift(match, offset)
    if match.group(7):
        return _clock_shift(int(match.group(7)), int(match.group(8) or 0), offset)
    return _clock_shift(int(match.group(9)), int(match.group(10)), offset)


def _json_shift(value: Any, offset: timedelta) -> Any:
    if isinstance(value, str):
        return _ISO_ONLY.sub(lambda m: _iso_shift(m, offset), value)
    if isinstance(value, dict):
        return {k: _json_shift(v, offset) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_shift(v, offset) for v in value]
    return value


def _jsonl_shift(text: str, offset: timedelta) -> str:
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = _json_shift(json.loads(line), offset)
        if isinstance(record.get("ts"), int | float) and not isinstance(record["ts"], bool):
            record["ts"] = record["ts"] + int(offset.total_seconds())
        lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def _om_lines_map(text: str, change: Callable[[re.Match[str]], str | None]) -> str:
    """Every sample line through ``change`` (None drops it); comments stay as they are."""
    out = []
    for line in text.splitlines():
        match = None if line.startswith("#") else _SAMPLE.match(line)
        kept = line if match is None else change(match)
        if kept is not None:
            out.append(kept)
    return "\n".join(out) + "\n"


def _sample_line(match: re.Match[str], *, value: str, stamp: str | None) -> str:
    line = f"{match.group(1)}{match.group(2) or ''} {value}"
    return f"{line} {stamp}" if stamp else line


def _stamp_shift(stamp: str | None, seconds: int) -> str | None:
    if stamp is None:
        return None
    return str(int(stamp) + seconds) if stamp.isdigit() else repr(float(stamp) + seconds)


def times_shift(*, pack: Path, rng: random.Random) -> None:
    offset = timedelta(days=rng.randint(1, 400), hours=rng.randint(1, 23))
    seconds = int(offset.total_seconds())
    for path in _text_files(pack):
        if path.parent.name == "metrics" and path.suffix == ".om":
            _rewrite(
                path,
                lambda text: _om_lines_map(
                    text,
                    lambda m: _sample_line(
                        m, value=m.group(3), stamp=_stamp_shift(m.group(4), seconds)
                    ),
                ),
            )
        elif path.parent.name == "traces":
            _rewrite(
                path,
                lambda text: _SPAN_NANOS.sub(
                    lambda m: m.group(1) + str(int(m.group(2)) + seconds * 1_000_000_000), text
                ),
            )
        elif path.parent.name == "logs" and path.suffix == ".jsonl":
            _rewrite(path, lambda text: _jsonl_shift(text, offset))
        elif path.parent.name == "logs":
            _rewrite(path, lambda text: _ISO_ONLY.sub(lambda m: _iso_shift(m, offset), text))
    _scenario_times_shift(pack=pack, offset=offset)


def _scenario_times_shift(*, pack: Path, offset: timedelta) -> None:
    """now and window shifted; the question and title also say times of day (10:20, 3 点 10 分)."""
    text = (pack / "scenario.yaml").read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):  # written as JSON (generated packs): field by field
        data = json.loads(text)
        for key, value in data.items():
            if key in ("question", "title") and isinstance(value, str):
                data[key] = _ANY_TIME.sub(lambda m: _any_time_shift(m, offset), value)
            else:
                data[key] = _json_shift(value, offset)
        (pack / "scenario.yaml").write_text(json.dumps(data, ensure_ascii=False), "utf-8")
        return
    lines = []
    for line in (pack / "scenario.yaml").read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*(question|title):", line):
            line = _ANY_TIME.sub(lambda m: _any_time_shift(m, offset), line)
        else:
            line = _ISO_ONLY.sub(lambda m: _iso_shift(m, offset), line)
        lines.append(line)
    (pack / "scenario.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- samples --------------------------------------------------------------------------


def _series_key(match: re.Match[str]) -> str:
    return match.group(1) + (match.group(2) or "")


def samples_thin(*, pack: Path, rng: random.Random) -> None:
    for path in sorted(pack.glob("metrics/*.om")):
        text = path.read_text(encoding="utf-8")
        positions: dict[str, list[int]] = defaultdict(list)
        for index, line in enumerate(text.splitlines()):
            match = None if line.startswith("#") else _SAMPLE.match(line)
            if match:
                positions[_series_key(match)].append(index)
        dropped = set()
        for indices in positions.values():
            dropped.update(rng.sample(indices, round(len(indices) * AMOUNTS["drop"])))
        lines = [line for i, line in enumerate(text.splitlines()) if i not in dropped]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _cumulative(name: str, types: dict[str, str]) -> bool:
    """Whether the product reads the series as a counter (query_metrics' own rule)."""
    series = RawSeries(name, {}, [], declared_type=declared_type_of(name, types))
    return is_counter(series)


def _share_noisy(name: str, value: float, factor: float) -> float | None:
    """A share's sample with measurement noise: the factor on its distance to the nearer
    end of its range; None when the sample is not a share (``upper_bound``'s reading).

    A share is a count of some events over a count of all of them (requests served over
    requests, bytes used over capacity); noise in counting moves the smaller part, the one
    the share's distance to its nearer end measures (an availability's failures), and a
    share with none of that part (100 %: no request failed) reads the same however noisy
    the counting, and never leaves its range. A factor on the whole share instead writes
    an availability of 100 % as 90–110 %, a reading no system shows.
    """
    upper = upper_bound(name, {}, [value])
    if upper is None:
        return None
    if value <= upper - value:
        return value * factor
    return upper - (upper - value) * factor


def _om_noise(text: str, rng: random.Random) -> str:
    types = {m.group(1): m.group(2) for m in _TYPE.finditer(text)}
    # series -> (last value as written, last value as rewritten), for counters
    last: dict[str, tuple[float, float]] = {}

    def change(match: re.Match[str]) -> str:
        value = float(match.group(3))
        factor = rng.uniform(1 - AMOUNTS["noise"], 1 + AMOUNTS["noise"])
        key = _series_key(match)
        if not _cumulative(match.group(1), types):
            share = _share_noisy(match.group(1), value, factor)
            noisy = value * factor if share is None else share
            return _sample_line(match, value=repr(noisy), stamp=match.group(4))
        before = last.get(key)
        if before is None or value < before[0]:
            noisy = value * factor
        else:
            noisy = before[1] + (value - before[0]) * factor
        last[key] = (value, noisy)
        return _sample_line(match, value=repr(noisy), stamp=match.group(4))

    return _om_lines_map(text, change)


def samples_noise(*, pack: Path, rng: random.Random) -> None:
    for path in sorted(pack.glob("metrics/*.om")):
        _rewrite(path, lambda text: _om_noise(text, rng))


# --- instances, intervals, resets, skew, families -------------------------------------


@dataclass
class _Sample:
    name: str
    labels: str  # as written, braces included ("" for none)
    value: float
    stamp: float | None


def _om_parse(text: str) -> tuple[list[str], dict[str, list[_Sample]]]:
    """The file's lines, a series' first sample line replaced by its key, and every
    series' samples in order."""
    order: list[str] = []
    series: dict[str, list[_Sample]] = defaultdict(list)
    for line in text.splitlines():
        match = None if line.startswith("#") else _SAMPLE.match(line)
        if match is None:
            order.append(line)
            continue
        key = _series_key(match)
        if key not in series:
            order.append("\0" + key)
        stamp = float(match.group(4)) if match.group(4) else None
        series[key].append(
            _Sample(match.group(1), match.group(2) or "", float(match.group(3)), stamp)
        )
    return order, series


def _om_write(order: list[str], series: dict[str, list[_Sample]]) -> str:
    """Every series' samples where its first one was (so a family stays under its TYPE)."""
    out: list[str] = []
    for line in order:
        if not line.startswith("\0"):
            out.append(line)
            continue
        for sample in series.get(line[1:], []):
            text = f"{sample.name}{sample.labels} {sample.value!r}"
            if sample.stamp is not None:
                stamp = int(sample.stamp) if sample.stamp == int(sample.stamp) else sample.stamp
                text += f" {stamp}"
            out.append(text)
    return "\n".join(out) + "\n"


def _scenario(pack: Path) -> dict[str, Any]:
    return yaml.safe_load((pack / "scenario.yaml").read_text(encoding="utf-8"))


def _root(pack: Path) -> str:
    return str((_scenario(pack).get("expected") or {}).get("root_cause_service") or "")


def _window_start(pack: Path) -> float:
    start = (_scenario(pack).get("window") or {}).get("start")
    moment = start if isinstance(start, datetime) else datetime.fromisoformat(str(start))
    return moment.timestamp()


def _service_of(labels: str) -> str:
    match = _SERVICE_LABEL.search(labels)
    return match.group(1) if match else ""


def _types(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _TYPE.finditer(text)}


def _healthy(samples: list[_Sample], start: float, counter: bool) -> list[_Sample]:
    """The series as if nothing had happened: from ``start`` on, its baseline samples again,
    in turn (a counter goes on by its baseline's increments)."""
    base = [s for s in samples if s.stamp is not None and s.stamp < start]
    if len(base) < 2:
        return samples
    steps = [b.value - a.value for a, b in itertools.pairwise(base)]
    out: list[_Sample] = []
    turn = 0
    for sample in samples:
        if sample.stamp is None or sample.stamp < start:
            out.append(sample)
            continue
        if counter:
            value = out[-1].value + max(steps[turn % len(steps)], 0.0) if out else sample.value
        else:
            value = base[turn % len(base)].value
        turn += 1
        out.append(_Sample(sample.name, sample.labels, value, sample.stamp))
    return out


def _relabel(labels: str, label: str, value: str) -> str:
    """``labels`` with ``label`` set to ``value`` (added last when absent)."""
    pattern = re.compile(rf'(?<=[{{,]){re.escape(label)}="[^"]*"')
    if pattern.search(labels):
        return pattern.sub(f'{label}="{value}"', labels)
    if not labels or labels == "{}":
        return f'{{{label}="{value}"}}'
    return labels[:-1] + f',{label}="{value}"}}'


def instances_split(*, pack: Path, rng: random.Random) -> None:
    label = rng.choice(("pod", "instance", "k8s_pod_name"))
    root, start = _root(pack), _window_start(pack)
    faulty = rng.randrange(3)
    pods: dict[str, list[str]] = {}  # one name per instance of a service, in every file
    for path in sorted(pack.glob("metrics/*.om")):
        text = path.read_text(encoding="utf-8")
        types = _types(text)
        order, series = _om_parse(text)
        new_order: list[str] = []
        new_series: dict[str, list[_Sample]] = {}
        for line in order:
            if not line.startswith("\0"):
                new_order.append(line)
                continue
            samples = series[line[1:]]
            service = _service_of(samples[0].labels) or path.stem
            counter = _cumulative(samples[0].name, types)
            if service not in pods:
                pods[service] = [f"{service}-{c}{rng.randrange(10**4, 10**5)}" for c in "abc"]
            for index, pod in enumerate(pods[service]):
                copy = [
                    _Sample(s.name, _relabel(s.labels, label, pod), s.value, s.stamp)
                    for s in samples
                ]
                if service == root and index != faulty:
                    copy = _healthy(copy, start, counter)
                key = "\0" + copy[0].name + copy[0].labels
                new_order.append(key)
                new_series[key[1:]] = copy
        path.write_text(_om_write(new_order, new_series), encoding="utf-8")


def _resample(samples: list[_Sample], interval: float) -> list[_Sample]:
    if interval < 60:
        out: list[_Sample] = []
        for a, b in itertools.pairwise(samples):
            out.append(a)
            if a.stamp is None or b.stamp is None or b.stamp - a.stamp > 300:
                continue
            t = a.stamp + interval
            while t < b.stamp - 1e-6:
                share = (t - a.stamp) / (b.stamp - a.stamp)
                out.append(_Sample(a.name, a.labels, a.value + (b.value - a.value) * share, t))
                t += interval
        return [*out, *samples[-1:]]
    first = next((s.stamp for s in samples if s.stamp is not None), None)
    if first is None:
        return samples
    marks = [s for s in samples if s.stamp is not None and int(s.stamp) % int(interval) == 0]
    return marks if len(marks) >= 2 else samples


def _resampling(interval: float) -> Callable[..., None]:
    def change(*, pack: Path, rng: random.Random) -> None:
        del rng  # the interval is the point; nothing random
        for path in sorted(pack.glob("metrics/*.om")):
            order, series = _om_parse(path.read_text(encoding="utf-8"))
            resampled = {k: _resample(v, interval) for k, v in series.items()}
            path.write_text(_om_write(order, resampled), encoding="utf-8")

    return change


def counters_reset(*, pack: Path, rng: random.Random) -> None:
    for path in sorted(pack.glob("metrics/*.om")):
        text = path.read_text(encoding="utf-8")
        types = _types(text)
        order, series = _om_parse(text)
        for _key, samples in series.items():
            if len(samples) < 3 or not _cumulative(samples[0].name, types):
                continue
            at = rng.randrange(1, len(samples))
            offset = samples[at - 1].value
            for sample in samples[at:]:
                sample.value -= offset
            if samples[at].value < 0:  # a counter that was not monotone: leave it be
                for sample in samples[at:]:
                    sample.value += offset
        path.write_text(_om_write(order, series), encoding="utf-8")


def _is_latency(name: str) -> bool:
    family = re.sub(r"_(sum|bucket|count|total)$", "", name)
    return vocab_metric_kind(family) == "latency" and not name.endswith(("_count", "_total"))


def _moved(samples: list[_Sample], start: float) -> bool:
    """The window's median away from the baseline's by more than three of its MADs (or
    10 % of it when the baseline is flat)."""
    base = sorted(s.value for s in samples if s.stamp is not None and s.stamp < start)
    window = sorted(s.value for s in samples if s.stamp is not None and s.stamp >= start)
    if not base or not window:
        return False
    median = base[len(base) // 2]
    mad = sorted(abs(v - median) for v in base)[len(base) // 2]
    return abs(window[len(window) // 2] - median) > max(3 * mad, 0.1 * abs(median), 1e-12)


def latency_only(*, pack: Path, rng: random.Random) -> None:
    del rng
    root, start = _root(pack), _window_start(pack)
    files = {p: p.read_text(encoding="utf-8") for p in sorted(pack.glob("metrics/*.om"))}
    parsed = {p: _om_parse(text) for p, text in files.items()}
    own = [v for _, series in parsed.values() for v in series.values()]
    own = [v for v in own if _service_of(v[0].labels) == root and _is_latency(v[0].name)]
    if not any(_moved(samples, start) for samples in own):
        return  # its latency never moved: the root would vanish, not be seen by its latency
    for path, (order, series) in parsed.items():
        types = _types(files[path])
        for key, samples in series.items():
            if _service_of(samples[0].labels) == root and not _is_latency(samples[0].name):
                series[key] = _healthy(samples, start, _cumulative(samples[0].name, types))
        path.write_text(_om_write(order, series), encoding="utf-8")


def _interval_of(samples: list[_Sample]) -> float:
    stamps = sorted({s.stamp for s in samples if s.stamp is not None})
    gaps = sorted(b - a for a, b in itertools.pairwise(stamps))
    return gaps[len(gaps) // 2] if gaps else 60.0


def clock_skew(*, pack: Path, rng: random.Random) -> None:
    files = sorted(pack.glob("metrics/*.om"))
    named = {
        _service_of(v[0].labels)
        for path in files
        for v in _om_parse(path.read_text(encoding="utf-8"))[1].values()
    }
    services = sorted(named - {""})
    if not services:
        return
    root = rng.choice(services)  # the service whose clock is off (the root cause or another)
    intervals: list[float] = []
    for path in files:
        _, series = _om_parse(path.read_text(encoding="utf-8"))
        intervals += [_interval_of(v) for v in series.values() if _service_of(v[0].labels) == root]
    late = (sorted(intervals)[len(intervals) // 2] if intervals else 60.0) * rng.choice((-1, 1))
    for path in files:
        order, series = _om_parse(path.read_text(encoding="utf-8"))
        for samples in series.values():
            if _service_of(samples[0].labels) == root:
                for sample in samples:
                    sample.stamp = None if sample.stamp is None else sample.stamp + late
        path.write_text(_om_write(order, series), encoding="utf-8")
    offset = timedelta(seconds=late)
    for path in sorted(pack.glob("logs/*.jsonl")):
        lines = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if record.get("service") == root:
                record = _json_shift(record, offset)
            lines.append(json.dumps(record, ensure_ascii=False))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    own = pack / "logs" / f"{root}.log"
    if own.is_file():
        _rewrite(own, lambda text: _ISO_ONLY.sub(lambda m: _iso_shift(m, offset), text))


def family_drop(*, pack: Path, rng: random.Random) -> None:
    root = _root(pack)
    families: set[str] = set()
    files = sorted(pack.glob("metrics/*.om"))
    for path in files:
        _, series = _om_parse(path.read_text(encoding="utf-8"))
        for samples in series.values():
            if _service_of(samples[0].labels) == root:
                families.add(re.sub(r"_(sum|bucket|count|total|created)$", "", samples[0].name))
    if not families:
        return
    gone = rng.choice(sorted(families))
    pattern = re.compile(
        rf"^(# (TYPE|HELP|UNIT) )?{re.escape(gone)}(_(sum|bucket|count|total|created))?[{{ ]"
    )
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if not pattern.match(line)]
        if any(_SAMPLE.match(line) for line in kept if not line.startswith("#")):
            path.write_text("\n".join(kept) + "\n", encoding="utf-8")
        else:  # the file held that family alone: the exporter is gone
            path.unlink()


_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_.]*)="((?:[^"\\]|\\.)*)"')


def _names_a_call(labels: str) -> bool:
    """Whether a series' labels name a call: a caller/callee pair, or a client's peer."""
    found = {k: v for k, v in _LABEL.findall(labels)}
    peers = {k.lower().replace(".", "_") for k in found} & set(PEER_LABELS)
    return bool(call_label_pairs(found)) or bool(peers)


def calls_undeclared(*, pack: Path, rng: random.Random) -> None:
    del rng  # nothing random: every declaration of a call goes
    (pack / "topology.json").unlink(missing_ok=True)
    if (pack / "traces").is_dir():
        for path in sorted((pack / "traces").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (pack / "traces").rmdir()
    for path in sorted(pack.glob("metrics/*.om")):
        order, series = _om_parse(path.read_text(encoding="utf-8"))
        kept = {k: v for k, v in series.items() if not _names_a_call(v[0].labels)}
        if len(kept) == len(series):
            continue
        if kept:
            path.write_text(_om_write(order, kept), encoding="utf-8")
        else:  # the file held call series alone
            path.unlink()


Transform = Callable[..., None]  # (pack=Path, rng=random.Random) -> None, in place
TRANSFORMS: dict[str, Transform | None] = {
    "none": None,
    "services": services_rename,
    "metrics": metrics_rename,
    "time": times_shift,
    "sparse": samples_thin,
    "noise": samples_noise,
    "instances": instances_split,
    "step15s": _resampling(15),
    "step5m": _resampling(300),
    "resets": counters_reset,
    "latency_only": latency_only,
    "skew": clock_skew,
    "family": family_drop,
    "no_topology": calls_undeclared,
}


def pack_transform(*, pack: Path, transform: str, seed: int) -> None:
    """Rewrite the pack folder ``pack`` (a copy) with ``transform``, deterministically."""
    change = TRANSFORMS[transform]
    if change is not None:
        change(pack=pack, rng=random.Random(f"{seed}:{transform}:{pack.name}"))
