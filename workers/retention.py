"""The audit retention cleanup task (issue #7, item 4); the work is ``dashboard.audit.retention``.

Daily on the beat schedule (``settings.CELERY_BEAT_SCHEDULE["audit-retention"]``); the retention is
``settings.AUDIT_RETENTION_DAYS`` (default 365 days).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from dashboard.audit.retention import cleanup_audit


@shared_task(name="workers.retention.cleanup")
def cleanup() -> dict[str, Any]:
    """Beat's daily entry point: delete audit rows past the retention, record the run."""
    return cleanup_audit().as_dict()
