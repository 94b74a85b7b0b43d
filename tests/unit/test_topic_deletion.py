"""TopicDeletionManager (reference §10): StopReplica errors make the deletion wait and retry, a dead
broker halts it, and the topic's znodes go only once every replica was deleted.

The manager drives the real state machines over the fake store (``scripts.support.fakes.Harness``); the
controller's side is its real ``ControllerDeletionClient`` over the fake store's admin znodes, and
the broker's StopReplica answers are delivered the way the controller's ``StopReplicaResponse`` event does.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller_core.model import PartitionAndReplica, TopicPartition
from controller_core.protocol.messages import ErrorCode
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.states import PartitionState, ReplicaState
from controller_core.topic_deletion import ControllerDeletionClient, TopicDeletionManager
from scripts.support.fakes import FakePartitionStateStore, Harness, broker, make_harness

pytestmark = pytest.mark.unit

R = ReplicaState
D0 = TopicPartition("doomed", 0)
D1 = TopicPartition("doomed", 1)


class _AdminZnodes:
    """The topic and admin znodes the manager deletes, fenced like the rest of the fake store."""

    def __init__(self, store: FakePartitionStateStore) -> None:
        self._store = store
        self.deleted: list[tuple[str, tuple[str, ...]]] = []

    def _delete(self, what: str, topics: Any, expected: int) -> None:
        self._store._check_fence(expected)
        self.deleted.append((what, tuple(topics)))

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        self._delete("topic", [topic], expected_controller_epoch_zk_version)

    def delete_topic_configs(self, topics: Any, expected_controller_epoch_zk_version: int) -> None:
        self._delete("config", topics, expected_controller_epoch_zk_version)

    def delete_topic_deletions(self, topics: Any, expected_controller_epoch_zk_version: int) -> None:
        self._delete("deletion", topics, expected_controller_epoch_zk_version)


class _Watches:
    def __init__(self) -> None:
        self.unregistered: list[str] = []

    def unregister(self, path: str) -> None:
        self.unregistered.append(path)


class _Controller:
    """The controller's side of ``TopicDeletionManager`` over a harness: its ``ControllerDeletionClient``
    on the fake store's admin znodes, a recording watch registry and a request batch."""

    def __init__(self, h: Harness) -> None:
        self.store = _AdminZnodes(h.store)
        self.watches = _Watches()
        batch = ControllerBrokerRequestBatch(h.ctx, h.transport, h.log)
        self.client = ControllerDeletionClient(h.ctx, self.store, self.watches.unregister, batch)

    def manager(self, h: Harness) -> TopicDeletionManager:
        return TopicDeletionManager(h.ctx, h.rsm, h.psm, h.log, self.client, delete_topic_enable=True)


@pytest.fixture
def h() -> Harness:
    """Topic doomed: partition 0 on [1, 2] led by 1, partition 1 on [2, 1] led by 2; brokers 1-3 live."""
    harness = make_harness(brokers=(1, 2, 3), epoch=5)
    for tp, replicas in ((D0, [1, 2]), (D1, [2, 1])):
        harness.seed_partition(
            tp, replicas, leader=replicas[0], partition_state=PartitionState.ONLINE, replica_state=R.ONLINE
        )
    return harness


def _deleting(h: Harness, broker_id: int) -> set[TopicPartition]:
    """Partitions the last StopReplica to ``broker_id`` asked it to delete."""
    return {tp for tp, p in h.transport.stop_replica_partitions(broker_id).items() if p.delete_partition}


def _state(h: Harness, tp: TopicPartition, broker_id: int) -> ReplicaState | None:
    return h.ctx.replica_state(PartitionAndReplica(tp, broker_id))


