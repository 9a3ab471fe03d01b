import json
from pathlib import Path
from typing import IO, Any, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from diagnosis.evaluation import EvaluationReport, PackResult, pack_evaluate
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
            _mark(r.kind_ok) if r.kind_ok is None else f"{_mark(r.kind_ok)} {r.root_cause_kind}",
            f"{r.must_mention_hits}/{r.confirmed_mention_hits}/{r.must_mention}",
            str(r.leaked),
            str(r.unsupported_in_answer),
            str(r.tool_calls),
            str(r.llm_calls),
            str(r.tokens),
            f"{r.seconds:.2f}",
        )
    return table


def _totals_line(report: EvaluationReport) -> str:
    totals = report.totals
    return (
        f"AC@1 {totals['ac_at_1']}  AC@3 {totals['ac_at_3']}  "
        f"kind {totals['kind_accuracy']}  must-mention {totals['must_mention_rate']}  "
        f"confirmed-mention {totals['confirmed_mention_rate']}  leaks {totals['leaks']}  "
        f"unsupported {totals['unsupported_in_answer']}  decisions {totals['decisions']}  "
        f"coherence findings {totals['coherence_findings']} "
        f"(in {totals['answers_with_coherence_findings']} answers)"
    )


class Command(BaseCommand):
    help = "Run scenario packs as real sessions and report AC@1, AC@3, leaks and cost."

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
        console.print(_totals_line(report))
        if json_out:
            Path(json_out).write_text(
                json.dumps(report.as_dict(), ensure_ascii=False, indent=2), encoding="utf-8"
            )
        failed = [r for r in results if r.status != "completed"]
        if failed:
            raise CommandError("; ".join(f"{r.pack}: {r.status} {r.error[:200]}" for r in failed))
