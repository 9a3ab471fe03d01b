"""query_logs' file backend gives byte-identical output to the pinned outputs.

The pins in ``test_logs_pinned.json`` were captured from the line-by-line implementation
before the file backend was optimised; any speed-up must keep every output text and
summary the same. Cases cover the demo packs under several filters and windows, and
generated files full of awkward lines (CR line ends, escapes, bad JSON, invalid UTF-8,
lines longer than a read block, more distinct messages than the caches hold).

To re-pin after an intended change of the output:
``.venv/bin/python -m tests.evidence.test_logs_pinned > tests/evidence/test_logs_pinned.json``
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from diagnosis.evidence.common import Deadline, QueryWindow
from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import pack_discover
from diagnosis.evidence.tools.query_logs import logscan
from diagnosis.evidence.tools.query_logs.files import logs_from_files
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.render import fleet_omitted_line

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
PINS = Path(__file__).with_suffix(".json")
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def _window(start: datetime, end: datetime) -> QueryWindow:
    return QueryWindow.around(start=start, end=end)


def _pack_cases() -> Iterator[tuple[str, list[Path], QueryWindow, dict[str, Any]]]:
    for pack_path in pack_discover([SCENARIOS]):
        pack = pack_load(pack_path, check_data=False)
        assert pack.window is not None
        start, end = pack.window.start, pack.window.end
        windows = {
            "window": _window(start, end),
            "early": _window(start - timedelta(hours=2), start - timedelta(minutes=90)),
            "late-half": _window(start + (end - start) / 2, end + timedelta(minutes=5)),
        }
        argument_sets: list[dict[str, Any]] = [
            {},
            {"level": "ERROR"},
            {"level": "warning"},
            {"level": "INFO", "limit": 1},
            {"limit": 20},
            {"query": "timeout"},
            {"query": "timed out"},
            {"query": "/time(d)? ?out|refused/"},
            {"query": "/^[A-Z]+ /"},
            {"query": '"'},
            {"query": "连接"},
            {"service": "nope"},
        ]
        for service in pack.services:
            argument_sets.append({"service": service})
            argument_sets.append({"service": service, "level": "ERROR", "limit": 1})
            argument_sets.append({"service": service, "query": "/[0-9]{3}/"})
        for window_name, window in windows.items():
            sets = argument_sets if window_name == "window" else argument_sets[:3]
            for arguments in sets:
                case_id = f"{pack.id}/{window_name}/{json.dumps(arguments, ensure_ascii=False)}"
                yield case_id, list(pack.paths.logs), window, arguments


def _uuid(rng: random.Random) -> str:
    raw = f"{rng.getrandbits(128):032x}"
    return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


def _awkward_message(rng: random.Random, i: int) -> str:
    choices = [
        lambda: (
            f"POST /api/v1/pay {rng.choice([200, 404, 503])} {rng.randrange(90)}ms id=O26{i:09d}"
        ),
        lambda: (
            f"conn to {rng.randrange(256)}.{rng.randrange(256)}.0.{i % 256}:{3306 + i % 3} refused"
        ),
        lambda: f"trace {_uuid(rng)} done",
        lambda: "digitless uuid abcdefab-abcd-abcd-abcd-abcdefabcdef seen",
        lambda: "digitless uuid abcdefab-abcd-abcd-abcd-abcdefabcdef seen 3 times",
        lambda: f"ptr 0x{rng.getrandbits(48):x} freed, hash {rng.getrandbits(64):016x}",
        lambda: f"pod pod-h{rng.randrange(1000):03d}w v1 v22 ab12 a_12 x{rng.randrange(10)}",
        lambda: (
            f"amount -{rng.randrange(100)}.{rng.randrange(100)} +{rng.randrange(9)},5"
            " rate 1,234,567"
        ),
        lambda: f"100% done {{}} %s %d {{0}} {i % 7}",
        lambda: f"连接池耗尽 等待 {rng.randrange(40)} 个 ٣٤٥ ms",
        lambda: f"full-width ０１２ and superscript ² {i % 5}",
        lambda: "HikariPool-1 - Connection is not available, request timed out after 30000ms",
        lambda: f"deadbeefcafe{i % 10} abcdefabcdef 123456789012 DEADBEEF0000 g{i:06d}",
        lambda: f"upstream timed out ({rng.randrange(110)}: Connection timed out) while reading",
        lambda: f"word{i % 50000:05d} only",
        lambda: "plain words without numbers",
        lambda: "",
        lambda: f"a-b-c-d-{i % 4} mixed 1-2-3-4-5 dashes",
    ]
    return rng.choice(choices)()


def _awkward_jsonl(rng: random.Random, lines: int) -> bytes:
    out = []
    services = ["pay", "order", "gateway", "pay-worker"]
    levels = ["INFO", "ERROR", "WARN", "warning", "err", "Info", "", "notice", "x" * 20]
    for i in range(lines):
        ts = T0 + timedelta(milliseconds=i * 997 + rng.randrange(900))
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
        record: dict[str, Any] = {
            "ts": stamp,
            "service": rng.choice(services),
            "level": rng.choice(levels),
            "message": _awkward_message(rng, i),
        }
        if rng.random() < 0.3:
            record["trace_id"] = f"{rng.getrandbits(128):032x}"
        roll = rng.random()
        if roll < 0.03:
            record["ts"] = ts.timestamp()  # unix seconds
        elif roll < 0.05:
            record["ts"] = ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        elif roll < 0.06:
            record["ts"] = (ts + timedelta(hours=8)).strftime("%Y-%m-%dT%H:%M:%S.%f+08:00")
        elif roll < 0.07:
            record["ts"] = ts.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        elif roll < 0.08:
            record["ts"] = stamp[:-1]  # naive
        elif roll < 0.085:
            record["ts"] = stamp.replace("T", "t")
        elif roll < 0.09:
            record["ts"] = "2026-02-30T10:00:00Z"
        elif roll < 0.095:
            del record["ts"]
            record["timestamp"] = stamp
        elif roll < 0.1:
            record["@timestamp"] = stamp  # after ts: ts still wins
        elif roll < 0.105:
            record["ts"] = " " + stamp + " "
        elif roll < 0.11:
            record["ts"] = stamp.replace(".", ".123456")[:-4] + "Z"
        roll = rng.random()
        if roll < 0.02:
            del record["level"]
            record["severity"] = "ERROR"
        elif roll < 0.03:
            record["level"] = None
        elif roll < 0.04:
            record["message"] += '\nsecond line "quoted" \\ back\tslash'
        elif roll < 0.05:
            record["service"] = ""
        elif roll < 0.06:
            record["message"] = 12
        elif roll < 0.07:
            record["extra"] = {"nested": [1, 2.5, None, True, "x"]}
        elif roll < 0.08:
            record["n"] = 10**30
        if rng.random() < 0.05:
            line = json.dumps(record, ensure_ascii=True)
        elif rng.random() < 0.05:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        else:
            line = json.dumps(record, ensure_ascii=False)
        roll = rng.random()
        if roll < 0.01:
            line = line.replace('"service": "pay"', '"service": "\\u0070ay"')
        elif roll < 0.02:
            line = line[:-1] + ', "service": "dup"}'
        elif roll < 0.03:
            line = line[:-1] + ', "level": "FATAL"}'
        elif roll < 0.04:
            line = line[: len(line) // 2]  # truncated
        elif roll < 0.045:
            line = "[" + line + "]"
        elif roll < 0.05:
            line = "  " + line + " \t"
        elif roll < 0.055:
            line = line + " trailing"
        elif roll < 0.06:
            line = line[:-1] + ', "v": NaN}'
        data = line.encode()
        roll = rng.random()
        if roll < 0.01:
            data = data.replace(b"a", b"\xff", 1)
        elif roll < 0.02:
            data = data.replace(b" ", b"\xe4\xb8", 1)  # a cut multi-byte character
        ending = rng.choice([b"\n"] * 30 + [b"\r\n", b"\r", b"\n\n", b"\n  \n"])
        out.append(data + ending)
    return b"\xef\xbb\xbf" + b"".join(out)


def _awkward_plain(rng: random.Random, lines: int) -> bytes:
    out = []
    for i in range(lines):
        ts = T0 + timedelta(milliseconds=i * 1499)
        stamp = rng.choice(
            [
                ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z",
                ts.strftime("[%Y-%m-%d %H:%M:%S]"),
                ts.strftime("%Y-%m-%dT%H:%M:%S+0000"),
                ts.strftime("%Y-%m-%d %H:%M:%S,") + f"{ts.microsecond // 1000:03d}",
                "garbage",
            ]
        )
        level = rng.choice(["INFO ", "[error] ", "WARNING: ", "", "12 [Note] ", "panic "])
        line = f"{stamp} {level}{_awkward_message(rng, i)}"
        ending = rng.choice([b"\n"] * 20 + [b"\r\n", b"\r", b"\n\n"])
        out.append(line.encode() + ending)
    return b"".join(out)


def _high_cardinality_jsonl(rng: random.Random, lines: int) -> bytes:
    """More distinct messages and templates than the clusterer's caches and cluster cap."""
    words = [f"{a}{b}" for a in ("al", "be", "ga", "de", "ep", "ze", "et", "th") for b in "xyzqrw"]
    out = []
    for i in range(lines):
        ts = T0 + timedelta(milliseconds=i * 173)
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
        message = " ".join(rng.choice(words) for _ in range(rng.randrange(2, 6)))
        if rng.random() < 0.5:
            message += f" took {rng.randrange(100)}ms"
        record = {"ts": stamp, "service": "svc", "level": "INFO", "message": message}
        out.append(json.dumps(record).encode() + b"\n")
    # One line far longer than a read block, then a final line without a newline.
    long_record = {"ts": "2026-03-02T09:00:00Z", "service": "svc", "level": "ERROR"}
    long_record["message"] = "huge " + "z" * (3 * 1024 * 1024)
    out.append(json.dumps(long_record).encode() + b"\n")
    out.append(b'{"ts": "2026-03-02T09:00:01Z", "service": "svc", "message": "last line"}')
    return b"".join(out)


