"""The state-change ingest: the controllers' streams copied into the audit history (``StateChange``).

``workers.audit.ingest_state_changes`` (beat, every 5 s): copy new entries of each cluster's
state-change stream (``dashboard.lib.redis_keys.state_change_stream_key``) into ``StateChange`` rows.
Rows and the stream cursor are committed in one transaction and rows are unique on
``(cluster, controller_epoch, seq)``, so a worker restart neither loses nor duplicates a record.
Records an operator action caused (a preferred election, a reassignment or its cancellation) are
linked to it (``StateChange.action``) as they are stored (``link_to_actions``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import redis
from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controller_core.record_kinds import RecordKind
from dashboard.audit.models import Action, IngestCursor, StateChange
from dashboard.lib.redis_keys import STREAM_FIELD, state_change_stream_key

logger = logging.getLogger(__name__)

STREAM_BATCH: Final = 1000


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _row(cluster: str, record: dict[str, Any]) -> StateChange:
    ts = datetime.fromtimestamp(float(record.get("ts") or 0) / 1000.0, tz=UTC)
    isr_before, isr_after = record.get("isr_before"), record.get("isr_after")
    return StateChange(
        cluster=cluster,
        controller_epoch=int(record["controller_epoch"]),
        seq=int(record["seq"]),
        controller_id=_opt_int(record.get("controller_id")),
        ts=ts,
        kind=str(record.get("kind") or "")[:64],
        cause=str(record.get("cause") or "")[:128],
        event_id=str(record.get("event_id") or "")[:64],
        entity=str(record.get("entity") or "")[:300],
        topic=str(record.get("topic") or "")[:255],
        partition=_opt_int(record.get("partition")),
        replica=_opt_int(record.get("replica")),
        from_state=str(record.get("from_state") or "")[:64],
        to_state=str(record.get("to_state") or "")[:64],
        leader_before=_opt_int(record.get("leader_before")),
        leader_after=_opt_int(record.get("leader_after")),
        leader_epoch_before=_opt_int(record.get("leader_epoch_before")),
        leader_epoch_after=_opt_int(record.get("leader_epoch_after")),
        isr_before=list(isr_before) if isr_before is not None else None,
        isr_after=list(isr_after) if isr_after is not None else None,
        error=str(record.get("error") or ""),
        record=record,
    )


LINK_GRACE: Final = timedelta(seconds=30)
LINK_SKEW: Final = timedelta(seconds=5)
LINK_PENDING: Final = timedelta(hours=24)
LINK_CANDIDATES: Final = 50
LINKED_CAUSES_EXCLUDED: Final = frozenset({"AutoPreferredReplicaLeaderElection"})


def _caused_by_preferred_request(row: StateChange) -> bool:
    """A record the controller wrote while acting on ``/admin/preferred_replica_election``."""
    if row.kind == RecordKind.PREFERRED_ELECTION_REQUEST:
        return True
    return (row.record or {}).get("strategy") == "preferred" and row.cause not in LINKED_CAUSES_EXCLUDED


REASSIGNMENT_CAUSES: Final = frozenset(
    {"ZkPartitionReassignment", "ApiPartitionReassignment", "PartitionReassignmentIsrChange"}
)
"""Controller events that carry a reassignment forward (the ISR change completes one)."""


def _caused_by_reassignment(row: StateChange) -> bool:
    """A record the controller wrote while moving replicas for ``/admin/reassign_partitions`` or the API."""
    return row.cause in REASSIGNMENT_CAUSES or (row.record or {}).get("strategy") == "reassign"


def _partitions_of(row: StateChange) -> set[tuple[str, int]]:
    if row.kind == RecordKind.PREFERRED_ELECTION_REQUEST:
        out = set()
        for key in (row.record or {}).get("results") or {}:
            topic, _, part = str(key).rpartition("-")
            if topic and part.isdigit():
                out.add((topic, int(part)))
        return out
    return {(row.topic, row.partition)} if row.partition is not None else set()


@dataclass(frozen=True, slots=True)
class _Window:
    action_id: int
    start: datetime
    end: datetime | None
    partitions: frozenset[tuple[str, int]]


def _window(action: Action) -> _Window:
    """When and on what an action's request can have had effects: from its submission until it
    finished plus a grace (a *pending* request may be processed much later: a day), on the
    partitions it submitted (all it planned while it still runs)."""
    journal = (action.outcome or {}).get("journal") or {}
    planned = journal.get("submitted") if action.status != Action.Status.RUNNING else None
    if planned is None:
        planned = [[r["topic"], r["partition"]] for r in (action.preview or {}).get("electable", [])]
    parts = frozenset((str(t), int(p)) for t, p in planned)
    end = None
    if action.finished is not None:
        end = action.finished + (LINK_PENDING if action.status == Action.Status.PENDING else LINK_GRACE)
    return _Window(action.pk, action.created - LINK_SKEW, end, parts)


def _reassignment_window(action: Action) -> _Window:
    """A reassignment (or its cancellation) acts on the partitions it lists, from its submission until
    the controller finished moving them: open while it runs, then a grace after it was recorded done."""
    parts = frozenset(
        (str(p["topic"]), int(p["partition"]))
        for p in (action.parameters or {}).get("partitions") or []
        if isinstance(p, dict) and "topic" in p and "partition" in p
    )
    done = action.status in (Action.Status.SUCCEEDED, Action.Status.PARTIAL, Action.Status.FAILED)
    end = action.finished + LINK_GRACE if done and action.finished is not None else None
    return _Window(action.pk, action.created - LINK_SKEW, end, parts)


def link_to_actions(cluster: str, rows: Sequence[StateChange]) -> int:
    """Set ``action`` on the records an operator action caused; returns how many rows were linked.

    Preferred elections: same cluster, a partition the action submitted, a preferred-election cause
    (not the controller's own rebalance), within the action's window. Reassignments and their
    cancellations: a partition the action lists, a reassignment cause, while it was in progress. The
    latest matching action wins.
    """
    linked = _link_preferred(cluster, rows)
    moving = [r for r in rows if r.action_id is None and _caused_by_reassignment(r)]
    if moving:
        earliest = min(r.ts for r in moving)
        latest = max(r.ts for r in moving)
        candidates = (
            Action.objects.filter(
                cluster=cluster,
                kind__in=(Action.Kind.REASSIGNMENT, Action.Kind.REASSIGNMENT_CANCEL),
                created__lte=latest + LINK_SKEW,
            )
            .exclude(status__in=(Action.Status.REJECTED, Action.Status.QUEUED))
            .filter(Q(finished__isnull=True) | Q(finished__gte=earliest - LINK_GRACE))
            .only("pk", "created", "finished", "status", "parameters")
            .order_by("-created")[:LINK_CANDIDATES]
        )
        linked += _assign(moving, [_reassignment_window(a) for a in candidates])
    return linked


def _assign(rows: Sequence[StateChange], windows: Sequence[_Window]) -> int:
    linked = 0
    for row in rows:
        parts = _partitions_of(row)
        for w in windows:
            if w.start <= row.ts and (w.end is None or row.ts <= w.end) and parts & w.partitions:
                row.action_id = w.action_id
                linked += 1
                break
    return linked


def _link_preferred(cluster: str, rows: Sequence[StateChange]) -> int:
    relevant = [r for r in rows if _caused_by_preferred_request(r)]
    if not relevant:
        return 0
    earliest = min(r.ts for r in relevant)
    latest = max(r.ts for r in relevant)
    candidates = (
        Action.objects.filter(cluster=cluster, kind=Action.Kind.PREFERRED_ELECTION, created__lte=latest + LINK_SKEW)
        .exclude(status__in=(Action.Status.REJECTED, Action.Status.QUEUED))
        .filter(Q(finished__isnull=True) | Q(finished__gte=earliest - LINK_PENDING))
        .only("pk", "created", "finished", "status", "preview", "outcome")
        .order_by("-created")[:LINK_CANDIDATES]
    )
    return _assign(relevant, [_window(a) for a in candidates])


def ingest_stream(client: redis.Redis, cluster: str, batch: int = STREAM_BATCH, max_batches: int = 100) -> int:
    """Store the entries after the cluster's cursor; returns how many entries were read."""
    read = 0
    for _ in range(max_batches):
        cursor, _created = IngestCursor.objects.get_or_create(cluster=cluster)
        entries = client.xrange(state_change_stream_key(cluster), min=f"({cursor.last_id}", count=batch)
        if not entries:
            break
        rows = []
        for entry_id, fields in entries:
            raw = (fields or {}).get(STREAM_FIELD.encode()) or (fields or {}).get(STREAM_FIELD)
            try:
                if raw is None:
                    raise ValueError(f"no field {STREAM_FIELD}")
                record = json.loads(raw)
                rows.append(_row(cluster, record))
            except (TypeError, ValueError, KeyError) as exc:
                logger.error("skipping unreadable state-change entry %s of %s: %s", entry_id, cluster, exc)
        link_to_actions(cluster, rows)
        last = entries[-1][0]
        last_id = last.decode() if isinstance(last, bytes) else str(last)
        with transaction.atomic():
            StateChange.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
            IngestCursor.objects.filter(pk=cursor.pk).update(
                last_id=last_id, ingested=cursor.ingested + len(rows), updated=timezone.now()
            )
        read += len(entries)
        if len(entries) < batch:
            break
    return read


@shared_task(name="workers.audit.ingest_state_changes")
def ingest_state_changes(cluster: str | None = None) -> dict[str, int]:
    """Ingest every registered cluster's stream (or one); schedule it every few seconds with beat."""
    from dashboard.clusters.models import Cluster

    # Removed clusters too (their cursors remain): a managed cluster's last records (its candidates'
    # resignations, written just after its removal) still reach the history.
    registered = Cluster.objects.values_list("name", flat=True)
    names = [cluster] if cluster else sorted({*registered, *IngestCursor.objects.values_list("cluster", flat=True)})
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return {name: ingest_stream(client, name) for name in names}
    finally:
        client.close()
