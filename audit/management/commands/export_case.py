"""Write one session as a scenario pack that replays it (a regression case)."""

import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.services import session_export
from diagnosis.models import DiagnosisSession


def _session_get(identifier: str) -> DiagnosisSession:
    sessions = DiagnosisSession.objects.select_related("environment")
    try:
        return sessions.get(public_id=uuid.UUID(identifier))
    except ValueError:
        pass
    except DiagnosisSession.DoesNotExist as exc:
        raise CommandError(f"no session with public id {identifier}") from exc
    if identifier.isdigit():
        session = sessions.filter(pk=int(identifier)).first()
        if session is not None:
            return session
    raise CommandError(f"no session {identifier!r} (give its public id or its number)")


class Command(BaseCommand):
    help = (
        "Export a session as a scenario pack OUT_DIR/case-<id>/ (scenario.yaml, recorded/, "
        "scripted/) that `evaluate` replays."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id", help="the session's public id (UUID) or number")
        parser.add_argument("out_dir", help="folder to write the pack folder into")

    def handle(self, *args: Any, session_id: str, out_dir: str, **options: Any) -> None:
        session = _session_get(session_id)
        if not session.is_terminal:
            raise CommandError(f"session {session.public_id} is still {session.status}")
        folder = session_export(session=session, actor=None, out_dir=Path(out_dir))
        self.stdout.write(str(folder))
