"""Celery tasks that execute and cancel partition reassignments (issue #7, item 3).

``workers.reassign.execute``: write ``/admin/reassign_partitions`` in Kafka's format for the
partitions the operator submitted, after validating them again against ZooKeeper as it is now.
Refused (status *rejected*, nothing written) while another request is pending there.

Idempotent under redelivery (``acks_late``): every start increments ``Action.attempts``; a finished
action is left alone; before writing, ``outcome["writing"]`` is saved, and a delivery that finds it
set looks at the znode (holding exactly this request: it was ours) and at the topic znodes (the
controller already took it) instead of writing again. Two deliveries running at the same time (the
Redis transport redelivers a task that outlives its visibility timeout, F17) do not both act: only the
copy holding the action's run lease does (``workers.action_lease.begin_run``); the other waits about one
lease period and, while the holder keeps renewing, leaves the action alone (noted in
``Action.deliveries``). Every write of the holder is fenced by its lease, and as a last line the znode
is created, never overwritten, so a loser would find its own request there.

``workers.reassign.monitor``: refresh a running reassignment's progress into its outcome every
``MONITOR_INTERVAL_S``, push it to the open progress pages (``reassign_service.push``: the pages update
over their WebSocket, without polling) and record its completion; re-queues itself while the
reassignment runs (the progress page's fallback poll, used only while its socket is down, does the
same, so completion is recorded by whichever comes first). The execute and cancel tasks push too. It takes no lease:
it has no effect outside the database, its writes are a progress snapshot read from ZooKeeper and a
completion recorded once by a conditional update (``status = running``), exactly what the progress
page does unleased on every poll.

``workers.reassign.cancel``: cancel the partitions of a reassignment that are still moving, through
the controller's AlterPartitionReassignments endpoint (KIP-455: back to the original replicas).
Only partitions whose current target is still this reassignment's are cancelled, and the request is
sent at most once per action (``outcome["sent"]``, committed under the run lease before sending), so
neither a redelivery nor a concurrent copy ever cancels a newer move.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from celery import shared_task
from django.utils import timezone

from controller_core.errors import ZkOperationError
from controller_core.model import TopicPartition
from controller_core.protocol.client import JsonConnection, split_url
from controller_core.protocol.messages import (
    ALTER_PARTITION_REASSIGNMENTS_PATH,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ErrorCode,
    ReassignmentTarget,
    decode,
    encode,
)
from controller_core.reassign_plan import to_kafka_json, validate
from controller_core.zk.store import ZkStore
from dashboard.actions import reassign_throttle
from dashboard.actions.reassign_cluster import read_assignments, read_cluster_view, read_controller_endpoint
from dashboard.actions.reassign_service import push, refresh, requested_of
from dashboard.actions.zk import cluster_store
from dashboard.audit import movement as movement_audit
from dashboard.audit.models import Action
from workers.action_lease import LeaseLost, RunLease, begin_run, status_of

logger = logging.getLogger(__name__)

MONITOR_INTERVAL_S: Final = 1.0
MONITOR_MAX_AGE_S: Final = 7 * 24 * 3600.0
MAX_RETRIES: Final = 5
CONTROLLER_TIMEOUT_S: Final = 70.0
FINAL: Final = frozenset({Action.Status.SUCCEEDED, Action.Status.PARTIAL, Action.Status.FAILED, Action.Status.REJECTED})


def _save(action: Action, *fields: str) -> None:
    """Write ``fields`` only while the row still names this copy's run lease (``action.lease_owner``;
    empty when run without one, as tests do): a copy whose lease was taken over stops (``LeaseLost``)."""
    values = {f: getattr(action, f) for f in fields}
    if not Action.objects.filter(pk=action.pk, lease_owner=action.lease_owner).update(**values):
        raise LeaseLost(f"action #{action.pk}: the run lease {action.lease_owner or '(none)'} is no longer held")


def _finish(action: Action, status: str, error: str) -> None:
    action.status = status
    action.error = error
    action.finished = timezone.now()
    if action.started is not None:
        action.duration_ms = int((action.finished - action.started).total_seconds() * 1000)
    _save(action, "status", "error", "finished", "duration_ms", "outcome", "controller_epoch")


def _taken_by_controller(store: ZkStore, requested: dict[TopicPartition, tuple[int, ...]]) -> bool:
    """Whether the topic znodes show the controller already started (or finished) this request."""
    assignments = read_assignments(store, {tp.topic for tp in requested})
    for tp, target in requested.items():
        current = assignments.get(tp)
        if current is None:
            continue
        if current.is_being_reassigned and tuple(current.target_replicas) == target:
            return True
    return False


def run_execute(action: Action, store: ZkStore) -> Action:
    """Write the request of ``action`` (status RUNNING, claimed by the caller) unless already done.

    Leaves the action RUNNING with ``outcome["written"]`` when the request is (or was) written, or
    finishes it as rejected with the reason and nothing written.
    """
    requested, _origin = requested_of(action)
    outcome = dict(action.outcome or {})
    if outcome.get("written"):
        return action
    existing = store.get_partition_reassignment()
    epoch = store.get_controller_epoch()
    action.controller_epoch = epoch.epoch if epoch is not None else None
    if existing is not None:
        if outcome.get("writing") and dict(existing) == requested:
            return _mark_written(action, outcome, "found in /admin/reassign_partitions after a redelivery")
        names = ", ".join(sorted(f"{tp.topic}-{tp.partition}" for tp in existing)[:10])
        action.outcome = outcome
        _finish(
            action,
            Action.Status.REJECTED,
            f"refused: a reassignment is already pending in /admin/reassign_partitions ({len(existing)} "
            f"partitions: {names}); nothing written",
        )
        return action
    if outcome.get("writing") and _taken_by_controller(store, requested):
        return _mark_written(action, outcome, "already taken by the controller after a redelivery")
    view = read_cluster_view(store, {tp.topic for tp in requested})
    view = type(view)(view.assignments, view.brokers, view.topics_being_deleted, None)
    check = validate(
        to_kafka_json(requested),
        view,
        replace=bool(action.parameters.get("replace")),
        allow_rf_change=bool(action.parameters.get("change_replication_factor")),
    )
    if not check.ok:
        action.outcome = outcome
        _finish(action, Action.Status.REJECTED, "refused at execution: " + "; ".join(check.errors))
        return action
    outcome["writing"] = True
    outcome.setdefault("before", movement_audit.snapshot(store, requested))
    action.outcome = outcome
    _save(action, "outcome", "controller_epoch")
    # The throttle first, as kafka-reassign-partitions --throttle does: no copy starts unthrottled.
    reassign_throttle.apply_at_start(action, store)
    try:
        store.create_partition_reassignment_request(requested)
    except ZkOperationError:
        now = store.get_partition_reassignment()
        if now is not None and dict(now) == requested:
            return _mark_written(action, outcome, "written by a concurrent delivery of this action")
        outcome.pop("writing", None)
        action.outcome = outcome
        reassign_throttle.remove_for(
            action, store, reassign_throttle.SYSTEM_USER, "the reassignment was refused: another was written first"
        )
        _finish(action, Action.Status.REJECTED, "refused: another reassignment was written first; nothing written")
        return action
    return _mark_written(action, outcome, "written")


def _mark_written(action: Action, outcome: dict[str, Any], how: str) -> Action:
    requested, _ = requested_of(action)
    outcome.update(written=True, written_at=timezone.now().isoformat(), write=how, request=to_kafka_json(requested))
    action.outcome = outcome
    _save(action, "outcome", "controller_epoch")
    return action


def _claim(action_id: int) -> tuple[Action, RunLease] | None:
    """Take the run lease and move QUEUED -> RUNNING (recording the start).

    None when this copy must not act: the action is finished, or another copy holds the lease and keeps
    renewing it (``begin_run`` notes which in ``Action.deliveries``).
    """
    lease = begin_run(action_id, FINAL)
    if lease is None:
        return None
    action = Action.objects.get(pk=action_id)
    if action.status == Action.Status.QUEUED:
        Action.objects.filter(pk=action_id, status=Action.Status.QUEUED, lease_owner=lease.owner).update(
            status=Action.Status.RUNNING, started=timezone.now()
        )
        action.refresh_from_db()
    if action.status != Action.Status.RUNNING:
        lease.close()
        return None
    return action, lease


def _connect_string(action: Action, connect: str | None) -> str:
    if connect is not None:
        return connect
    from dashboard.clusters.models import Cluster

    return str(Cluster.objects.get(name=action.cluster).zookeeper_connect)


def _schedule_monitor(action_id: int, connect: str | None) -> None:
    from dashboard.celery import app

    try:
        app.send_task(
            "workers.reassign.monitor", args=[action_id], kwargs={"connect": connect}, countdown=MONITOR_INTERVAL_S
        )
    except Exception as exc:  # the progress page still records completion when polled
        logger.warning("could not schedule the monitor of #%s: %s", action_id, exc)


@shared_task(bind=True, name="workers.reassign.execute", max_retries=MAX_RETRIES)
def execute(self: Any, action_id: int, connect: str | None = None, monitor: bool = True) -> str:
    """Run the queued reassignment ``action_id``; returns its status. ``connect`` overrides the
    cluster's ZooKeeper connect string (tests); ``monitor`` schedules the progress monitor."""
    status, acted = _run_leased(action_id, "reassignment", lambda action: _execute_leased(self, action, connect))
    if acted and status == Action.Status.RUNNING and monitor:
        _schedule_monitor(action_id, connect)
    return status


