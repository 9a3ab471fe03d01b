"""Robustness of the diagnosis: the same incidents written differently.

Copies scenario packs into a temporary folder, rewrites each copy with one transform,
runs ``manage.py evaluate --provider offline`` on them and prints AC@1, AC@3, kind
accuracy and leaks per transform and pack set. A transform changes how an incident is
written, not what happened in it, so a diagnosis that holds keeps its figures:

``none`` (the packs as they are, the reference row), ``services``, ``metrics``,
``time``, ``sparse`` (30 % of the samples dropped by default), ``noise`` (factors in
[0.9, 1.1] by default), ``instances`` (the fault on one of three instances), ``step15s``
and ``step5m`` (other sample intervals), ``resets`` (counter resets), ``latency_only``
(the root's only changed series its latency), ``skew`` (one service's clock a sample off),
``family`` (one metric family missing) and ``no_topology`` (no topology.json, traces or
call-labelled series: nothing declares the calls); tests/support/pack_transforms.py says
what each one does.

Pack sets: ``demo`` (the five demo packs), ``petshop`` (the 20 PetShop train packs) and
``fleet`` (FLEETS generated systems, scenarios/_generator/fleet.py: 30 services, every
fault kind, the root at depths 1–3, callers showing the fault at once or a sample per
call later), generated into the run's temporary folder; ``bare`` (BARE generated systems of
46 services with no call graph at all: no topology.json, no traces, no callers' logs or
client-side latency; every kind, depths 1–3, lag 0 and 1); ``busy`` (the ``bare`` systems
with three services outside the fault's path changing on their own, as a real fleet's do
during any incident: a batch job's CPU and memory rising short of their limits minutes
before the onset, a service whose latency bursts all along, a redeploy); ``spill`` (as many
fleets, each fault spilling into the root's other families as faults physically do, named
by the real schemes in turn: cAdvisor, node exporter, JVM/Micrometer, OpenTelemetry, Go,
Python).

The gate: every transform within GATE AC@1 of the set's ``none`` row; the rows that are
not are marked and the exit status is 1.

A service label named other than ``service`` is not a transform: only live environments
can configure it (``Environment.metrics_service_label``); pack files always use
``service``.

    .venv/bin/python bench/robustness.py                      # every transform, both sets
    .venv/bin/python bench/robustness.py --transforms none sparse --sets demo
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The evaluations' database: this run's own (removed at its end), for the subprocesses and for
# the transforms, which read metric types with query_metrics' own rule (Django set up).
DATABASE = Path(tempfile.gettempdir()) / f"rootproof-robustness-{os.getpid()}.sqlite3"
os.environ.update(
    DEBUG="1",
    DATABASE_URL=f"sqlite:///{DATABASE}",
    DJANGO_SETTINGS_MODULE="config.settings",
)

import django  # noqa: E402

django.setup()

from tests.support.pack_transforms import AMOUNTS, TRANSFORMS, pack_transform  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO_PACKS = (
    "checkout-bad-deploy",
    "db-disk-full",
    "inventory-slow-dependency",
    "payment-pool-saturation",
    "search-memory-leak",
)
SETS: dict[str, list[Path]] = {
    "demo": [ROOT / "scenarios" / name for name in DEMO_PACKS],
    "petshop": sorted(
        p.parent for p in (ROOT / "scenarios/public/petshop-train").glob("*/scenario.yaml")
    ),
    "fleet": [],  # generated at the start of a run (fleets_write)
    "bare": [],  # generated at the start of a run (bare_fleets_write)
    "busy": [],  # generated at the start of a run (bare_fleets_write, with distractors)
    "spill": [],  # generated at the start of a run (spill_fleets_write)
}
FLEETS = 12
BARE = 18  # every kind twice, once with each lag
GATE = 0.1  # the most AC@1 a rewrite may cost against the clean packs


def fleets_write(folder: Path) -> list[Path]:
    """FLEETS generated systems: seeds 1..FLEETS, each kind in turn, depths 1-3, every
    other one with callers a sample per call later than their callee."""
    sys.path.insert(0, str(ROOT / "scenarios" / "_generator"))
    from fleet import KINDS, fleet_pack_write

    packs = []
    for seed in range(1, FLEETS + 1):
        pack = fleet_pack_write(
            out=folder / f"fleet-{seed}",
            services=30,
            seed=seed,
            kind=KINDS[seed % len(KINDS)],
            depth=1 + seed % 3,
            lag=seed % 2,
        )
        packs.append(pack.path)
    return packs


def bare_fleets_write(folder: Path, distractors: int = 0) -> list[Path]:
    """BARE generated systems with nothing that declares a call: seeds 1..BARE, 46 services,
    each kind in turn (twice: once at lag 0, once at lag 1), depths 1-3; ``distractors``
    services outside the fault's path changing on their own (``fleet.DISTRACTIONS``)."""
    sys.path.insert(0, str(ROOT / "scenarios" / "_generator"))
    from fleet import KINDS, fleet_pack_write

    return [
        fleet_pack_write(
            out=folder / f"bare-{seed}",
            services=46,
            seed=seed,
            kind=KINDS[seed % len(KINDS)],
            depth=1 + seed % 3,
            lag=seed % 2,
            topology=False,
            distractors=distractors,
        ).path
        for seed in range(1, BARE + 1)
    ]


