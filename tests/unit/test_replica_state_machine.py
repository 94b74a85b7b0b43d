"""ReplicaStateMachine: every transition of reference §3, the ISR-removal loop (§3.3) and startup (§3.4)."""

from __future__ import annotations

import pytest

from controller_core.errors import ControllerMovedError
from controller_core.model import LeaderAndIsr, PartitionAndReplica, ReplicaAssignment, TopicPartition
from controller_core.states import REPLICA_VALID_PREVIOUS, PartitionState, ReplicaState
from scripts.support.fakes import Harness, make_harness
from tests.support.store_faults import STORE_FAULTS, inject_store_fault

pytestmark = pytest.mark.unit

R = ReplicaState
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
R2 = PartitionAndReplica(T0, 2)


@pytest.fixture
def h() -> Harness:
    harness = make_harness(brokers=(1, 2, 3), epoch=5)
    harness.seed_partition(
        T0, [1, 2, 3], leader=1, isr=[1, 2, 3], leader_epoch=10, partition_state=PartitionState.ONLINE
    )
    return harness


# --- the transition table, exhaustively ------------------------------------------------------------------


@pytest.mark.parametrize("target", list(R))
@pytest.mark.parametrize("start", [None, *R])
def test_every_transition_is_made_or_refused_per_the_table(h: Harness, start: R | None, target: R) -> None:
    if start is not None:
        h.ctx.put_replica_state(R2, start)
    valid = (start or R.NON_EXISTENT) in REPLICA_VALID_PREVIOUS[target]

    h.rsm.handle_state_changes([R2], target)

    if not valid:
        assert h.ctx.replica_state(R2) is (start or R.NON_EXISTENT)  # unchanged, never raised
        (failed,) = h.sink.of_kind("failed_change")
        assert (failed["entity"], failed["to_state"]) == ("orders-0@2", target)
        assert "before moving to" in failed["error"]
        assert h.transport.sent == []
    elif target is R.NON_EXISTENT:
        assert h.ctx.replica_state(R2) is None  # the entry is removed, not set
        assert h.ctx.partition_replica_assignment(T0) == (1, 3)
    else:
        assert h.ctx.replica_state(R2) is target
        assert h.sink.of_kind("failed_change") == []
        records = [(r["from_state"], r["to_state"], r["replica"]) for r in h.sink.of_kind("replica_transition")]
        # a self-transition changes no state and is not recorded
        assert records == ([] if start is target else [(start or R.NON_EXISTENT, target, 2)])


def test_a_replica_without_state_starts_as_non_existent(h: Harness) -> None:
    h.rsm.handle_state_changes([R2], R.ONLINE)  # NonExistent -> Online is invalid
    assert h.ctx.replica_state(R2) is R.NON_EXISTENT


def test_invalid_replicas_do_not_stop_valid_ones(h: Harness) -> None:
    r1 = PartitionAndReplica(T0, 1)
    h.ctx.put_replica_state(r1, R.ONLINE)
    h.ctx.put_replica_state(R2, R.DELETION_SUCCESSFUL)
    h.rsm.handle_state_changes([r1, R2], R.OFFLINE)
    assert h.ctx.replica_state(r1) is R.OFFLINE
    assert h.ctx.replica_state(R2) is R.DELETION_SUCCESSFUL


# --- NewReplica ---------------------------------------------------------------------------------------------


def test_new_replica_of_a_led_partition_gets_a_leader_and_isr_marked_new(h: Harness) -> None:
    h.rsm.handle_state_changes([R2], R.NEW)
    (state,) = h.transport.leader_and_isr_partitions(2).values()
    assert (state.leader, state.leader_epoch, state.isr, state.is_new) == (1, 10, (1, 2, 3), True)
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [2]
    assert sorted(s.broker_id for s in h.transport.of_kind("UpdateMetadata")) == [1, 2, 3]


