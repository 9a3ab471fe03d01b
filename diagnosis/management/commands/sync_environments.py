from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from diagnosis.evidence.packs import PackError
from diagnosis.evidence.services import environments_sync_from_packs


class Command(BaseCommand):
    help = "Create or update one scenario environment per scenario pack (SCENARIO_PACK_DIRS)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dirs", nargs="*", help="pack folders or folders of packs")
        parser.add_argument(
            "--skip-broken", action="store_true", help="sync the valid packs, report the others"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            environments = environments_sync_from_packs(
                dirs=options["dirs"] or None, strict=not options["skip_broken"]
            )
        except PackError as exc:
            raise CommandError(str(exc)) from exc
        for environment in environments:
            self.stdout.write(f"  {environment.slug:<28} {environment.name}")
        self.stdout.write(f"{len(environments)} scenario environment(s) in sync")
