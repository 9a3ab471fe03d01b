"""Noise on a share: an availability at exactly 100 % and a fault that dips it.

A share is a count of some events over a count of all of them; the ``noise`` transform
(tests/support/pack_transforms.py) puts its factor on the share's distance to the nearer
end of its range, so a flat 100 % stays 100 % and a dip keeps its size within ±10 %.
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.pack_transforms import pack_transform

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 10, tzinfo=UTC)  # the baseline's first sample
ONSET = 80  # minutes after START: the root's availability dips from here on
WINDOW_START = 70
END = 100


def _stamp(minute: int) -> int:
    return int((START + timedelta(minutes=minute)).timestamp())


def _system(out: Path, seed: int, dip: float) -> tuple[Path, str, list[str]]:
    """A tree of six services (front → two mids → a leaf each) on one-minute samples:
    every latency noisy around its own level and unchanged, every availability exactly
    100 % until the root's (one of the leaves) dips by ``dip`` points at ONSET and each
    caller above it dips deeper one sample per hop later (it fails for its callee's
    failures and its own retries of them). Names are random tokens, so none says a role."""
    rng = random.Random(seed)
    names = [f"n{token}" for token in rng.sample(range(100, 1000), 6)]
    front, mid_a, mid_b, leaf_a, leaf_b, leaf_c = names
    calls = [(front, mid_a), (front, mid_b), (mid_a, leaf_a), (mid_a, leaf_b), (mid_b, leaf_c)]
    root = rng.choice([leaf_a, leaf_b])
    hops = {root: 0, mid_a: 1, front: 2}
    (out / "metrics").mkdir(parents=True)
    for name in names:
        level = rng.uniform(0.02, 0.3)
        lines = ["# TYPE svc_latency_seconds gauge"]
        lines += [
            f'svc_latency_seconds{{service="{name}"}} {level * rng.uniform(0.9, 1.1):.6g} '
            f"{_stamp(m)}"
            for m in range(END + 1)
        ]
        lines.append("# TYPE svc_availability_percent gauge")
        for m in range(END + 1):
            value = 100.0
            if name in hops and m >= ONSET + hops[name]:
                value = 100.0 - dip * (1 + hops[name]) * rng.uniform(0.9, 1.1)
            lines.append(f'svc_availability_percent{{service="{name}"}} {value:.6g} {_stamp(m)}')
        lines.append("# EOF")
        (out / "metrics" / f"{name}.om").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "topology.json").write_text(
        json.dumps({"calls": [{"caller": a, "callee": b} for a, b in calls]}), encoding="utf-8"
    )
    onset = START + timedelta(minutes=ONSET + 2)
    scenario = {
        "id": f"share-dip-{seed}",
        "title": f"{front} 可用性下降",
        "question": f"{front} 可用性在 {onset:%Y-%m-%d %H:%M} (UTC) 左右下降，请帮我定位根因服务。",
        "now": f"{START + timedelta(minutes=END):%Y-%m-%dT%H:%M:%SZ}",
        "window": {
            "start": f"{START + timedelta(minutes=WINDOW_START):%Y-%m-%dT%H:%M:%SZ}",
            "end": f"{START + timedelta(minutes=END):%Y-%m-%dT%H:%M:%SZ}",
        },
        "language": "zh-CN",
        "services": names,
        "expected": {"root_cause_service": root, "root_cause_kind": "errors"},
    }
    (out / "scenario.yaml").write_text(json.dumps(scenario, ensure_ascii=False), "utf-8")
    return out, root, names


_VALUE = re.compile(r'^svc_availability_percent\{service="([^"]+)"\} (\S+) (\d+)$', re.M)


def _availability(pack: Path) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list[tuple[int, float]]] = {}
    for om in sorted((pack / "metrics").glob("*.om")):
        for name, value, stamp in _VALUE.findall(om.read_text(encoding="utf-8")):
            found.setdefault(name, []).append((int(stamp), float(value)))
    return found


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_noise_keeps_a_share_in_its_range_and_a_flat_end_exact(tmp_path, seed):
    pack, _, _ = _system(tmp_path / "clean", seed, dip=4.0)
    before = _availability(pack)
    pack_transform(pack=pack, transform="noise", seed=seed)
    after = _availability(pack)
    for name, samples in before.items():
        for (_, clean), (_, noisy) in zip(samples, after[name], strict=True):
            assert 0.0 <= noisy <= 100.0
            if clean == 100.0:
                assert noisy == 100.0  # no failure counted: none to be noisy about
            else:  # the failure share moved by the factor (±10 %), not the whole share
                assert abs((100.0 - noisy) / (100.0 - clean) - 1.0) <= 0.1 + 1e-9