def _run_leased(action_id: int, what: str, body: Callable[[Action], str]) -> tuple[str, bool]:
    """Run ``body`` on the action while holding its run lease: ``(status, whether this copy acted)``.

    A copy that must not act (finished, or another copy holds the lease) and one that lost its lease
    midway both answer the committed status; only a copy that ran ``body`` to the end has acted.
    """
    claimed = _claim(action_id)
    if claimed is None:
        return status_of(action_id), False
    action, lease = claimed
    with lease:
        try:
            return body(action), True
        except LeaseLost as exc:
            logger.warning("%s #%s: %s; stopping without writing", what, action_id, exc)
            return status_of(action_id), False


def _execute_leased(task: Any, action: Action, connect: str | None) -> str:
    """The task's body, run by the lease holder: write, then push the first progress. A written
    reassignment that meets a failure stays running: the monitor records its end."""

    def body(store: ZkStore) -> None:
        run_execute(action, store)
        push(action, refresh(action, store) if action.status == Action.Status.RUNNING else None)

    _on_cluster(task, action, connect, "reassignment", body, committed="written", countdown=5, fail_committed=False)
    return str(action.status)


def _on_cluster(
    task: Any,
    action: Action,
    connect: str | None,
    what: str,
    body: Callable[[ZkStore], object],
    *,
    committed: str,
    countdown: float,
    fail_committed: bool,
) -> None:
    """Run ``body`` with a session on the action's cluster, as the lease holder.

    A failure while ``outcome[committed]`` is unset (nothing irreversible done yet) is retried: the
    retry is a new delivery that claims the lease again and reconciles with ZooKeeper, so what went
    through is never repeated. After the last retry the action fails; once committed it fails only
    with ``fail_committed``. ``LeaseLost`` goes up untouched, as the copy must not write.
    """
    try:
        with cluster_store(_connect_string(action, connect)) as store:
            body(store)
    except LeaseLost:
        raise
    except Exception as exc:
        logger.warning("%s #%s: %s", what, action.pk, exc)
        done = bool((action.outcome or {}).get(committed))
        if task.request.retries < MAX_RETRIES and not done:
            raise task.retry(exc=exc, countdown=countdown) from exc
        if fail_committed or not done:
            _finish(action, Action.Status.FAILED, f"{exc.__class__.__name__}: {exc}")


