"""Celery tasks of no one concern; the others live in the module their name says (``dashboard.celery``)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="workers.ping")
def ping() -> str:
    """Round-trip check used by tests and by operators (`celery call workers.ping`)."""
    return "pong"
