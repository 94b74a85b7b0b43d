"""The controller's default: the first round of an election or ISR shrink decides on the cache.

Each case checks the outcome against Kafka's read-first semantics (the same harness with
``decide_from_cache=False`` is what tests/unit/test_partition_state_machine.py and
test_replica_state_machine.py pin): a stale or foreign state is never written over, because the
conditional write fails and the partition is re-read; when the cache is current nothing is read.
"""

from __future__ import annotations

import pytest

from controller_core.election import ControlledShutdownStrategy, OfflineStrategy, PreferredStrategy
from controller_core.model import LeaderAndIsr, PartitionAndReplica, TopicPartition
from controller_core.states import PartitionState, ReplicaState
from scripts.support.fakes import Harness, make_harness
from tests.support.store_faults import inject_store_fault

P = PartitionState
R = ReplicaState
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)


@pytest.fixture
def h() -> Harness:
    harness = make_harness(brokers=(1, 2, 3), epoch=5, decide_from_cache=True)
    for tp in (T0, T1):
        harness.seed_partition(tp, [1, 2, 3], leader=1, isr=[1, 2, 3], leader_epoch=10, partition_state=P.ONLINE)
    return harness


def _zk(h: Harness, tp: TopicPartition) -> LeaderAndIsr:
    state = h.store.state(tp)
    assert state is not None
    return state.leader_and_isr


def test_a_current_cache_means_no_read(h: Harness) -> None:
    h.ctx.remove_live_brokers([1])
    results = h.psm.handle_state_changes([T0, T1], P.ONLINE, OfflineStrategy())
    assert h.store.read_calls == []
    assert len(h.store.update_calls) == 1
    for tp in (T0, T1):
        assert results[tp] == LeaderAndIsr(2, 11, (2, 3), 1)
        assert _zk(h, tp) == results[tp]


def test_a_stale_cache_conflicts_and_the_decision_is_made_again_on_zookeeper(h: Harness) -> None:
    h.store.leader_isr_change(T0, [1, 3])  # the leader shrank the ISR; the cache did not see it
    h.ctx.remove_live_brokers([1])
    results = h.psm.handle_state_changes([T0, T1], P.ONLINE, OfflineStrategy())
    # Decided on the cache, 2 would have led T0; ZooKeeper's ISR says only 3 may.
    assert results[T0] == LeaderAndIsr(3, 11, (3,), 2)
    assert results[T1] == LeaderAndIsr(2, 11, (2, 3), 1)
    assert h.store.read_calls == [[T0]]  # only the conflicting partition was read
    (record,) = [r for r in h.sink.of_kind("election") if r["partition"] == 0]
    assert record["isr_before"] == (1, 3)  # the record shows what was decided on


def test_an_election_over_a_newer_controllers_state_is_aborted(h: Harness) -> None:
    h.store.overwrite_by_newer_controller(T0, controller_epoch=6)
    h.ctx.remove_live_brokers([1])
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert isinstance(results[T0], Exception) and "another controller" in str(results[T0])
    assert h.store.state(T0) is not None and h.store.state(T0).controller_epoch == 6  # type: ignore[union-attr]


@pytest.mark.parametrize("failure", ["missing", "corrupt", "write_error"])
def test_election_failures_stay_per_partition(h: Harness, failure: str) -> None:
    inject_store_fault(h.store, T0, failure)
    h.ctx.remove_live_brokers([1])
    results = h.psm.handle_state_changes([T0, T1], P.ONLINE, OfflineStrategy())
    assert isinstance(results[T0], Exception)
    assert results[T1] == LeaderAndIsr(2, 11, (2, 3), 1)
    if failure == "corrupt":
        assert h.store.state(T0) is None  # never overwritten


def test_preferred_and_controlled_shutdown_elections_from_the_cache(h: Harness) -> None:
    h.ctx.add_shutting_down_broker(1)
    results = h.psm.handle_state_changes([T0], P.ONLINE, ControlledShutdownStrategy())
    assert results[T0] == LeaderAndIsr(2, 11, (2, 3), 1)
    h.ctx.remove_shutting_down_brokers([1])
    h.store.leader_isr_change(T0, [2, 3, 1])  # broker 1 caught up and rejoined, behind the cache
    results = h.psm.handle_state_changes([T0], P.ONLINE, PreferredStrategy())
    assert results[T0] == LeaderAndIsr(1, 12, (2, 3, 1), 3)
    assert h.store.read_calls == [[T0]]


def test_isr_shrink_from_the_cache_and_after_a_conflict(h: Harness) -> None:
    h.store.leader_isr_change(T1, [1, 2])  # T1's ISR changed behind the cache; T0's did not
    replicas = [PartitionAndReplica(T0, 3), PartitionAndReplica(T1, 3)]
    for replica in replicas:
        h.ctx.put_replica_state(replica, R.ONLINE)
    h.rsm.handle_state_changes(replicas, R.OFFLINE)
    assert _zk(h, T0) == LeaderAndIsr(1, 11, (1, 2), 1)
    assert _zk(h, T1) == LeaderAndIsr(1, 10, (1, 2), 1)  # 3 already out: nothing written over it
    assert h.store.read_calls == [[T1]]
    assert all(h.ctx.replica_state(r) is R.OFFLINE for r in replicas)


def test_isr_shrink_over_a_newer_controllers_state_is_aborted(h: Harness) -> None:
    h.store.overwrite_by_newer_controller(T0, controller_epoch=6)
    replica = PartitionAndReplica(T0, 2)
    h.ctx.put_replica_state(replica, R.ONLINE)
    h.rsm.handle_state_changes([replica], R.OFFLINE)
    assert h.ctx.replica_state(replica) is R.ONLINE
    (failed,) = h.sink.of_kind("failed_change")
    assert "another controller" in failed["error"]
