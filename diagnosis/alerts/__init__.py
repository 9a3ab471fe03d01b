"""Alertmanager ingest: a firing alert group starts one diagnosis, asked in the receiver's
language; receivers and their bearer tokens are created and rotated here."""
