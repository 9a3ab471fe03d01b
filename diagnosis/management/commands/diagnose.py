import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.table import Table

from diagnosis.evidence.services import environment_sync_from_pack
from diagnosis.flow.run import diagnosis_run
from diagnosis.models import DiagnosisSession, Environment
from diagnosis.selectors import session_claims_view
from diagnosis.services import answer_language_pick, diagnosis_submit, environment_default


class Command(BaseCommand):
    help = "Run one diagnosis in-process and print the answer, decision and claims."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question")
        parser.add_argument("--pack", help="a scenario pack folder to diagnose against")
        parser.add_argument("--environment", help="an environment slug")
        parser.add_argument("--provider", choices=["offline", "openai", "scripted"])
        parser.add_argument(
            "--language",
            default=None,
            help="the answer's language (default: the question's, as chat and the API pick it)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON instead")

    def handle(
        self,
        *args: Any,
        question: str,
        pack: str | None,
        environment: str | None,
        provider: str | None,
        language: str | None,
        **options: Any,
    ) -> None:
        if pack:
            env = environment_sync_from_pack(path=Path(pack))
        elif environment:
            found = Environment.objects.filter(slug=environment).first()
            if found is None:
                raise CommandError(f"no environment {environment!r}")
            env = found
        else:
            env = environment_default()
        session = diagnosis_submit(
            question=question,
            environment=env,
            requested_by="cli",
            source=DiagnosisSession.Source.API,
            language=language or answer_language_pick(question=question),
            provider=provider,
            enqueue=False,
        )
        session = diagnosis_run(session_id=session.id) or DiagnosisSession.objects.get(
            pk=session.pk
        )
        claims = session_claims_view(session=session)
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "session": str(session.public_id),
                        "status": session.status,
                        "decision": session.decision,
                        "answer_source": session.answer_source,
                        "final_answer": session.final_answer,
                        "claims": [c.as_dict() for c in claims],
                    },
                    ensure_ascii=False,
                    indent=2,
                )
            )
            return
        console = Console(file=self.stdout, width=140)  # type: ignore[arg-type]
        console.print(session.final_answer, markup=False, highlight=False)
        console.print(
            f"decision: {session.decision or '-'}   status: {session.status}   "
            f"answer source: {session.answer_source or '-'}   session: {session.public_id}",
            markup=False,
        )
        table = Table(title="claims")
        for column in ("claim", "type", "gatekeeper", "verifier", "placement", "evidence"):
            table.add_column(column)
        for c in (view.claim for view in claims):
            table.add_row(
                c.text[:60],
                c.claim_type,
                c.verdict,
                c.classification or "-",
                c.placement,
                "; ".join(f"{b.source_id}: {b.excerpt[:40]}" for b in c.bindings),
            )
        console.print(table)