@shared_task(name="workers.reassign.monitor")
def monitor(action_id: int, connect: str | None = None) -> str:
    """Refresh progress once; re-queue while the reassignment runs (up to a week)."""
    action = Action.objects.get(pk=action_id)
    if action.status != Action.Status.RUNNING:
        return str(action.status)
    try:
        with cluster_store(_connect_string(action, connect)) as store:
            progress = refresh(action, store)
        push(action, progress)
    except Exception as exc:
        logger.warning("monitor of reassignment #%s: %s", action_id, exc)
    started: datetime | None = action.started
    young = started is None or (timezone.now() - started).total_seconds() < MONITOR_MAX_AGE_S
    if action.status == Action.Status.RUNNING and young:
        _schedule_monitor(action_id, connect)
    return str(action.status)


def send_cancel(
    endpoint: str, partitions: list[TopicPartition], timeout: float = CONTROLLER_TIMEOUT_S
) -> AlterPartitionReassignmentsResponse:
    host, port = split_url(endpoint)
    conn = JsonConnection(host, port, timeout=timeout)
    try:
        request = AlterPartitionReassignmentsRequest(
            tuple(ReassignmentTarget(tp.topic, tp.partition, None) for tp in partitions)
        )
        body = conn.post(ALTER_PARTITION_REASSIGNMENTS_PATH, encode(request))
    finally:
        conn.close()
    return decode(body, AlterPartitionReassignmentsResponse, "AlterPartitionReassignments response")


