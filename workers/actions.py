"""Celery tasks that carry out operator actions (issue #7); the web process sends them by name.

``workers.actions.preferred_election``: write ``/admin/preferred_replica_election`` in Kafka's format
for the partitions the operator previewed, ``batch_size`` at a time. A request already pending is
refused (nothing written, status *rejected*). Between batches, and after the last one, the task waits
up to ``wait_s`` for the controller to consume the znode; it then reads every partition's state and
records per partition whether its preferred replica leads. When the controller does not consume the
request in time the action stays *pending* and the unwritten batches are listed.

``workers.actions.ingest_state_changes``: copy new entries of ``kcp:{cluster}:state-changes`` into
``StateChange`` rows. Rows and the stream cursor are committed in one transaction and rows are unique
on ``(cluster, controller_epoch, seq)``, so a worker restart neither loses nor duplicates a record.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import redis
from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kazoo.client import KazooClient

from controller_core.errors import ZkOperationError
from controller_core.model import TopicPartition
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from dashboard.actions.models import Action, IngestCursor, StateChange

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE: Final = 500
MAX_BATCH_SIZE: Final = 2000
DEFAULT_WAIT_S: Final = 60.0


def _wait_consumed(store: ZkStore, wait_s: float, sleep: Callable[[float], None] = time.sleep) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        if store.client.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None:
            return True
        if time.monotonic() >= deadline:
            return False
        sleep(0.1)


def _outcomes(store: ZkStore, rows: Sequence[dict[str, Any]], submitted: set[TopicPartition]) -> list[dict[str, Any]]:
    tps = [TopicPartition(r["topic"], int(r["partition"])) for r in rows]
    states = store.get_partition_states(tps)
    out = []
    for tp, row in zip(tps, rows, strict=True):
        read = states.get(tp)
        leader = read.state.leader_and_isr.leader if read is not None and read.state is not None else None
        if tp not in submitted:
            outcome = "not submitted"
        elif leader == row["preferred"]:
            outcome = "elected" if row["leader"] != leader else "already preferred"
        else:
            outcome = f"not elected (leader {leader})"
        out.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "preferred": row["preferred"],
                "leader": leader,
                "outcome": outcome,
            }
        )
    return out


def run_preferred_election(
    action: Action, store: ZkStore, *, batch_size: int = DEFAULT_BATCH_SIZE, wait_s: float = DEFAULT_WAIT_S
) -> Action:
    """Carry out ``action`` with ``store`` (tests call this with their own ZooKeeper client)."""
    size = max(1, min(int(batch_size), MAX_BATCH_SIZE))
    rows: list[dict[str, Any]] = list(action.preview.get("electable", []))
    tps = [TopicPartition(r["topic"], int(r["partition"])) for r in rows]
    batches = [tps[i : i + size] for i in range(0, len(tps), size)]
    epoch = store.get_controller_epoch()
    action.controller_epoch = epoch.epoch if epoch is not None else None
    written: list[dict[str, Any]] = []
    submitted: set[TopicPartition] = set()
    status = Action.Status.SUCCEEDED
    error = ""
    if not tps:
        status, error = Action.Status.REJECTED, "nothing to elect"
    for index, batch in enumerate(batches):
        try:
            store.create_preferred_replica_election_request(batch)
        except ZkOperationError as exc:
            if index == 0:
                status = Action.Status.REJECTED
                error = f"refused: {exc} (/admin/preferred_replica_election exists); nothing written"
            else:
                status, error = Action.Status.PENDING, f"batch {index + 1}: {exc}"
            break
        submitted.update(batch)
        consumed = _wait_consumed(store, wait_s)
        written.append({"size": len(batch), "result": "consumed by the controller" if consumed else "still pending"})
        if not consumed:
            status = Action.Status.PENDING
            error = f"the controller has not processed batch {index + 1} of {len(batches)} within {wait_s:g} s"
            break
    outcome: dict[str, Any] = {"batches": written, "batch_size": size}
    if submitted:
        outcome["partitions"] = _outcomes(store, rows, submitted)
        if status == Action.Status.SUCCEEDED and any(p["outcome"].startswith("not") for p in outcome["partitions"]):
            status = Action.Status.PARTIAL
    action.outcome = outcome
    action.status = status
    action.error = error
    return action


def _connect(connect: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=timeout)
    client.start(timeout=timeout)
    return client


@shared_task(name="workers.actions.preferred_election")
def preferred_election(
    action_id: int, batch_size: int = DEFAULT_BATCH_SIZE, wait_s: float = DEFAULT_WAIT_S, connect: str | None = None
) -> str:
    """Run the queued preferred election ``action_id``; returns its final status. ``connect``
    overrides the cluster's ZooKeeper connect string (tests)."""
    from dashboard.clusters.models import Cluster

    action = Action.objects.get(pk=action_id)
    if action.status != Action.Status.QUEUED:
        return str(action.status)  # redelivered after it ran: never write twice
    started = timezone.now()
    Action.objects.filter(pk=action.pk).update(status=Action.Status.RUNNING, started=started)
    action.started = started
    client = None
    try:
        if connect is None:
            connect = Cluster.objects.get(name=action.cluster).zookeeper_connect
        client = _connect(connect)
        run_preferred_election(action, ZkStore(client), batch_size=batch_size, wait_s=wait_s)
    except Exception as exc:
        logger.exception("preferred election #%s failed", action_id)
        action.status = Action.Status.FAILED
        action.error = f"{exc.__class__.__name__}: {exc}"
    finally:
        if client is not None:
            client.stop()
            client.close()
    action.finished = timezone.now()
    action.duration_ms = int((action.finished - started).total_seconds() * 1000)
    action.save(update_fields=["status", "error", "outcome", "controller_epoch", "started", "finished", "duration_ms"])
    return str(action.status)


STREAM_BATCH: Final = 1000


def stream_key(cluster: str) -> str:
    return f"kcp:{cluster}:state-changes"


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


def ingest_stream(client: redis.Redis, cluster: str, batch: int = STREAM_BATCH, max_batches: int = 100) -> int:
    """Store the entries after the cluster's cursor; returns how many entries were read."""
    read = 0
    for _ in range(max_batches):
        cursor, _created = IngestCursor.objects.get_or_create(cluster=cluster)
        entries = client.xrange(stream_key(cluster), min=f"({cursor.last_id}", count=batch)
        if not entries:
            break
        rows = []
        for entry_id, fields in entries:
            raw = (fields or {}).get(b"r") or (fields or {}).get("r")
            try:
                if raw is None:
                    raise ValueError("no field r")
                record = json.loads(raw)
                rows.append(_row(cluster, record))
            except (TypeError, ValueError, KeyError) as exc:
                logger.error("skipping unreadable state-change entry %s of %s: %s", entry_id, cluster, exc)
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


@shared_task(name="workers.actions.ingest_state_changes")
def ingest_state_changes(cluster: str | None = None) -> dict[str, int]:
    """Ingest every registered cluster's stream (or one); schedule it every few seconds with beat."""
    from dashboard.clusters.models import Cluster

    names = [cluster] if cluster else list(Cluster.objects.values_list("name", flat=True))
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return {name: ingest_stream(client, name) for name in names}
    finally:
        client.close()
