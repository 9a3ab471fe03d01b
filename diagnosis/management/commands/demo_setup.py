from typing import Any

from django.core.management.base import BaseCommand

from diagnosis.demo import demo_accounts_ensure
from diagnosis.evidence.services import environments_sync_from_packs


class Command(BaseCommand):
    help = "Create the demo accounts and demo environments (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        accounts = demo_accounts_ensure()
        for account in accounts:
            self.stdout.write(f"  {account.role:<9} {account.username} / {account.password}")
        for environment in environments_sync_from_packs():
            self.stdout.write(f"  environment {environment.slug}: {environment.name}")
