from django.core.management.base import BaseCommand

from diagnosis.demo import demo_accounts_ensure


class Command(BaseCommand):
    help = "Create the demo accounts and demo environments (idempotent)."

    def handle(self, *args, **options):
        accounts = demo_accounts_ensure()
        for account in accounts:
            self.stdout.write(f"  {account.role:<9} {account.username} / {account.password}")
