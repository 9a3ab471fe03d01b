"""Database helpers the writers share."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from django.db import transaction


def insert_guarded() -> AbstractContextManager[object]:
    """Around an INSERT that may clash with a unique constraint: a savepoint inside a
    transaction, so that the clash does not break it; nothing in autocommit, where a
    failed INSERT leaves nothing behind (and a BEGIN/COMMIT pair would be two more
    round trips for every row)."""
    if transaction.get_connection().in_atomic_block:
        return transaction.atomic()
    return nullcontext()
