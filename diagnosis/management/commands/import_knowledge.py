from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from diagnosis.evidence.services import knowledge_import_markdown
from diagnosis.models import Environment


class Command(BaseCommand):
    help = "Import the Markdown runbooks of FOLDER (idempotent; chunk ids stay stable)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder")
        parser.add_argument(
            "--environment", help="slug of the environment the runbooks belong to (default: all)"
        )
        parser.add_argument(
            "--prune", action="store_true", help="delete documents whose file is gone"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        environment = None
        if options["environment"]:
            environment = Environment.objects.filter(slug=options["environment"]).first()
            if environment is None:
                raise CommandError(f"no environment with slug {options['environment']!r}")
        try:
            result = knowledge_import_markdown(
                folder=options["folder"], environment=environment, prune=options["prune"]
            )
        except (FileNotFoundError, UnicodeDecodeError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{len(result.created)} created, {len(result.updated)} updated, "
            f"{len(result.unchanged)} unchanged, {result.removed} removed"
        )
        for document in result.documents:
            self.stdout.write(
                f"  {document.slug}: {document.title} ({document.chunks.count()} chunks)"
            )