def run_cancel(action: Action, store: ZkStore) -> Action:
    """Cancel what is still moving of the reassignment ``action.parameters["reassignment"]``."""
    target = Action.objects.get(pk=int(action.parameters["reassignment"]))
    outcome = dict(action.outcome or {})
    epoch = store.get_controller_epoch()
    action.controller_epoch = epoch.epoch if epoch is not None else None
    if outcome.get("sent"):
        # sent by an earlier delivery that did not record the answer: never send twice
        action.outcome = outcome
        _finish(action, Action.Status.PARTIAL, "the cancel request was sent by an earlier attempt; its answer was lost")
        return action
    requested, _ = requested_of(target)
    assignments = read_assignments(store, {tp.topic for tp in requested})
    moving = sorted(
        tp
        for tp, wanted in requested.items()
        if (a := assignments.get(tp)) is not None and a.is_being_reassigned and tuple(a.target_replicas) == wanted
    )
    if not moving:
        action.outcome = outcome
        _finish(action, Action.Status.REJECTED, "nothing to cancel: no partition of this reassignment is still moving")
        return action
    endpoint = read_controller_endpoint(store)
    if endpoint is None:
        action.outcome = outcome
        _finish(
            action,
            Action.Status.FAILED,
            "no controller API endpoint in /controller: cancel needs a cluster run by our controller",
        )
        return action
    outcome.update(
        sent=True, endpoint=endpoint, partitions=[{"topic": t.topic, "partition": t.partition} for t in moving]
    )
    action.outcome = outcome
    _save(action, "outcome", "controller_epoch")
    response = send_cancel(endpoint, moving)
    if response.error_code != ErrorCode.NONE:
        _finish(action, Action.Status.FAILED, f"the controller refused: {response.error_code.name}")
        return action
    results = []
    ok = 0
    for r in response.partitions:
        good = r.error_code == ErrorCode.NONE
        ok += good
        results.append(
            {
                "topic": r.topic,
                "partition": r.partition,
                "outcome": "cancelled" if good else f"{r.error_code.name}: {r.error_message}",
            }
        )
    outcome["partitions"] = results
    action.outcome = outcome
    if ok == len(results):
        _finish(action, Action.Status.SUCCEEDED, "")
    else:
        _finish(action, Action.Status.PARTIAL if ok else Action.Status.FAILED, "some partitions were not cancelled")
    target.refresh_from_db()
    if target.status == Action.Status.RUNNING:
        push(target, refresh(target, store))
    return action


@shared_task(bind=True, name="workers.reassign.cancel", max_retries=MAX_RETRIES)
def cancel(self: Any, action_id: int, connect: str | None = None) -> str:
    """Run the queued cancellation ``action_id``; returns its status. Only the lease holder sends."""

    def body(action: Action) -> str:
        _cancel_leased(self, action, connect)
        return str(action.status)

    return _run_leased(action_id, "cancel", body)[0]


def _cancel_leased(task: Any, action: Action, connect: str | None) -> None:
    """The task's body, run by the lease holder; retried only while nothing was sent."""
    _on_cluster(
        task, action, connect, "cancel", lambda store: run_cancel(action, store), committed="sent", countdown=2,
        fail_committed=True,
    )  # fmt: skip


@shared_task(name="workers.reassign.remove_orphan_throttles")
def remove_orphan_throttles(limit: int = 100) -> int:
    """Beat task: remove the throttle of every finished reassignment that still has one (its end was
    recorded while ZooKeeper was unreachable, or by a process that died before removing it), and
    audit that it did (a "removed" event by ``(system)`` on the reassignment). Returns how many."""
    from dashboard.clusters.models import Cluster

    removed = 0
    for action in reassign_throttle.orphaned(limit):
        cluster = Cluster.objects.filter(name=action.cluster).first()
        if cluster is None:
            continue
        try:
            with cluster_store(str(cluster.zookeeper_connect)) as store:
                if reassign_throttle.remove_for(
                    action,
                    store,
                    reassign_throttle.SYSTEM_USER,
                    f"orphaned throttle of a finished reassignment ({action.status}) removed by the beat clean-up",
                ):
                    removed += 1
                    logger.info("removed the orphaned throttle of reassignment #%s on %s", action.pk, action.cluster)
        except Exception as exc:  # the next beat tries again
            logger.warning("orphaned throttle of reassignment #%s: %s", action.pk, exc)
    return removed
