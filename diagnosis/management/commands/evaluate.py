import json
from pathlib import Path
from typing import IO, Any, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from diagnosis.evaluation import (
    FOLDER_RATES,
    EvaluationReport,
    PackResult,
    kind_confusion,
    pack_evaluate,
)
from diagnosis.evidence.packs import pack_discover


def _packs_under(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / "scenario.yaml").is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(pack_discover([path]))
        else:
            raise CommandError(f"{raw}: not a scenario pack or a folder of packs")
    return found


COLUMNS = (
    "pack",
    "decision",
    "candidates",
    "@1",
    "@3",
    "kind",
    "abstain",
    "mention",
    "leaked",
    "unsupported",
    "tools",
    "llm",
    "tokens",
    "s",
)


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _kind_cell(r: PackResult) -> str:
    if r.kind_ok is None:
        return _mark(r.kind_ok)
    pair = f"|{r.root_cause_kind_alternative}" if r.root_cause_kind_alternative else ""
    return f"{_mark(r.kind_ok)} {r.root_cause_kind}{pair}"


def _results_table(results: list[PackResult]) -> Table:
    table = Table(title="Rootproof evaluation")
    for column in COLUMNS:
        table.add_column(column)
    for r in results:
        table.add_row(
            r.pack,
            r.decision or r.status,
            ", ".join(r.root_cause_candidates[:3]),
            _mark(r.hit_at_1),
            _mark(r.hit_at_3),
            _kind_cell(r),
            _mark(r.abstained_ok),
            f"{r.must_mention_hits}/{r.confirmed_mention_hits}/{r.must_mention}",
            str(r.leaked),
            str(r.unsupported_in_answer),
            str(r.tool_calls),
            str(r.llm_calls),
            str(r.tokens),
            f"{r.seconds:.2f}",
        )
    return table


def _confusion_table(report: EvaluationReport) -> Table:
    """Expected kind (rows) against the kind the answer gave (columns)."""
    matrix = kind_confusion(report.packs)
    given = sorted({g for row in matrix.values() for g in row})
    table = Table(title="Fault kind: expected (rows) x given (columns)")
    table.add_column("expected")
    for column in given:
        table.add_column(column)
    for expected, row in sorted(matrix.items()):
        table.add_row(expected, *(str(row.get(g, 0)) for g in given))
    return table


def _folders_table(report: EvaluationReport) -> Table:
    table = Table(title="Per folder")
    columns = FOLDER_RATES
    table.add_column("folder")
    for column in columns:
        table.add_column(column)
    for folder, totals in report.folders.items():
        table.add_row(folder, *("-" if totals[c] is None else str(totals[c]) for c in columns))
    return table


def _totals_line(report: EvaluationReport) -> str:
    totals = report.totals
    return (
        f"AC@1 {totals['ac_at_1']}  AC@3 {totals['ac_at_3']}  "
        f"kind {totals['kind_accuracy']} (first kind only {totals['kind_accuracy_strict']})  "
        f"abstained-ok {totals['abstained_ok']}  "
        f"must-mention {totals['must_mention_rate']}  "
        f"confirmed-mention {totals['confirmed_mention_rate']}  leaks {totals['leaks']}  "
        f"unsupported {totals['unsupported_in_answer']}  decisions {totals['decisions']}  "
        f"coherence findings {totals['coherence_findings']} "
        f"(in {totals['answers_with_coherence_findings']} answers)"
    )


class Command(BaseCommand):
    help = (
        "Run scenario packs as real sessions and report AC@1, AC@3, kind (with its confusion "
        "matrix), abstentions, leaks and cost, in total and per folder; a pack that fails to "
        "load is a miss in every rate."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="pack folders, or folders of packs")
        parser.add_argument("--provider", choices=["offline", "openai", "scripted"])
        parser.add_argument("--json", dest="json_out", help="write the report as JSON here")

    def handle(
        self,
        *args: Any,
        paths: list[str],
        provider: str | None,
        json_out: str | None,
        **options: Any,
    ) -> None:
        packs = _packs_under(paths)
        if not packs:
            raise CommandError("no scenario packs found")
        # OutputWrapper is a text stream (TextIOBase) the stubs do not call IO[str]
        console = Console(file=cast(IO[str], self.stdout), force_terminal=False, width=140)
        results = []
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("evaluating", total=len(packs))
            for path in packs:
                progress.update(task, description=f"evaluating {path.name}")
                results.append(pack_evaluate(path=path, provider=provider))
                progress.advance(task)
        report = EvaluationReport(packs=results)
        console.print(_results_table(results))
        console.print(_confusion_table(report))
        console.print(_folders_table(report))
        console.print(_totals_line(report))
        if json_out:
            Path(json_out).write_text(
                json.dumps(report.as_dict(), ensure_ascii=False, indent=2), encoding="utf-8"
            )
        failed = [r for r in results if r.status != "completed"]
        if failed:
            raise CommandError("; ".join(f"{r.pack}: {r.status} {r.error[:200]}" for r in failed))
