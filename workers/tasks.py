"""Celery tasks (thin wrappers; the work lives in modules of their own)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="workers.ping")
def ping() -> str:
    """Round-trip check used by tests and by operators (`celery call workers.ping`)."""
    return "pong"


# Task modules outside autodiscovery's reach (``workers.tasks`` is the one Celery looks for).
import workers.analytics.tasks  # noqa: E402, F401