def generated_files(folder: Path) -> dict[str, list[Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "apps.jsonl": _awkward_jsonl(random.Random(7), 12_000),
        "pay.log": _awkward_plain(random.Random(8), 3_000),
        "many.jsonl": _high_cardinality_jsonl(random.Random(9), 60_000),
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {
        "awkward": [folder / "apps.jsonl", folder / "pay.log"],
        "many": [folder / "many.jsonl"],
    }


def _generated_cases(folder: Path) -> Iterator[tuple[str, list[Path], QueryWindow, dict[str, Any]]]:
    groups = generated_files(folder)
    windows = {
        "window": _window(T0 + timedelta(hours=2), T0 + timedelta(hours=2, minutes=40)),
        "narrow": _window(T0 + timedelta(minutes=70), T0 + timedelta(minutes=75)),
        "wide": _window(T0, T0 + timedelta(hours=5)),
    }
    argument_sets: list[dict[str, Any]] = [
        {},
        {"service": "pay"},
        {"service": "pay", "level": "error"},
        {"level": "WARN", "limit": 20},
        {"query": "timed out"},
        {"query": "uuid"},
        {"query": "/[0-9]+ms/"},
        {"query": "连接"},
        {"query": "quoted"},
    ]
    for group, files in groups.items():
        for window_name, window in windows.items():
            for arguments in argument_sets:
                if group == "many" and arguments not in ({}, {"query": "took"}):
                    continue
                case_id = f"{group}/{window_name}/{json.dumps(arguments, ensure_ascii=False)}"
                yield case_id, files, window, arguments
        if group == "many":
            yield f"{group}/wide/query-took", files, windows["wide"], {"query": "took"}


def _without_fleet(output: str, summary: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The output and summary as pinned: fleet-wide totals came later and are checked apart.

    The fleet block is the ``fleet`` summary key and its ``fleet…`` output lines; what it
    says must agree with the rest of the summary.
    """
    fleet = summary.get("fleet")
    if fleet is None:
        return output, summary
    assert fleet["lines_window"] == summary["total_window"]
    assert fleet["lines_baseline"] == summary["total_baseline"]
    assert fleet["templates"] == len(summary["templates"]) + summary["omitted"]
    fleet_lines = [fleet["line"], *(entry["line"] for entry in fleet["services_ranked"])]
    if fleet["services_omitted"]:
        fleet_lines.append(fleet_omitted_line(fleet["services_omitted"]))
    assert all(line in output.splitlines() for line in fleet_lines)
    assert sum(e["new_or_surging"] for e in fleet["services_ranked"]) <= fleet["new_or_surging"]
    assert (
        len(fleet["services_ranked"]) + fleet["services_omitted"]
        == (fleet["new_or_surging_services"])
    )
    kept = [line for line in output.splitlines() if line not in fleet_lines]
    return "\n".join(kept), {k: v for k, v in summary.items() if k != "fleet"}


def run_case(files: list[Path], window: QueryWindow, arguments: dict[str, Any]) -> dict[str, Any]:
    result = logs_from_files(
        files=files,
        log_filter=LogFilter.build(
            service=arguments.get("service"),
            query=arguments.get("query"),
            level=arguments.get("level"),
        ),
        window=window,
        limit=arguments.get("limit", 3),
        deadline=Deadline.after(600),
    )
    output, summary_dict = _without_fleet(result.output, result.summary)
    summary = json.dumps(summary_dict, sort_keys=True, ensure_ascii=False)
    return {
        "status": result.status,
        "output_sha256": hashlib.sha256(output.encode()).hexdigest(),
        "summary_sha256": hashlib.sha256(summary.encode()).hexdigest(),
        "totals": next(line for line in output.splitlines() if line.startswith("totals:")),
    }


def all_cases(folder: Path) -> Iterator[tuple[str, list[Path], QueryWindow, dict[str, Any]]]:
    yield from _pack_cases()
    yield from _generated_cases(folder)


@pytest.fixture(scope="module")
def pins() -> dict[str, Any]:
    return json.loads(PINS.read_text())


def test_every_pinned_case_is_still_generated(tmp_path, pins):
    assert sorted(case_id for case_id, *_ in all_cases(tmp_path)) == sorted(pins)


def test_query_logs_output_is_byte_identical_to_the_pinned_outputs(tmp_path, pins):
    mismatched = []
    for case_id, files, window, arguments in all_cases(tmp_path):
        got = run_case(files, window, arguments)
        if got != pins.get(case_id):
            mismatched.append(f"{case_id}: {got['totals']} (pinned: {pins[case_id]['totals']})")
    assert not mismatched, "\n".join(mismatched)


def test_the_counting_scan_in_parallel_chunks_gives_the_pinned_outputs(tmp_path, pins, monkeypatch):
    # Every case through the scan big inputs take: small blocks and chunks, so lines
    # meet block and chunk edges and groups merge across worker processes.
    monkeypatch.setattr(logscan, "AGGREGATE_MIN_BYTES", 0)
    monkeypatch.setattr(logscan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(logscan, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(logscan, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(logscan, "_workers", lambda: 2)
    mismatched = []
    for case_id, files, window, arguments in all_cases(tmp_path):
        got = run_case(files, window, arguments)
        if got != pins.get(case_id):
            mismatched.append(f"{case_id}: {got['totals']} (pinned: {pins[case_id]['totals']})")
    assert not mismatched, "\n".join(mismatched)


if __name__ == "__main__":
    import tempfile

    import django

    django.setup()
    with tempfile.TemporaryDirectory() as tmp:
        captured = {
            case_id: run_case(files, window, arguments)
            for case_id, files, window, arguments in all_cases(Path(tmp))
        }
    json.dump(captured, sys.stdout, indent=1, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")