def spill_fleets_write(folder: Path) -> list[Path]:
    """FLEETS generated systems like ``fleets_write``'s, each fault spilling into the root's
    other families (``--spill``) and each named by one real scheme in turn (cAdvisor, node
    exporter, JVM/Micrometer, OpenTelemetry, Go, Python: ``REAL_SCHEMES``)."""
    sys.path.insert(0, str(ROOT / "scenarios" / "_generator"))
    from fleet import KINDS, REAL_SCHEMES, fleet_pack_write

    namings = sorted(REAL_SCHEMES)
    packs = []
    for seed in range(1, FLEETS + 1):
        pack = fleet_pack_write(
            out=folder / f"spill-{seed}",
            services=30,
            seed=seed,
            kind=KINDS[seed % len(KINDS)],
            depth=1 + seed % 3,
            lag=seed % 2,
            spill=True,
            naming=namings[seed % len(namings)],
        )
        packs.append(pack.path)
    return packs


# --- running --------------------------------------------------------------------------


def _env() -> dict[str, str]:
    return dict(os.environ)


def _manage(*args: str) -> None:
    command = [str(ROOT / ".venv/bin/python"), str(ROOT / "manage.py"), *args]
    subprocess.run(command, cwd=ROOT, env=_env(), check=True, stdout=subprocess.DEVNULL)


def set_evaluate(*, packs: list[Path], transform: str, seed: int, workdir: Path) -> dict:
    """Totals and per-pack results of one pack set under one transform."""
    copies = []
    for pack in packs:
        copy = workdir / transform / pack.name
        shutil.copytree(pack, copy)
        pack_transform(pack=copy, transform=transform, seed=seed)
        copies.append(str(copy))
    out = workdir / f"{transform}.json"
    _manage("evaluate", *copies, "--provider", "offline", "--json", str(out))
    return json.loads(out.read_text(encoding="utf-8"))


def _misses(report: dict) -> str:
    missed = [
        f"{p['pack']}({'@1' if not p.get('hit_at_1') else ''}"
        f"{'kind' if p.get('kind_ok') is False else ''})"
        for p in report["packs"]
        if not p.get("hit_at_1") or p.get("kind_ok") is False
    ]
    return " ".join(missed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transforms", nargs="+", choices=list(TRANSFORMS), default=None)
    parser.add_argument(
        "--sets", nargs="+", choices=list(SETS), default=["demo", "petshop", "fleet"]
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--drop", type=float, default=AMOUNTS["drop"], help="share of samples sparse drops"
    )
    parser.add_argument(
        "--noise", type=float, default=AMOUNTS["noise"], help="noise factor range: 1 ± this"
    )
    parser.add_argument("--json", help="write every report here")
    args = parser.parse_args()
    AMOUNTS.update(drop=args.drop, noise=args.noise)
    _manage("migrate", "-v0")
    reports: dict[str, dict[str, Any]] = {}
    print(
        f"{'set':8} {'transform':12} {'AC@1':>5} {'AC@3':>5} {'kind':>5} {'leaks':>5} gate  misses"
    )
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="robustness-") as tmp:
        if "fleet" in args.sets:
            SETS["fleet"] = fleets_write(Path(tmp) / "generated")
        if "bare" in args.sets:
            SETS["bare"] = bare_fleets_write(Path(tmp) / "generated-bare")
        if "busy" in args.sets:
            SETS["busy"] = bare_fleets_write(Path(tmp) / "generated-busy", distractors=3)
        if "spill" in args.sets:
            SETS["spill"] = spill_fleets_write(Path(tmp) / "generated-spill")
        for name in args.sets:
            packs = SETS[name]
            clean: float | None = None
            for transform in args.transforms or list(TRANSFORMS):
                workdir = Path(tmp) / name
                report = set_evaluate(
                    packs=packs, transform=transform, seed=args.seed, workdir=workdir
                )
                totals = report["totals"]
                reports[f"{name}/{transform}"] = report
                at_1 = totals["ac_at_1"] or 0.0
                if transform == "none":
                    clean = at_1
                below = clean is not None and at_1 < clean - GATE - 1e-9
                if below:
                    failed.append(f"{name}/{transform}")
                print(
                    f"{name:8} {transform:12} {totals['ac_at_1']!s:>5} {totals['ac_at_3']!s:>5} "
                    f"{totals['kind_accuracy']!s:>5} {totals['leaks']!s:>5} "
                    f"{'GATE' if below else '    '}  {_misses(report)}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(reports, ensure_ascii=False, indent=1), "utf-8")
    if failed:
        print(f"more than {GATE} AC@1 below the clean packs: {' '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        DATABASE.unlink(missing_ok=True)