def test_a_stop_replica_error_halts_the_deletion_and_a_resume_retries_only_the_failed_replica(h: Harness) -> None:
    controller = _Controller(h)
    manager = controller.manager(h)

    manager.on_deletion_requested({"doomed"})
    assert _deleting(h, 1) == {D0, D1} and _deleting(h, 2) == {D0, D1}
    assert {_state(h, tp, b) for tp in (D0, D1) for b in (1, 2)} == {R.DELETION_STARTED}
    assert h.ctx.partition_state(D0) is PartitionState.NON_EXISTENT

    manager.on_stop_replica_response(1, ErrorCode.NONE, {D0: ErrorCode.NONE, D1: ErrorCode.NONE})
    manager.on_stop_replica_response(2, ErrorCode.NONE, {D0: ErrorCode.UNKNOWN_SERVER_ERROR, D1: ErrorCode.NONE})

    # Broker 2 could not delete doomed-0: the topic stays, the replica is put back to retry later.
    assert controller.store.deleted == []
    assert "doomed" in h.ctx.topics_ineligible_for_deletion
    assert _state(h, D0, 2) is R.OFFLINE
    assert [_state(h, D0, 1), _state(h, D1, 1), _state(h, D1, 2)] == [R.DELETION_SUCCESSFUL] * 3

    h.transport.clear()
    manager.resume_deletion_for_topics({"doomed"})  # what the broker's return (or a reassignment's end) calls
    assert _deleting(h, 2) == {D0} and _deleting(h, 1) == set()  # only the failed replica again
    assert _state(h, D0, 2) is R.DELETION_STARTED
    assert controller.store.deleted == []

    manager.on_stop_replica_response(2, ErrorCode.NONE, {D0: ErrorCode.NONE})
    assert controller.store.deleted == [("topic", ("doomed",)), ("config", ("doomed",)), ("deletion", ("doomed",))]
    assert controller.watches.unregistered == ["/brokers/topics/doomed", "/config/topics/doomed"]
    assert "doomed" not in h.ctx.all_topics
    h.log.flush()
    phases = [r["phase"] for r in h.sink.of_kind("topic_deletion")]
    assert phases == ["queued", "started", "completed"]


def test_a_request_level_error_fails_every_replica_of_the_answer(h: Harness) -> None:
    controller = _Controller(h)
    manager = controller.manager(h)
    manager.on_deletion_requested({"doomed"})
    manager.on_stop_replica_response(1, ErrorCode.STALE_CONTROLLER_EPOCH, {D0: ErrorCode.NONE, D1: ErrorCode.NONE})
    manager.on_stop_replica_response(2, ErrorCode.NONE, {D0: ErrorCode.NONE, D1: ErrorCode.NONE})
    assert controller.store.deleted == []
    assert [_state(h, D0, 1), _state(h, D1, 1)] == [R.OFFLINE, R.OFFLINE]
    h.transport.clear()
    manager.resume_deletion_for_topics({"doomed"})
    assert _deleting(h, 1) == {D0, D1} and _deleting(h, 2) == set()


def test_a_dead_broker_halts_the_deletion_until_it_returns(h: Harness) -> None:
    controller = _Controller(h)
    manager = controller.manager(h)
    h.ctx.remove_live_brokers([2])
    h.rsm.handle_state_changes([PartitionAndReplica(tp, 2) for tp in (D0, D1)], R.OFFLINE)  # its failure handled
    h.transport.clear()

    manager.on_deletion_requested({"doomed"})
    assert _deleting(h, 1) == {D0, D1} and _deleting(h, 2) == set()
    assert [_state(h, D0, 2), _state(h, D1, 2)] == [R.DELETION_INELIGIBLE] * 2
    manager.on_stop_replica_response(1, ErrorCode.NONE, {D0: ErrorCode.NONE, D1: ErrorCode.NONE})
    assert controller.store.deleted == []  # halted: broker 2's replicas are not deleted yet

    h.ctx.add_live_brokers([broker(2)])
    h.transport.clear()
    manager.resume_deletion_for_topics({"doomed"})
    assert _deleting(h, 2) == {D0, D1}
    manager.on_stop_replica_response(2, ErrorCode.NONE, {D0: ErrorCode.NONE, D1: ErrorCode.NONE})
    assert [what for what, _ in controller.store.deleted] == ["topic", "config", "deletion"]


def test_a_deletion_of_an_unknown_topic_only_clears_its_request(h: Harness) -> None:
    controller = _Controller(h)
    manager = controller.manager(h)
    manager.on_deletion_requested({"ghost"})
    assert controller.store.deleted == [("deletion", ("ghost",))]
    assert h.transport.sent == []
    assert "doomed" in h.ctx.all_topics
