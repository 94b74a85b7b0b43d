"""Exactly-once preferred elections under redelivery, state changes linked to actions, audit retention."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from kazoo.client import KazooClient

from controller_core.model import BrokerRegistration, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller_core.model import TopicPartition as TP
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action, StateChange
from dashboard.audit.retention import cleanup_audit
from dashboard.clusters.models import Cluster
from dashboard.lib.redis_keys import state_change_stream_key
from workers import actions as worker
from workers import audit as audit_worker
from workers.retention import cleanup

pytestmark = pytest.mark.django_db

NAME = "redo"
ROWS = [
    {"topic": "orders", "partition": 0, "preferred": 1, "leader": 2},
    {"topic": "tiny", "partition": 0, "preferred": 2, "leader": 1},
]


class Killed(BaseException):
    """Stands for SIGKILL: nothing in the task catches it, so no status is written."""


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str) -> Cluster:
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(99)
    for b in (1, 2):
        store.register_broker(BrokerRegistration(id=b, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)))
    store.create_topic("orders", {0: [1, 2]})
    store.create_topic("tiny", {0: [2, 1]})
    store.create_partition_states(
        {
            TP("orders", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (1, 2)), epoch.epoch),
            TP("tiny", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), epoch.epoch),
        },
        epoch.epoch_zk_version,
    )
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def queued() -> Action:
    return Action.objects.create(
        username="otto", cluster=NAME, kind="preferred_election", status="queued", preview={"electable": ROWS}
    )


def test_a_task_killed_after_writing_a_batch_resumes_without_writing_it_again(
    cluster: Cluster, zk_chroot: str, election_consumer: list[set[TP]], monkeypatch: pytest.MonkeyPatch
) -> None:
    action = queued()
    real_wait = worker._wait_consumed

    def die(*args: Any, **kwargs: Any) -> bool:
        raise Killed

    monkeypatch.setattr(worker, "_wait_consumed", die)
    with pytest.raises(Killed):
        worker.preferred_election.run(action.pk, batch_size=1, wait_s=5, connect=zk_chroot)
    action.refresh_from_db()
    assert action.status == "running" and action.attempts == 1
    assert action.outcome["journal"]["writing"] == 0 and action.outcome["journal"]["done"] == 0

    monkeypatch.setattr(worker, "_wait_consumed", real_wait)  # the task is redelivered to a healthy worker
    assert worker.preferred_election.run(action.pk, batch_size=1, wait_s=5, connect=zk_chroot) == "succeeded"
    action.refresh_from_db()
    assert election_consumer == [{TP("orders", 0)}, {TP("tiny", 0)}]  # each batch written once
    assert action.attempts == 2 and action.outcome["journal"]["resumed_batches"] == [0]
    assert [p["outcome"] for p in action.outcome["partitions"]] == ["elected", "elected"]
    assert len(action.outcome["batches"]) == 2

    # a third delivery of a finished action does nothing but count
    assert worker.preferred_election.run(action.pk, batch_size=1, wait_s=5, connect=zk_chroot) == "succeeded"
    action.refresh_from_db()
    assert action.attempts == 3 and election_consumer == [{TP("orders", 0)}, {TP("tiny", 0)}]


def test_a_task_killed_before_its_write_writes_the_batch_on_redelivery(
    cluster: Cluster, zk_chroot: str, election_consumer: list[set[TP]], monkeypatch: pytest.MonkeyPatch
) -> None:
    action = queued()
    real_create = ZkStore.create_preferred_replica_election_request

    def die(self: ZkStore, partitions: Any) -> None:
        raise Killed

    monkeypatch.setattr(ZkStore, "create_preferred_replica_election_request", die)
    with pytest.raises(Killed):
        worker.preferred_election.run(action.pk, batch_size=1, wait_s=5, connect=zk_chroot)
    assert election_consumer == []
    monkeypatch.setattr(ZkStore, "create_preferred_replica_election_request", real_create)
    assert worker.preferred_election.run(action.pk, batch_size=1, wait_s=5, connect=zk_chroot) == "succeeded"
    assert election_consumer == [{TP("orders", 0)}, {TP("tiny", 0)}]


def test_progress_is_committed_batch_by_batch(
    cluster: Cluster, zk: KazooClient, election_consumer: list[set[TP]]
) -> None:
    """What the live page polls: after each batch the per-partition outcome is in the database."""
    action = queued()
    action.status = "running"
    action.save()
    seen: list[int] = []

    def checkpoint(a: Action) -> None:
        worker._save_outcome(a)
        seen.append(len(Action.objects.get(pk=a.pk).outcome.get("partitions", [])))

    worker.run_preferred_election(action, ZkStore(zk), batch_size=1, wait_s=5, checkpoint=checkpoint)
    assert action.status == "succeeded"
    assert seen == [0, 0, 1, 1, 1, 2]  # writing, written, landed, per batch


# -- state changes linked to the action that caused them ------------------------------------------------


def rec(seq: int, at_ms: float, partition: int | None, **extra: Any) -> dict[str, Any]:
    return {
        "ts": at_ms, "controller_id": 1, "controller_epoch": 3, "seq": seq, "kind": "election",
        "event_id": "e", "cause": "ReplicaLeaderElection", "entity": f"orders-{partition}", "topic": "orders",
        "partition": partition, "strategy": "preferred", "leader_before": 2, "leader_after": 1, **extra,
    }  # fmt: skip


def test_state_changes_are_linked_to_their_action(db: None, redis_url: str, settings: Any) -> None:
    settings.REDIS_URL = redis_url
    now = timezone.now()
    action = Action.objects.create(
        username="otto", cluster=NAME, kind="preferred_election", status="succeeded",
        preview={"electable": [{"topic": "orders", "partition": 0, "preferred": 1, "leader": 2}]},
        outcome={"journal": {"submitted": [["orders", 0]]}}, finished=now + timedelta(seconds=2),
    )  # fmt: skip
    other = Action.objects.create(username="x", cluster="elsewhere", kind="preferred_election", status="succeeded")
    t = (now + timedelta(seconds=1)).timestamp() * 1000
    records = [
        rec(1, t, 0),  # linked
        rec(2, t, 1),  # a partition it did not submit
        rec(3, t, 0, strategy="offline", cause="BrokerChange"),  # a broker failure
        rec(4, t, 0, cause="AutoPreferredReplicaLeaderElection"),  # the controller's own rebalance
        rec(5, t + 3_600_000, 0),  # an hour after it finished
        rec(6, t - 60_000, 0),  # before it was submitted
        {**rec(7, t, None), "kind": "preferred_election_request", "results": {"orders-0": 1}, "strategy": None},
    ]
    client = redis.Redis.from_url(redis_url)
    for r in records:
        client.xadd(state_change_stream_key(NAME), {"r": json.dumps(r)})
    assert audit_worker.ingest_stream(client, NAME) == 7
    linked = dict(StateChange.objects.filter(cluster=NAME).values_list("seq", "action_id"))
    assert linked == {1: action.pk, 2: None, 3: None, 4: None, 5: None, 6: None, 7: action.pk}
    assert other.state_changes.count() == 0
    viewer = User.objects.create_user("vera", password="pw-correct-horse")
    viewer.groups.add(Group.objects.get(name="viewer"))
    web = Client()
    web.force_login(viewer)
    page = web.get(f"/actions/{action.pk}/").content.decode()
    assert 'id="linked-changes"' in page and "3.1" in page and "3.7" in page and "3.2<" not in page
    data = web.get(f"/api/v1/actions/{action.pk}/").json()
    assert [c["seq"] for c in data["state_changes"]] == [1, 7]
    history = web.get(f"/actions/clusters/{NAME}/topics/orders/0/history/").content.decode()
    assert f'href="/actions/{action.pk}/">#{action.pk}</a>' in history


def test_reassignment_records_are_linked_while_it_runs(db: None, redis_url: str, settings: Any) -> None:
    settings.REDIS_URL = redis_url
    now = timezone.now()
    move = Action.objects.create(
        username="otto", cluster=NAME, kind="reassignment", status="running",
        parameters={"partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 5, 6]}]},
    )  # fmt: skip
    t = (now + timedelta(seconds=1)).timestamp() * 1000
    records = [
        rec(1, t, 0, cause="ZkPartitionReassignment", strategy=None, kind="replica_transition"),  # linked
        rec(2, t + 60_000, 0, cause="PartitionReassignmentIsrChange", strategy="reassign"),  # linked: still running
        rec(3, t, 1, cause="ZkPartitionReassignment", strategy=None),  # a partition it does not move
        rec(4, t, 0, cause="BrokerChange", strategy="offline"),  # not the move
    ]
    client = redis.Redis.from_url(redis_url)
    for r in records:
        client.xadd(state_change_stream_key(NAME), {"r": json.dumps(r)})
    assert audit_worker.ingest_stream(client, NAME) == 4
    linked = dict(StateChange.objects.filter(cluster=NAME).values_list("seq", "action_id"))
    assert linked == {1: move.pk, 2: move.pk, 3: None, 4: None}


# -- retention ------------------------------------------------------------------------------------------


def test_retention_deletes_old_rows_in_batches_and_records_the_run(db: None, settings: Any) -> None:
    old = timezone.now() - timedelta(days=40)
    for i in range(5):
        Action.objects.create(username="x", kind="login", status="succeeded")
        StateChange.objects.create(cluster=NAME, controller_epoch=1, seq=i, ts=old, kind="election")
    Action.objects.update(created=old)
    linked = Action.objects.create(username="y", kind="preferred_election", status="succeeded")
    recent = StateChange.objects.create(cluster=NAME, controller_epoch=2, seq=1, ts=timezone.now(), kind="x")
    StateChange.objects.filter(pk=recent.pk).update(action=linked)

    dry = cleanup_audit(days=30, dry_run=True)
    assert (dry.actions, dry.state_changes) == (5, 5) and Action.objects.count() == 7
    report = cleanup_audit(days=30, batch=2)
    assert (report.actions, report.state_changes) == (5, 5)
    assert list(StateChange.objects.values_list("pk", flat=True)) == [recent.pk]
    kinds = sorted(Action.objects.values_list("kind", flat=True))
    assert kinds == ["preferred_election", "retention_cleanup", "retention_cleanup"]
    assert report.action_id is not None
    run = Action.objects.get(pk=report.action_id)
    assert run.outcome == {"actions_deleted": 5, "state_changes_deleted": 5} and run.parameters["retention_days"] == 30

    settings.AUDIT_RETENTION_DAYS = 1
    assert cleanup.run()["actions_deleted"] == 0  # the task reads the setting; everything left is recent
    with pytest.raises(ValueError):
        cleanup_audit(days=0)
    call_command("audit_retention", "--dry-run", "--days", "7")
    assert Action.objects.filter(kind="retention_cleanup").count() == 4