def test_new_replica_without_leader_sends_nothing(h: Harness) -> None:
    h.seed_partition(T1, [1, 2, 3])
    h.rsm.handle_state_changes([PartitionAndReplica(T1, 2)], R.NEW)
    assert h.ctx.replica_state(PartitionAndReplica(T1, 2)) is R.NEW
    assert h.transport.sent == []


def test_the_leader_cannot_become_a_new_replica(h: Harness) -> None:
    leader = PartitionAndReplica(T0, 1)
    h.rsm.handle_state_changes([leader], R.NEW)
    assert h.ctx.replica_state(leader) is R.NON_EXISTENT
    (failed,) = h.sink.of_kind("failed_change")
    assert "being requested to become leader" in failed["error"]
    assert h.transport.sent == []


# --- OnlineReplica -----------------------------------------------------------------------------------------------


def test_online_from_new_sends_nothing_and_adds_a_missing_replica_to_the_assignment(h: Harness) -> None:
    r4 = PartitionAndReplica(T0, 4)
    h.ctx.put_replica_state(r4, R.NEW)
    h.ctx.put_replica_state(R2, R.NEW)
    h.rsm.handle_state_changes([r4, R2], R.ONLINE)
    assert h.ctx.partition_replica_assignment(T0) == (1, 2, 3, 4)
    assert h.ctx.replica_state(r4) is R.ONLINE
    assert h.transport.sent == []


@pytest.mark.parametrize("start", [R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE])
def test_online_from_other_states_sends_a_leader_and_isr(h: Harness, start: R) -> None:
    h.ctx.put_replica_state(R2, start)
    h.rsm.handle_state_changes([R2], R.ONLINE)
    (state,) = h.transport.leader_and_isr_partitions(2).values()
    assert (state.leader, state.is_new) == (1, False)


def test_online_without_leader_sends_nothing(h: Harness) -> None:
    h.seed_partition(T1, [1, 2])
    replica = PartitionAndReplica(T1, 2)
    h.ctx.put_replica_state(replica, R.OFFLINE)
    h.rsm.handle_state_changes([replica], R.ONLINE)
    assert h.ctx.replica_state(replica) is R.ONLINE
    assert h.transport.sent == []


# --- OfflineReplica and ISR removal --------------------------------------------------------------------------------


def test_offline_follower_is_stopped_removed_from_the_isr_and_the_others_are_told(h: Harness) -> None:
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)

    assert h.ctx.replica_state(R2) is R.OFFLINE
    expected = LeaderAndIsr(1, 11, (1, 3), zk_version=1)
    assert h.store.state(T0).leader_and_isr == expected  # type: ignore[union-attr]
    assert h.store.state(T0).controller_epoch == 5  # type: ignore[union-attr]
    cached = h.ctx.partition_leadership_info(T0)
    assert cached is not None and cached.leader_and_isr == expected and cached.controller_epoch == 5
    stop = h.transport.stop_replica_partitions(2)[T0]
    # the epoch is the one cached when the StopReplica was added, i.e. before the shrink
    assert (stop.delete_partition, stop.leader_epoch) == (False, 10)
    # LeaderAndIsr to every other assigned replica, not only the leader (§15.16)
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [1, 3]
    assert h.transport.leader_and_isr_partitions(3)[T0].isr == (1, 3)
    assert h.transport.order()[-1] == ("StopReplica", 2)
    (isr_change,) = h.sink.of_kind("isr_change")
    assert (isr_change["isr_before"], isr_change["isr_after"], isr_change["replica"]) == ((1, 2, 3), (1, 3), 2)


def test_offline_leader_leaves_the_partition_leaderless(h: Harness) -> None:
    leader = PartitionAndReplica(T0, 1)
    h.ctx.put_replica_state(leader, R.ONLINE)
    h.rsm.handle_state_changes([leader], R.OFFLINE)
    assert h.store.state(T0).leader_and_isr == LeaderAndIsr(-1, 11, (2, 3), 1)  # type: ignore[union-attr]


