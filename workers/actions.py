"""Celery tasks that carry out operator actions (issue #7); the web process sends them by name.

``workers.actions.preferred_election``: write ``/admin/preferred_replica_election`` in Kafka's format
for the partitions the operator previewed, ``batch_size`` at a time. A request already pending is
refused (nothing written, status *rejected*). Between batches, and after the last one, the task waits
up to ``wait_s`` for the controller to consume the znode; it then reads every partition's state and
records per partition whether its preferred replica leads. When the controller does not consume the
request in time the action stays *pending* and the unwritten batches are listed.

Exactly once under redelivery (``acks_late``; a worker may be SIGKILLed mid-task): see
``run_preferred_election``. Exactly once also when two copies run at the same time (the Redis
transport redelivers a task that outlives its ``visibility_timeout`` while the first copy still runs):
a copy acts only while it holds the action's run lease (``RunLease``, ``begin_run``), and every write it
makes is fenced by that lease.

``workers.actions.recover_stalled`` (beat, every 15 s): re-queue an admin action whose task copy died
after a duplicate delivery acked its message (``workers.action_lease.requeue_stalled``).

The state-change ingest that fills the audit history is ``workers.audit``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from celery import shared_task
from django.utils import timezone
from kazoo.client import KazooClient

from controller_core.errors import ZkOperationError
from controller_core.model import TopicPartition
from controller_core.zk import paths
from controller_core.zk.client import new_client
from controller_core.zk.store import ZkStore
from dashboard.actions.zk import zk_security
from dashboard.audit.models import Action
from workers.action_lease import LeaseLost, begin_run, requeue_stalled, status_of

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


FINAL: Final = (
    Action.Status.SUCCEEDED, Action.Status.PARTIAL, Action.Status.PENDING, Action.Status.FAILED, Action.Status.REJECTED,
)  # fmt: skip


def _save_outcome(action: Action) -> None:
    """Commit ``action.outcome`` now: the journal a redelivered task resumes from.

    Fenced by the run lease: the row is written only while it still names this copy's lease
    (``action.lease_owner``; empty when run without one, as tests do), so a copy that lost its lease
    to a takeover stops here (``LeaseLost``) instead of writing the batch after the journal moved on.
    """
    if action.pk is None:
        return
    if not Action.objects.filter(pk=action.pk, lease_owner=action.lease_owner).update(outcome=action.outcome):
        raise LeaseLost(f"action #{action.pk}: the run lease {action.lease_owner or '(none)'} is no longer held")


def _plan_batches(action: Action, size: int) -> list[list[list[Any]]]:
    """The batches, fixed at the first attempt (kept in the journal) so a resumed task writes the same ones."""
    journal = action.outcome.setdefault("journal", {})
    if "plan" not in journal:
        rows = list(action.preview.get("electable", []))
        tps = [[r["topic"], int(r["partition"])] for r in rows]
        journal["plan"] = [tps[i : i + size] for i in range(0, len(tps), size)]
        journal["done"] = 0
        journal["writing"] = None
    return list(journal["plan"])


def _still_to_elect(
    store: ZkStore, batch: list[TopicPartition], rows: Sequence[dict[str, Any]]
) -> list[TopicPartition]:
    """The partitions of ``batch`` not yet led by their preferred replica (used after a crash around
    a write: whatever the controller already elected is not requested again)."""
    preferred = {(r["topic"], int(r["partition"])): r["preferred"] for r in rows}
    states = store.get_partition_states(batch)
    out = []
    for tp in batch:
        read = states.get(tp)
        leader = read.state.leader_and_isr.leader if read is not None and read.state is not None else None
        if leader != preferred.get((tp.topic, tp.partition)):
            out.append(tp)
    return out


def run_preferred_election(
    action: Action,
    store: ZkStore,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    wait_s: float = DEFAULT_WAIT_S,
    checkpoint: Callable[[Action], None] = _save_outcome,
) -> Action:
    """Carry out ``action`` with ``store`` (tests call this with their own ZooKeeper client).

    Exactly once under redelivery: before a batch is written the journal (``outcome["journal"]``) marks
    it *writing* and is committed (``checkpoint``); after the controller consumed it the batch is marked
    done. A task started again for the same action skips done batches; for the one marked *writing* it
    waits on the request still in ZooKeeper when that request is ours, and otherwise re-requests only the
    partitions whose preferred replica does not lead yet. Per-partition outcomes are committed as each
    batch lands, for the live progress on the action page.
    """
    size = max(1, min(int(batch_size), MAX_BATCH_SIZE))
    action.outcome = dict(action.outcome or {})
    rows: list[dict[str, Any]] = list(action.preview.get("electable", []))
    batches = [[TopicPartition(str(t), int(p)) for t, p in batch] for batch in _plan_batches(action, size)]
    journal = action.outcome["journal"]
    action.outcome.setdefault("batch_size", len(batches[0]) if batches else size)
    written: list[dict[str, Any]] = action.outcome.setdefault("batches", [])
    landed: list[dict[str, Any]] = action.outcome.setdefault("partitions", [])
    submitted = {TopicPartition(str(t), int(p)) for t, p in journal.get("submitted", [])}
    epoch = store.get_controller_epoch()
    action.controller_epoch = epoch.epoch if epoch is not None else None
    status = Action.Status.SUCCEEDED
    error = ""
    if not batches:
        status, error = Action.Status.REJECTED, "nothing to elect"
    for index in range(int(journal.get("done", 0)), len(batches)):
        batch = batches[index]
        to_write: list[TopicPartition] = batch
        ours_pending = False
        if journal.get("writing") == index:  # a previous attempt stopped around this batch's write
            pending = store.get_preferred_replica_election()
            ours_pending = pending is not None and pending == set(batch)
            if not ours_pending:
                to_write = _still_to_elect(store, batch, rows)
            journal["resumed_batches"] = [*journal.get("resumed_batches", []), index]
        if not ours_pending and to_write:
            journal["writing"] = index
            checkpoint(action)
            try:
                store.create_preferred_replica_election_request(to_write)
            except ZkOperationError as exc:
                journal["writing"] = None
                if not submitted:
                    status = Action.Status.REJECTED
                    error = f"refused: {exc} (/admin/preferred_replica_election exists); nothing written"
                else:
                    status, error = Action.Status.PENDING, f"batch {index + 1}: {exc}"
                break
        submitted.update(batch)
        journal["submitted"] = [[tp.topic, tp.partition] for tp in sorted(submitted)]
        checkpoint(action)
        consumed = _wait_consumed(store, wait_s) if (ours_pending or to_write) else True
        written.append({"size": len(batch), "result": "consumed by the controller" if consumed else "still pending"})
        in_batch = set(batch)
        batch_rows = [r for r in rows if TopicPartition(r["topic"], int(r["partition"])) in in_batch]
        landed.extend(_outcomes(store, batch_rows, submitted))
        journal["writing"] = None
        journal["done"] = index + 1
        checkpoint(action)
        if not consumed:
            status = Action.Status.PENDING
            error = f"the controller has not processed batch {index + 1} of {len(batches)} within {wait_s:g} s"
            break
    if submitted:
        final = _outcomes(store, rows, submitted)
        action.outcome["partitions"] = final
        if status == Action.Status.SUCCEEDED and any(p["outcome"].startswith("not") for p in final):
            status = Action.Status.PARTIAL
    action.status = status
    action.error = error
    return action


def _connect(connect: str, timeout: float = 10.0) -> KazooClient:
    # The dashboard's identity: with ZooKeeper ACLs on, /admin writes need it (controller_core.zk.client).
    client = new_client(connect, timeout=timeout, security=zk_security())
    client.start(timeout=timeout)
    return client


@shared_task(name="workers.actions.preferred_election")
def preferred_election(
    action_id: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
    wait_s: float = DEFAULT_WAIT_S,
    connect: str | None = None,
    poll_s: float = 1.0,
) -> str:
    """Run the queued preferred election ``action_id``; returns its final status. ``connect``
    overrides the cluster's ZooKeeper connect string (tests).

    The one task behind every way of starting a preferred election (page, API, a re-queued or
    hand-sent task): an action submitted with the catch-up option (``parameters["catch_up"]``) waits
    for its preferred replicas to catch up (``workers.catchup_election.run_catch_up``, checking every
    ``poll_s``), any other is written in batches (``run_preferred_election``).

    ``acks_late`` redelivers the task when a worker dies mid-task, and the Redis transport redelivers
    one that outlives its visibility timeout while the first copy still runs: every start counts in
    ``Action.attempts``, and only the copy holding the run lease acts (``begin_run``). A finished
    action is never run again; one whose holder died is taken over once its lease expires and resumes
    from its journal, so each batch (each partition, with catch-up) is requested once.
    """
    lease = begin_run(action_id, FINAL)
    if lease is None:
        return status_of(action_id)
    with lease:
        action = Action.objects.get(pk=action_id)
        try:
            return _run_leased(action, batch_size, wait_s, connect, poll_s)
        except LeaseLost as exc:  # taken over after this copy's lease expired: the new holder finishes
            logger.warning("preferred election #%s: %s; stopping without writing", action_id, exc)
            return status_of(action_id)


def _run_leased(action: Action, batch_size: int, wait_s: float, connect: str | None, poll_s: float) -> str:
    """The task's body, run by the lease holder; every row write is fenced by ``action.lease_owner``."""
    from dashboard.clusters.models import Cluster
    from workers.catchup_election import run_catch_up

    started = action.started or timezone.now()
    running = Action.objects.filter(pk=action.pk, lease_owner=action.lease_owner)
    if not running.update(status=Action.Status.RUNNING, started=started):
        raise LeaseLost(f"action #{action.pk}: the run lease was taken over before it started")
    action.started = started
    action.status = Action.Status.RUNNING
    client = None
    try:
        if connect is None:
            connect = Cluster.objects.get(name=action.cluster).zookeeper_connect
        client = _connect(connect)
        if (action.parameters or {}).get("catch_up"):
            run_catch_up(action, ZkStore(client), poll_s=poll_s)
        else:
            run_preferred_election(action, ZkStore(client), batch_size=batch_size, wait_s=wait_s)
    except LeaseLost:
        raise
    except Exception as exc:
        logger.exception("preferred election #%s failed", action.pk)
        action.status = Action.Status.FAILED
        action.error = f"{exc.__class__.__name__}: {exc}"
    finally:
        if client is not None:
            client.stop()
            client.close()
    _finish_leased(action)
    return str(action.status)


def _finish_leased(action: Action) -> None:
    """Record the final status and release the lease in one fenced UPDATE: a copy waiting for the lease
    can only get it after the outcome is committed, and then finds the action finished."""
    action.finished = timezone.now()
    started = action.started or action.finished
    action.duration_ms = int((action.finished - started).total_seconds() * 1000)
    fields = ("status", "error", "outcome", "controller_epoch", "started", "finished", "duration_ms")
    written = Action.objects.filter(pk=action.pk, lease_owner=action.lease_owner).update(
        **{f: getattr(action, f) for f in fields}, lease_owner="", lease_until=None
    )
    if not written:
        raise LeaseLost(f"action #{action.pk}: the run lease was taken over before the outcome was recorded")


@shared_task(name="workers.actions.recover_stalled")
def recover_stalled() -> list[int]:
    """Beat task: re-queue the actions whose task copy died with nothing left to redeliver it."""
    from dashboard.celery import app

    return requeue_stalled(lambda task, pk: app.send_task(task, args=[pk]))
