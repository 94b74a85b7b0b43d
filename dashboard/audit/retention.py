"""Audit retention (issue #7, item 4): ``cleanup_audit`` deletes ``Action`` and ``StateChange`` rows
older than ``settings.AUDIT_RETENTION_DAYS`` (default 365) in bounded batches, each its own short
transaction, so a large first cleanup neither holds a long lock nor builds one huge statement, and a
worker killed midway leaves the rest for the next run. Run daily by ``workers.retention.cleanup`` and
by ``manage.py audit_retention``. Every run (dry runs included) records one RETENTION_CLEANUP action
with the cutoff and the counts. Rows are removed with queryset deletes:
the models' instance ``delete()`` refuses, which keeps everything else append-only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.conf import settings
from django.db import transaction
from django.db.models import Model, QuerySet
from django.utils import timezone

from dashboard.audit.models import Action, StateChange

logger = logging.getLogger(__name__)

DEFAULT_RETENTION_DAYS: Final = 365
BATCH: Final = 5000


@dataclass(frozen=True, slots=True)
class Report:
    cutoff: datetime
    days: int
    actions: int
    state_changes: int
    dry_run: bool
    action_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff.isoformat(),
            "retention_days": self.days,
            "actions_deleted": self.actions,
            "state_changes_deleted": self.state_changes,
            "dry_run": self.dry_run,
            "action_id": self.action_id,
        }


def retention_days() -> int:
    days = int(getattr(settings, "AUDIT_RETENTION_DAYS", DEFAULT_RETENTION_DAYS))
    if days < 1:
        raise ValueError(f"AUDIT_RETENTION_DAYS must be at least 1, not {days}")
    return days


def _delete_in_batches(qs: QuerySet[Any], batch: int) -> int:
    total = 0
    model: type[Model] = qs.model
    while True:
        ids = list(qs.order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return total
        with transaction.atomic():
            deleted, _ = model._default_manager.filter(pk__in=ids).delete()
        total += len(ids)
        if deleted == 0:  # nothing went: avoid looping forever on rows something else holds
            return total


def cleanup_audit(
    *, days: int | None = None, dry_run: bool = False, batch: int = BATCH, now: datetime | None = None
) -> Report:
    """Delete (or, with ``dry_run``, count) audit rows older than ``days``; records the run."""
    days = retention_days() if days is None else int(days)
    if days < 1:
        raise ValueError(f"the retention must be at least 1 day, not {days}")
    if batch < 1:
        raise ValueError("the batch size must be at least 1")
    started = timezone.now()
    cutoff = (now or started) - timedelta(days=days)
    changes = StateChange.objects.filter(ts__lt=cutoff)
    actions = Action.objects.filter(created__lt=cutoff)
    if dry_run:
        n_changes, n_actions = changes.count(), actions.count()
    else:
        n_changes = _delete_in_batches(changes, batch)
        n_actions = _delete_in_batches(actions, batch)
    finished = timezone.now()
    record = Action.objects.create(
        username="",
        kind=Action.Kind.RETENTION_CLEANUP,
        status=Action.Status.SUCCEEDED,
        parameters={"retention_days": days, "cutoff": cutoff.isoformat(), "dry_run": dry_run, "batch_size": batch},
        outcome={"actions_deleted": n_actions, "state_changes_deleted": n_changes},
        reason="dry run: nothing deleted" if dry_run else "",
        started=started,
        finished=finished,
        duration_ms=int((finished - started).total_seconds() * 1000),
    )
    logger.info(
        "audit retention (%s days, dry run %s): %s actions, %s state changes", days, dry_run, n_actions, n_changes
    )
    return Report(cutoff, days, n_actions, n_changes, dry_run, record.pk)