def test_the_isr_is_never_emptied(h: Harness) -> None:
    h.seed_partition(T1, [2, 3], leader=2, isr=[2], leader_epoch=4)
    replica = PartitionAndReplica(T1, 2)
    h.ctx.put_replica_state(replica, R.ONLINE)
    h.rsm.handle_state_changes([replica], R.OFFLINE)
    assert h.store.state(T1).leader_and_isr == LeaderAndIsr(-1, 5, (2,), 1)  # type: ignore[union-attr]
    assert h.ctx.replica_state(replica) is R.OFFLINE


def test_a_replica_outside_the_isr_needs_no_write(h: Harness) -> None:
    h.store.leader_isr_change(T0, [1, 3])  # ZooKeeper knows better than the cache
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.store.update_calls == []
    cached = h.ctx.partition_leadership_info(T0)
    assert cached is not None
    assert cached.leader_and_isr == LeaderAndIsr(1, 10, (1, 3), 1)
    assert h.ctx.replica_state(R2) is R.OFFLINE


def test_isr_removal_retries_version_conflicts_with_a_fresh_read(h: Harness) -> None:
    h.store.concurrent_isr_change(T0, [1, 2], times=2)  # the leader shrinks the ISR under our feet, twice
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert len(h.store.update_calls) == 3
    assert len(h.store.read_calls) == 3
    assert h.store.state(T0).leader_and_isr == LeaderAndIsr(1, 11, (1,), 3)  # type: ignore[union-attr]
    assert h.ctx.replica_state(R2) is R.OFFLINE


def test_isr_removal_aborts_when_a_newer_controller_wrote_the_state(h: Harness) -> None:
    h.store.overwrite_by_newer_controller(T0, controller_epoch=6)
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.store.update_calls == []
    assert h.ctx.replica_state(R2) is R.ONLINE
    (failed,) = h.sink.of_kind("failed_change")
    assert "StateChangeFailedError" in failed["error"] and "another controller" in failed["error"]
    assert h.transport.of_kind("LeaderAndIsr") == []
    assert list(h.transport.stop_replica_partitions(2)) == [T0]  # the StopReplica still goes out


def test_isr_removal_accepts_an_equal_controller_epoch(h: Harness) -> None:
    h.store.overwrite_by_newer_controller(T0, controller_epoch=5)
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.ctx.replica_state(R2) is R.OFFLINE


@pytest.mark.parametrize("failure", STORE_FAULTS)
def test_isr_removal_failures_keep_the_replica_state(h: Harness, failure: str) -> None:
    inject_store_fault(h.store, T0, failure)
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.ctx.replica_state(R2) is R.ONLINE
    assert len(h.sink.of_kind("failed_change")) == 1
    assert h.transport.of_kind("LeaderAndIsr") == []


def test_missing_state_of_a_topic_being_deleted_is_silently_skipped(h: Harness) -> None:
    h.store.delete_state(T0)
    h.ctx.queue_topic_deletion(["orders"])
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.sink.of_kind("failed_change") == []
    assert h.ctx.replica_state(R2) is R.ONLINE


def test_offline_replica_of_a_topic_queued_for_deletion_tells_nobody(h: Harness) -> None:
    h.ctx.queue_topic_deletion(["orders"])
    h.ctx.put_replica_state(R2, R.ONLINE)
    h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.store.state(T0).leader_and_isr.isr == (1, 3)  # type: ignore[union-attr]  # ZK still shrinks
    assert h.transport.of_kind("LeaderAndIsr") == []
    assert h.transport.stop_replica_partitions(2)[T0].leader_epoch == -2
    assert h.ctx.replica_state(R2) is R.OFFLINE


