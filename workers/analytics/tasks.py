"""Celery tasks for the analytics pipeline (thin: the work is in ``runner``).

The web process sends ``workers.analytics.run`` by name with the id of an ``AnalyticsRun`` row it
created; beat sends ``workers.analytics.nightly``, which compacts and recomputes yesterday (UTC) in
full, and ``workers.analytics.current`` every few minutes, which computes today so far for the
clusters whose log grew since the last run (``cursor``). Progress goes
to the row (the page polls it) and to the task state (``PROGRESS`` with ``progress``/``message``)
for anyone watching the task through Celery.

``acks_late`` is safe: a redelivered task finds its row no longer queued and does nothing, and the
job itself is idempotent.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from celery import Task, shared_task

from dashboard.analytics.models import AnalyticsRun
from workers.analytics import runner
from workers.analytics.inputs import yesterday_utc

logger = logging.getLogger(__name__)


def _reporter(task: Task[Any, Any]) -> runner.Reporter:
    def report(run: AnalyticsRun) -> None:
        if not task.request.id:  # called as a plain function (tests, shell)
            return
        try:
            task.update_state(state="PROGRESS", meta={"run": run.pk, "progress": run.progress, "message": run.message})
        except Exception:  # the result backend is a convenience; the row is the record
            logger.warning("could not publish progress of analytics run %s", run.pk, exc_info=True)

    return report


@shared_task(bind=True, name="workers.analytics.run", acks_late=True)
def run_analytics(self: Task[Any, Any], run_id: int) -> dict[str, Any]:
    """Run the analytics pipeline for the queued ``AnalyticsRun`` ``run_id``."""
    run = AnalyticsRun.objects.get(pk=run_id)
    if not run.task_id and self.request.id:
        AnalyticsRun.objects.filter(pk=run.pk).update(task_id=self.request.id)
    return runner.execute(run, report=_reporter(self)).as_status()


@shared_task(bind=True, name="workers.analytics.nightly", acks_late=True)
def nightly(self: Task[Any, Any]) -> dict[str, Any]:
    """Report on yesterday (UTC) for every cluster: the beat schedule's entry point."""
    day = yesterday_utc()
    run = runner.create_run(day, day, trigger=AnalyticsRun.Trigger.NIGHTLY)
    AnalyticsRun.objects.filter(pk=run.pk).update(task_id=self.request.id or "")
    return runner.execute(run, report=_reporter(self)).as_status()


@shared_task(bind=True, name="workers.analytics.current", acks_late=True)
def current(self: Task[Any, Any]) -> dict[str, Any]:
    """Today so far, for every cluster whose log grew since its cursor; nothing when none did.

    Never queues behind another run: a tick that finds one active is skipped (the next tick comes
    within minutes), so a slow run cannot pile up a backlog of them.
    """
    return runner.execute_current(datetime.now(UTC).date(), report=_reporter(self), task_id=self.request.id or "")