def test_offline_replica_without_leader_refreshes_metadata_everywhere(h: Harness) -> None:
    h.seed_partition(T1, [2, 3])
    replica = PartitionAndReplica(T1, 2)
    h.ctx.put_replica_state(replica, R.NEW)
    h.rsm.handle_state_changes([replica], R.OFFLINE)
    assert h.ctx.replica_state(replica) is R.OFFLINE
    assert h.store.read_calls == []
    assert sorted(s.broker_id for s in h.transport.of_kind("UpdateMetadata")) == [1, 2, 3]
    assert all(s.request.partition_states == [] for s in h.transport.of_kind("UpdateMetadata"))
    assert h.transport.stop_replica_partitions(2)[T1].leader_epoch == -1


# --- deletion states and NonExistent --------------------------------------------------------------------------------


def test_deletion_started_sends_a_deleting_stop_replica(h: Harness) -> None:
    h.ctx.queue_topic_deletion(["orders"])
    h.ctx.put_replica_state(R2, R.OFFLINE)
    h.rsm.handle_state_changes([R2], R.DELETION_STARTED)
    stop = h.transport.stop_replica_partitions(2)[T0]
    assert (stop.delete_partition, stop.leader_epoch) == (True, -2)
    assert h.transport.order() == [("StopReplica", 2)]


@pytest.mark.parametrize(
    ("start", "target"), [(R.DELETION_STARTED, R.DELETION_SUCCESSFUL), (R.OFFLINE, R.DELETION_INELIGIBLE)]
)
def test_deletion_outcomes_only_change_state(h: Harness, start: R, target: R) -> None:
    h.ctx.put_replica_state(R2, start)
    h.rsm.handle_state_changes([R2], target)
    assert h.ctx.replica_state(R2) is target
    assert h.transport.sent == []


def test_non_existent_removes_the_replica_from_every_list(h: Harness) -> None:
    h.ctx.update_partition_full_replica_assignment(
        T0, ReplicaAssignment.of([4, 2, 1, 3], adding=[4, 2], removing=[1, 3])
    )
    h.ctx.put_replica_state(R2, R.DELETION_SUCCESSFUL)
    h.rsm.handle_state_changes([R2], R.NON_EXISTENT)
    assert h.ctx.partition_full_replica_assignment(T0) == ReplicaAssignment.of([4, 1, 3], [4], [1, 3])
    assert h.ctx.replica_state(R2) is None
    assert T0 not in h.ctx.partitions_on_broker(2)


# --- batching and errors --------------------------------------------------------------------------------------------


def test_one_call_sends_one_request_per_broker(h: Harness) -> None:
    h.seed_partition(T1, [2, 3, 1], leader=2, partition_state=PartitionState.ONLINE)
    replicas = [PartitionAndReplica(tp, b) for tp in (T0, T1) for b in (1, 2, 3)]
    for replica in replicas:
        h.ctx.put_replica_state(replica, R.OFFLINE)
    h.rsm.handle_state_changes(replicas, R.ONLINE)
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [1, 2, 3]
    assert all(len(s.request.partition_states) == 2 for s in h.transport.of_kind("LeaderAndIsr"))
    assert len(h.transport.of_kind("UpdateMetadata")) == 3


def test_controller_moved_propagates_and_nothing_is_written(h: Harness) -> None:
    h.store.elect_other_controller()
    h.ctx.put_replica_state(R2, R.ONLINE)
    with pytest.raises(ControllerMovedError):
        h.rsm.handle_state_changes([R2], R.OFFLINE)
    assert h.store.state(T0).leader_and_isr == LeaderAndIsr(1, 10, (1, 2, 3), 0)  # type: ignore[union-attr]
    assert h.ctx.replica_state(R2) is R.ONLINE


def test_other_errors_are_swallowed(h: Harness) -> None:
    h.replica_batch.add_update_metadata_request_for_brokers([1])  # a batch left unsent
    h.ctx.put_replica_state(R2, R.OFFLINE)
    h.rsm.handle_state_changes([R2], R.ONLINE)  # new_batch fails inside: logged, not raised
    assert h.ctx.replica_state(R2) is R.OFFLINE
    assert h.transport.sent == []


def test_empty_input_does_nothing(h: Harness) -> None:
    h.replica_batch.add_update_metadata_request_for_brokers([1])
    h.rsm.handle_state_changes([], R.ONLINE)  # does not even open a batch
    assert h.transport.sent == []


# --- startup ----------------------------------------------------------------------------------------------------------


def test_startup_brings_online_replicas_online_and_dead_ones_offline() -> None:
    h = make_harness(brokers=(1, 2), epoch=5)
    h.seed_partition(T0, [1, 2, 3], leader=3, isr=[3, 1], leader_epoch=2, controller_epoch=4)
    h.seed_partition(T1, [2, 3])  # no leader yet

    h.rsm.startup()

    states = {str(r): s for r, s in h.ctx.iter_replica_states()}
    assert states == {
        str(PartitionAndReplica(T0, 1)): R.ONLINE,
        str(PartitionAndReplica(T0, 2)): R.ONLINE,
        str(PartitionAndReplica(T0, 3)): R.OFFLINE,
        str(PartitionAndReplica(T1, 2)): R.ONLINE,
        str(PartitionAndReplica(T1, 3)): R.OFFLINE,
    }
    # the dead leader left the ISR (epoch +1) and the survivors were told
    assert h.store.state(T0).leader_and_isr == LeaderAndIsr(-1, 3, (1,), 1)  # type: ignore[union-attr]
    assert h.transport.leader_and_isr_partitions(2)[T0].leader == -1
    # the dead broker's StopReplica was dropped at send time
    assert h.transport.to_broker(3) == []
    # startup moved the dead replicas through ReplicaDeletionIneligible first, and recorded only real changes
    transitions = [(r["entity"], r["from_state"], r["to_state"]) for r in h.sink.of_kind("replica_transition")]
    assert transitions == [
        ("orders-0@3", R.DELETION_INELIGIBLE, R.OFFLINE),
        ("orders-1@3", R.DELETION_INELIGIBLE, R.OFFLINE),
    ]
    (initialized,) = h.sink.of_kind("states_initialized")
    assert initialized["counts"] == {"OnlineReplica": 3, "ReplicaDeletionIneligible": 2}


def test_startup_gives_each_partition_its_own_states_and_honours_failed_log_dirs() -> None:
    """Startup splits each distinct replica list into online and offline replicas once; partitions
    sharing a list must still get states of their own, and a failed log dir makes it per partition."""
    h = make_harness(brokers=(1, 2, 3), epoch=5)
    partitions = [TopicPartition("orders", p) for p in range(4)]
    for tp in partitions:
        h.seed_partition(tp, [1, 2, 3], leader=1, isr=[1, 2, 3])
    h.ctx.set_replicas_on_offline_dirs(2, [partitions[3]])

    h.rsm.startup()

    for tp in partitions[:3]:
        assert h.ctx.replica_states_of(tp) == {1: R.ONLINE, 2: R.ONLINE, 3: R.ONLINE}
    assert h.ctx.replica_states_of(partitions[3]) == {1: R.ONLINE, 2: R.OFFLINE, 3: R.ONLINE}
    h.ctx.put_replica_state(PartitionAndReplica(partitions[0], 3), R.OFFLINE)
    assert h.ctx.replica_states_of(partitions[1])[3] is R.ONLINE  # not one shared dict
    # every online replica got a LeaderAndIsr; the replica on the failed dir did not
    assert set(h.transport.leader_and_isr_partitions(1)) == set(partitions)
    assert set(h.transport.leader_and_isr_partitions(2)) == set(partitions[:3])
    (initialized,) = h.sink.of_kind("states_initialized")
    assert initialized["counts"] == {"OnlineReplica": 11, "ReplicaDeletionIneligible": 1}
