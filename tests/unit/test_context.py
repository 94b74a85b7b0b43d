"""ControllerContext: derived queries, indexes and the two incrementally maintained gauges (§2.3)."""

from __future__ import annotations

import random

import pytest

from controller_core.context import ControllerContext
from controller_core.errors import IllegalStateError
from controller_core.model import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.states import PartitionState, ReplicaState
from scripts.support.fakes import broker

pytestmark = pytest.mark.unit

P = PartitionState
R = ReplicaState
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
T2 = TopicPartition("orders", 2)
U0 = TopicPartition("users", 0)


def info(leader: int, isr: tuple[int, ...], epoch: int = 0) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr), 1)


@pytest.fixture
def ctx() -> ControllerContext:
    context = ControllerContext(controller_id=1)
    context.set_live_brokers([broker(1), broker(2), broker(3)])
    context.add_topics(["orders", "users"])
    return context


def assign(ctx: ControllerContext, tp: TopicPartition, replicas: list[int], **kw: list[int]) -> None:
    ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas, **kw))


# --- brokers -----------------------------------------------------------------------------------------


def test_shutting_down_brokers_are_registered_but_not_live(ctx: ControllerContext) -> None:
    ctx.add_shutting_down_broker(2)
    assert ctx.live_broker_ids == {1, 3}
    assert ctx.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert ctx.shutting_down_broker_ids == {2}
    ctx.remove_shutting_down_brokers([2])
    assert ctx.live_broker_ids == {1, 2, 3}


def test_broker_membership(ctx: ControllerContext) -> None:
    ctx.add_live_brokers([broker(4, epoch=77)])
    assert ctx.broker_epoch(4) == 77
    assert ctx.live_broker_id_and_epochs() == {1: 101, 2: 102, 3: 103, 4: 77}
    ctx.remove_live_brokers([1, 4])
    assert ctx.live_or_shutting_down_broker_ids == {2, 3}
    assert ctx.broker_epoch(1) is None
    assert ctx.live_or_shutting_down_broker(2) == broker(2)
    ctx.update_broker_metadata(broker(2, rack="r1"))
    assert ctx.live_or_shutting_down_broker(2).rack == "r1"  # type: ignore[union-attr]
    ctx.update_broker_metadata(broker(9))  # not registered: ignored
    assert ctx.live_or_shutting_down_broker(9) is None


def test_replica_online_checks_liveness_and_offline_dirs(ctx: ControllerContext) -> None:
    ctx.add_shutting_down_broker(2)
    ctx.set_replicas_on_offline_dirs(3, [T0])
    assert ctx.is_replica_online(1, T0)
    assert not ctx.is_replica_online(2, T0)
    assert ctx.is_replica_online(2, T0, include_shutting_down=True)
    assert not ctx.is_replica_online(3, T0)
    assert ctx.is_replica_online(3, T1)
    assert not ctx.is_replica_online(4, T0, include_shutting_down=True)
    assert ctx.online_replica_set(T0) == {1}
    assert ctx.online_replica_set(T0, include_shutting_down=True) == {1, 2}
    assert ctx.online_replica_set(T1) == {1, 3}
    ctx.clear_replicas_on_offline_dirs([3])
    assert ctx.is_replica_online(3, T0)


def test_online_replica_set_is_the_shared_live_set_without_failed_dirs(ctx: ControllerContext) -> None:
    assert ctx.online_replica_set(T0) is ctx.live_broker_ids


# --- topics -------------------------------------------------------------------------------------------


def test_topic_ids_must_not_conflict(ctx: ControllerContext) -> None:
    ctx.add_topic_id("orders", "id-o")
    ctx.add_topic_id("orders", "id-o")  # same mapping again is fine
    assert ctx.topic_id("orders") == "id-o"
    assert ctx.topic_name("id-o") == "orders"
    with pytest.raises(IllegalStateError):
        ctx.add_topic_id("orders", "id-other")
    with pytest.raises(IllegalStateError):
        ctx.add_topic_id("users", "id-o")
    with pytest.raises(IllegalStateError):
        ctx.add_topic_id("unknown", "id-u")


def test_unknown_partitions_have_the_empty_assignment(ctx: ControllerContext) -> None:
    assert ctx.partition_replica_assignment(TopicPartition("nope", 0)) == ()
    assert ctx.partition_full_replica_assignment(T0).replicas == ()


# --- per-broker indexes ---------------------------------------------------------------------------------


def test_partitions_on_broker_follow_assignment_changes(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    assign(ctx, T1, [2, 3])
    assign(ctx, U0, [3])
    assert ctx.partitions_on_broker(2) == {T0, T1}
    assign(ctx, T0, [1, 3])  # 2 leaves, 3 joins
    assert ctx.partitions_on_broker(2) == {T1}
    assert ctx.partitions_on_broker(3) == {T0, T1, U0}
    assert ctx.replicas_on_brokers([1, 2]) == {
        PartitionAndReplica(T0, 1),
        PartitionAndReplica(T1, 2),
    }
    assert ctx.replicas_for_topic("users") == {PartitionAndReplica(U0, 3)}
    assert ctx.replicas_for_partition([T1]) == {PartitionAndReplica(T1, 2), PartitionAndReplica(T1, 3)}
    assert sorted(ctx.partitions_for_topic("orders")) == [T0, T1]
    assert ctx.partition_count == 3
    ctx.remove_topic("orders")
    assert ctx.partitions_on_broker(3) == {U0}
    assert ctx.partitions_on_broker(2) == set()


def test_partitions_on_broker_returns_a_copy(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1])
    on_one = ctx.partitions_on_broker(1)
    on_one.clear()
    assert ctx.partitions_on_broker(1) == {T0}


def test_leader_queries(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    assign(ctx, T1, [1])  # replication factor 1
    assign(ctx, T2, [2, 1])
    assign(ctx, U0, [1, 3])
    for tp in (T0, T1, U0):
        ctx.put_partition_leadership_info(tp, info(1, (1,)))
    ctx.put_partition_leadership_info(T2, info(2, (2, 1)))
    assert ctx.partition_leaders_on_broker(1) == {T0, U0}
    ctx.queue_topic_deletion(["users"])
    assert ctx.partition_leaders_on_broker(1) == {T0}
    assert ctx.partitions_with_leaders() == {T0, T1, T2}
    ctx.put_partition_leadership_info(T0, info(2, (2,)))
    assert ctx.partition_leaders_on_broker(1) == set()
    assert ctx.partition_leaders_on_broker(2) == {T0, T2}
    assert ctx.partition_with_leaders_count == 4


def test_partitions_with_offline_leader(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    assign(ctx, T1, [2, 3])
    assign(ctx, T2, [3, 1])
    assign(ctx, U0, [4, 1])
    ctx.put_partition_leadership_info(T0, info(-1, (1,)))  # no leader counts as offline
    ctx.put_partition_leadership_info(T1, info(2, (2, 3)))
    ctx.put_partition_leadership_info(T2, info(3, (3, 1)))
    ctx.put_partition_leadership_info(U0, info(4, (4, 1)))  # 4 is not registered
    assert ctx.partitions_with_offline_leader() == {T0, U0}
    ctx.add_shutting_down_broker(2)  # a shutting-down leader is not online either
    ctx.set_replicas_on_offline_dirs(3, [T2])  # leader's log dir failed
    assert ctx.partitions_with_offline_leader() == {T0, T1, T2, U0}
    ctx.queue_topic_deletion(["users"])
    assert ctx.partitions_with_offline_leader() == {T0, T1, T2}


# --- partition states and the offline gauge ------------------------------------------------------------


def test_offline_partition_count_counts_entries_and_exits(ctx: ControllerContext) -> None:
    ctx.put_partition_state(T0, P.NEW)
    ctx.put_partition_state(T0, P.OFFLINE)
    assert ctx.offline_partition_count == 1
    ctx.put_partition_state(T0, P.OFFLINE)  # Offline -> Offline is not a new entry
    assert ctx.offline_partition_count == 1
    ctx.put_partition_state(T1, P.OFFLINE)  # no previous state counts as NonExistent
    assert ctx.offline_partition_count == 2
    ctx.put_partition_state(T0, P.ONLINE)
    ctx.put_partition_state(T1, P.NON_EXISTENT)
    assert ctx.offline_partition_count == 0


def test_offline_partition_count_ignores_topics_whose_deletion_started(ctx: ControllerContext) -> None:
    ctx.put_partition_state(T0, P.OFFLINE)
    ctx.begin_topic_deletion(["orders"])
    ctx.put_partition_state(T0, P.NON_EXISTENT)
    ctx.put_partition_state(T1, P.OFFLINE)
    assert ctx.offline_partition_count == 1  # unchanged: deletion has started


def test_partitions_in_states_uses_the_state_index(ctx: ControllerContext) -> None:
    for tp, state in ((T0, P.NEW), (T1, P.OFFLINE), (T2, P.ONLINE), (U0, P.OFFLINE)):
        assign(ctx, tp, [1])
        ctx.put_partition_state(tp, state)
    assert ctx.partitions_in_states({P.NEW, P.OFFLINE}) == {T0, T1, U0}
    assert ctx.partitions_in_states({P.NEW, P.OFFLINE}, topic="orders") == {T0, T1}
    assert ctx.partitions_in_state(P.ONLINE) == {T2}
    ctx.put_partition_state(T1, P.ONLINE)
    ctx.put_partition_state(T0, P.ONLINE)
    assert ctx.partitions_in_states({P.NEW, P.OFFLINE}) == {U0}
    assert ctx.partitions_in_state(P.ONLINE) == {T0, T1, T2}


def test_check_valid_partition_state_change(ctx: ControllerContext) -> None:
    ctx.put_partition_state(T0, P.NEW)
    ctx.put_partition_state(T1, P.ONLINE)
    valid, invalid = ctx.check_valid_partition_state_change([T0, T1, T2], P.NEW)
    assert valid == []
    assert invalid == [T0, T1, T2]  # T2 has no state at all
    valid, invalid = ctx.check_valid_partition_state_change([T0, T1], P.OFFLINE)
    assert (valid, invalid) == ([T0, T1], [])
    # With a default, a partition without a state gets it first (and is judged by it), in one pass.
    valid, invalid = ctx.check_valid_partition_state_change([T2, T0], P.NEW, default=P.NON_EXISTENT)
    assert (valid, invalid) == ([T2], [T0])
    assert ctx.partition_state(T2) is P.NON_EXISTENT
    assert T2 in ctx.partitions_in_state(P.NON_EXISTENT)


# --- preferred replica imbalance -----------------------------------------------------------------------


def test_imbalance_follows_leadership_changes(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2, 3])
    assert ctx.preferred_replica_imbalance_count == 0  # no leadership info: not counted
    ctx.put_partition_leadership_info(T0, info(2, (1, 2, 3)))
    assert ctx.preferred_replica_imbalance_count == 1
    ctx.put_partition_leadership_info(T0, info(1, (1, 2, 3)))
    assert ctx.preferred_replica_imbalance_count == 0


def test_imbalance_kept_by_the_bulk_leadership_update_is_the_one_by_one_figure() -> None:
    """``put_partition_leadership_infos`` (an election batch) keeps the gauge as the single update does,
    including partitions adding their preferred replica, topics queued for deletion and no assignment."""
    rng = random.Random(7)
    one, bulk = ControllerContext(1), ControllerContext(1)
    partitions = [TopicPartition(f"t{i % 4}", i) for i in range(60)]
    for c in (one, bulk):
        for tp in partitions[:-5]:  # the last five have no assignment
            replicas = random.Random(tp.partition).sample([1, 2, 3, 4], 3)
            adding = replicas[:1] if tp.partition % 7 == 0 else []
            c.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas, adding))
        c.queue_topic_deletion(["t3"])
    for _ in range(5):
        batch = [(tp, info(rng.choice([1, 2, 3, 4, -1]), tuple(rng.sample([1, 2, 3, 4], 2)))) for tp in partitions]
        for tp, i in batch:
            one.put_partition_leadership_info(tp, i)
        bulk.put_partition_leadership_infos(batch)
        assert bulk.preferred_replica_imbalance_count == one.preferred_replica_imbalance_count
    assert one.preferred_replica_imbalance_count > 0


def test_imbalance_follows_assignment_changes(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2, 3])
    ctx.put_partition_leadership_info(T0, info(1, (1, 2, 3)))
    assign(ctx, T0, [2, 1, 3])  # preferred replica is now 2; leader stays 1
    assert ctx.preferred_replica_imbalance_count == 1
    assign(ctx, T0, [1, 2, 3])
    assert ctx.preferred_replica_imbalance_count == 0


def test_imbalance_while_adding_the_preferred_replica_follows_kafkas_literal_rule(ctx: ControllerContext) -> None:
    # Reassigning [1,2,3] -> [4,1,2]: preferred replica 4 is being added.
    assign(ctx, T0, [4, 1, 2, 3], adding=[4], removing=[3])
    ctx.put_partition_leadership_info(T0, info(1, (1, 2, 3)))
    assert ctx.preferred_replica_imbalance_count == 0  # 4 not yet in sync: not imbalanced
    ctx.put_partition_leadership_info(T0, info(1, (1, 2, 3, 4)))
    assert ctx.preferred_replica_imbalance_count == 1  # 4 in sync: imbalanced, whoever leads
    ctx.put_partition_leadership_info(T0, info(4, (1, 2, 3, 4)))
    assert ctx.preferred_replica_imbalance_count == 1


def test_queued_topics_leave_the_imbalance_gauge_once(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    assign(ctx, U0, [1, 2])
    ctx.put_partition_leadership_info(T0, info(2, (1, 2)))
    ctx.put_partition_leadership_info(U0, info(2, (1, 2)))
    assert ctx.preferred_replica_imbalance_count == 2
    ctx.queue_topic_deletion(["orders"])
    ctx.queue_topic_deletion(["orders"])  # queueing again must not subtract again
    assert ctx.preferred_replica_imbalance_count == 1
    ctx.put_partition_leadership_info(T0, info(1, (1, 2)))  # changes to queued topics are ignored
    ctx.put_partition_leadership_info(T0, info(2, (1, 2)))
    assert ctx.preferred_replica_imbalance_count == 1
    ctx.remove_topic("orders")  # already subtracted when queued
    assert ctx.preferred_replica_imbalance_count == 1
    ctx.remove_topic("users")  # never queued: subtracted now
    assert ctx.preferred_replica_imbalance_count == 0


def test_clearing_leadership_info_clears_the_imbalance(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    ctx.put_partition_leadership_info(T0, info(2, (1, 2)))
    ctx.clear_partition_leadership_info()
    assert ctx.preferred_replica_imbalance_count == 0
    assert ctx.partition_leadership_info(T0) is None
    assert ctx.partitions_with_offline_leader() == set()


def _leader_index(ctx: ControllerContext) -> dict[int, set[TopicPartition]]:
    """The context's leader index by partition (numbers differ between two contexts)."""
    tps = ctx.table.tps
    return {leader: {tps[pid] for pid in led} for leader, led in ctx.table.by_leader.items()}


def _recount_imbalance(ctx: ControllerContext) -> int:
    count = 0
    for tp, assignment in ctx.iter_assignments():
        leadership = ctx.partition_leadership_info(tp)
        if leadership is None or tp.topic in ctx.topics_to_be_deleted or not assignment.replicas:
            continue
        preferred = assignment.replicas[0]
        if preferred in assignment.adding_replicas:
            count += preferred in leadership.leader_and_isr.isr
        else:
            count += leadership.leader_and_isr.leader != preferred
    return count


def _recount_offline(ctx: ControllerContext, started: set[str]) -> int:
    return sum(1 for tp, state in ctx.partition_states.items() if state is P.OFFLINE and tp.topic not in started)


@pytest.mark.parametrize("seed", range(5))
def test_incremental_gauges_match_a_full_recount(seed: int) -> None:
    rng = random.Random(seed)
    ctx = ControllerContext(1)
    ctx.set_live_brokers([broker(b) for b in range(1, 6)])
    topics = [f"t{i}" for i in range(4)]
    ctx.add_topics(topics)
    started: set[str] = set()
    tps = [TopicPartition(t, p) for t in topics for p in range(6)]
    for _ in range(3000):
        tp = rng.choice(tps)
        op = rng.random()
        if op < 0.3:
            replicas = rng.sample(range(1, 6), 3)
            if rng.random() < 0.3:
                current = ctx.partition_full_replica_assignment(tp)
                ctx.update_partition_full_replica_assignment(
                    tp, (current if current.replicas else ReplicaAssignment.of(replicas)).reassign_to(replicas)
                )
            else:
                ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas))
        elif op < 0.6:
            isr = tuple(rng.sample(range(1, 6), rng.randint(1, 3)))
            ctx.put_partition_leadership_info(tp, info(rng.choice([*isr, -1]), isr))
        elif op < 0.9:
            ctx.put_partition_state(tp, rng.choice(list(P)))
        elif op < 0.95:
            ctx.queue_topic_deletion([tp.topic])
        elif op < 0.97:
            ctx.begin_topic_deletion([tp.topic])
            started.add(tp.topic)
        else:
            # remove_topic forgets assignments and leadership but keeps partition states
            ctx.remove_topic(tp.topic)
            ctx.add_topics([tp.topic])
            started.discard(tp.topic)
        assert ctx.preferred_replica_imbalance_count == _recount_imbalance(ctx)
    # The offline gauge only moves for topics whose deletion has not started, so with deletions
    # in the mix it must be compared against transitions, not states; check it without them.
    ctx2 = ControllerContext(1)
    for _ in range(2000):
        ctx2.put_partition_state(rng.choice(tps), rng.choice(list(P)))
        assert ctx2.offline_partition_count == _recount_offline(ctx2, set())


@pytest.mark.parametrize("seed", range(5))
def test_bulk_state_and_leadership_updates_equal_the_single_ones(seed: int) -> None:
    """The batch paths (``move_partitions_to_state``, ``put_missing_partition_states``,
    ``put_partition_leadership_infos``) leave the maps, indexes and gauges exactly as the per-partition
    methods do, and report the states they replaced."""
    rng = random.Random(seed)
    topics = [f"t{i}" for i in range(4)]
    tps = [TopicPartition(t, p) for t in topics for p in range(8)]
    assignments = {tp: ReplicaAssignment.of(rng.sample(range(1, 6), 3)) for tp in tps}
    single, bulk = ControllerContext(1), ControllerContext(1)
    for c in (single, bulk):
        c.set_live_brokers([broker(b) for b in range(1, 6)])
        c.add_topics(topics)
        for tp, assignment in assignments.items():
            c.update_partition_full_replica_assignment(tp, assignment)
        c.begin_topic_deletion(["t3"])  # the offline gauge ignores it
        c.queue_topic_deletion(["t2"])  # the imbalance gauge ignores it
    for _ in range(300):
        batch = rng.sample(tps, rng.randint(0, len(tps)))
        op = rng.random()
        if op < 0.4:
            state = rng.choice(list(P))
            before = [single.partition_state(tp) for tp in batch]
            for tp in batch:
                single.put_partition_state(tp, state)
            assert bulk.move_partitions_to_state(batch, state) == before
        elif op < 0.5:
            for tp in batch:
                single.put_partition_state_if_not_exists(tp, P.NON_EXISTENT)
            bulk.put_missing_partition_states(batch, P.NON_EXISTENT)
        else:
            infos = []
            for tp in batch:
                isr = tuple(rng.sample(range(1, 6), rng.randint(1, 3)))
                infos.append((tp, info(rng.choice([*isr, -1]), isr)))
            for tp, leadership in infos:
                single.put_partition_leadership_info(tp, leadership)
            bulk.put_partition_leadership_infos(infos)
        assert dict(bulk.partition_states) == dict(single.partition_states)
        for state in P:
            assert bulk.partitions_in_state(state) == single.partitions_in_state(state)
        assert bulk.offline_partition_count == single.offline_partition_count
        assert dict(bulk.partitions_leadership_info) == dict(single.partitions_leadership_info)
        assert bulk.preferred_replica_imbalance_count == single.preferred_replica_imbalance_count
        assert bulk.preferred_replica_imbalance_count == _recount_imbalance(bulk)
        assert _leader_index(bulk) == _leader_index(single)  # the leader index, empty sets dropped alike
        for b in range(1, 6):
            assert bulk.partition_leaders_on_broker(b) == single.partition_leaders_on_broker(b)


# --- replica states ----------------------------------------------------------------------------------------


def test_replica_state_queries(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    assign(ctx, T1, [2, 3])
    r01, r02, r12, r13 = (PartitionAndReplica(tp, b) for tp, b in ((T0, 1), (T0, 2), (T1, 2), (T1, 3)))
    for replica in (r01, r02, r12):
        ctx.put_replica_state(replica, R.DELETION_SUCCESSFUL)
    ctx.put_replica_state_if_not_exists(r13, R.DELETION_STARTED)
    ctx.put_replica_state_if_not_exists(r13, R.ONLINE)  # exists: unchanged
    assert ctx.replica_state(r13) is R.DELETION_STARTED
    assert ctx.replicas_in_state("orders", R.DELETION_SUCCESSFUL) == {r01, r02, r12}
    assert ctx.is_any_replica_in_state("orders", R.DELETION_STARTED)
    assert not ctx.are_all_replicas_in_state("orders", R.DELETION_SUCCESSFUL)
    assert ctx.are_all_replicas_in_state("no-such-topic", R.DELETION_SUCCESSFUL)  # vacuous
    ctx.remove_replica_state(r13)
    assert ctx.replica_state(r13) is None
    assert dict(ctx.replica_states_of(T1)) == {2: R.DELETION_SUCCESSFUL}
    ctx.remove_replica_state(r12)
    assert dict(ctx.replica_states_of(T1)) == {}
    assert sorted(ctx.iter_replica_states()) == [(r01, R.DELETION_SUCCESSFUL), (r02, R.DELETION_SUCCESSFUL)]


def test_check_valid_replica_state_change(ctx: ControllerContext) -> None:
    online = PartitionAndReplica(T0, 1)
    unknown = PartitionAndReplica(T0, 2)
    ctx.put_replica_state(online, R.ONLINE)
    assert ctx.check_valid_replica_state_change([online, unknown], R.OFFLINE) == ([online], [unknown])


def test_online_and_offline_replicas(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 4])
    ctx.set_replicas_on_offline_dirs(1, [T1])
    assign(ctx, T1, [1, 2])
    online, offline = ctx.online_and_offline_replicas()
    assert online == {PartitionAndReplica(T0, 1), PartitionAndReplica(T1, 2)}
    assert offline == {PartitionAndReplica(T0, 4), PartitionAndReplica(T1, 1)}
    assert ctx.all_live_replicas() == online


# --- deletion bookkeeping and reset --------------------------------------------------------------------------


def test_remove_topic_keeps_partition_states(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1])
    ctx.add_topic_id("orders", "id-o")
    ctx.put_partition_leadership_info(T0, info(1, (1,)))
    ctx.put_partition_state(T0, P.NON_EXISTENT)
    ctx.queue_topic_deletion(["orders"])
    ctx.begin_topic_deletion(["orders"])
    ctx.mark_topics_ineligible_for_deletion(["orders"])
    ctx.partitions_being_reassigned.add(T0)
    ctx.remove_topic("orders")
    assert "orders" not in ctx.all_topics
    assert not ctx.is_topic_queued_up_for_deletion("orders")
    assert not ctx.is_topic_deletion_in_progress("orders")
    assert "orders" not in ctx.topics_ineligible_for_deletion
    assert ctx.topic_id("orders") is None and ctx.topic_name("id-o") is None
    assert ctx.partition_leadership_info(T0) is None
    assert ctx.partition_leaders_on_broker(1) == set()
    assert ctx.partition_state(T0) is P.NON_EXISTENT
    assert T0 not in ctx.partitions_being_reassigned


def test_reset_forgets_everything(ctx: ControllerContext) -> None:
    ctx.epoch, ctx.epoch_zk_version = 7, 9
    assign(ctx, T0, [1, 2])
    ctx.put_partition_leadership_info(T0, info(2, (1, 2)))
    ctx.put_partition_state(T0, P.OFFLINE)
    ctx.put_replica_state(PartitionAndReplica(T0, 1), R.ONLINE)
    ctx.add_shutting_down_broker(1)
    ctx.queue_topic_deletion(["users"])
    ctx.reset()
    assert (ctx.epoch, ctx.epoch_zk_version) == (0, 0)
    assert ctx.controller_id == 1
    assert ctx.live_or_shutting_down_broker_ids == frozenset()
    assert ctx.shutting_down_broker_ids == frozenset()
    assert ctx.all_partitions() == []
    assert ctx.partition_state(T0) is None
    assert ctx.replica_state(PartitionAndReplica(T0, 1)) is None
    assert ctx.offline_partition_count == 0
    assert ctx.preferred_replica_imbalance_count == 0
    assert ctx.topics_to_be_deleted == set()
    assert ctx.partitions_in_states({P.OFFLINE}) == set()
    assert ctx.partitions_on_broker(1) == set()


def test_docstring_names_the_single_writer() -> None:
    assert (ControllerContext.__doc__ or "").splitlines()[0] == "Mutated only on the controller event thread."


# --- the columnar partition table --------------------------------------------------------------------


def test_partitions_sharing_replica_states_change_independently(ctx: ControllerContext) -> None:
    """Replica states are shared mappings: moving one partition's replica must not move the others'."""
    assign(ctx, T0, [1, 2, 3])
    assign(ctx, T1, [1, 2, 3])
    shared = {1: R.ONLINE, 2: R.ONLINE, 3: R.ONLINE}
    ctx.load_replica_states({T0: shared, T1: dict(shared)})
    assert ctx.replica_states_of(T0) is ctx.replica_states_of(T1)  # one mapping for both
    ctx.put_replica_state(PartitionAndReplica(T0, 2), R.OFFLINE)
    ctx.move_replicas_of_broker(3, [T0], R.OFFLINE)
    ctx.check_valid_replica_state_change([PartitionAndReplica(T0, 4)], R.NEW, default=R.NON_EXISTENT)
    ctx.remove_replica_state(PartitionAndReplica(T0, 1))
    assert dict(ctx.replica_states_of(T0)) == {2: R.OFFLINE, 3: R.OFFLINE, 4: R.NON_EXISTENT}
    assert dict(ctx.replica_states_of(T1)) == shared
    assert ctx.replica_state(PartitionAndReplica(T1, 2)) is R.ONLINE


def test_a_partition_keeps_its_number_and_state_when_its_topic_goes(ctx: ControllerContext) -> None:
    assign(ctx, T0, [1, 2])
    ctx.put_partition_state(T0, P.OFFLINE)
    ctx.put_partition_leadership_info(T0, info(1, (1, 2)))
    (number,) = ctx.partition_ids([T0])
    ctx.remove_topic("orders")
    assert ctx.partition_ids([T0]) == [number]
    assert ctx.partition_state(T0) is P.OFFLINE  # NonExistent is written by deletion, not by forgetting
    assert ctx.partition_leadership_info(T0) is None
    assert T0 not in ctx.partitions_leadership_info and len(ctx.partitions_leadership_info) == 0
    assert ctx.partitions_on_broker(1) == set() and ctx.partition_count == 0


def test_column_views_agree_with_the_single_lookups(ctx: ControllerContext) -> None:
    for tp, leader in ((T0, 1), (T1, 2), (U0, 3)):
        assign(ctx, tp, [leader, 1 + leader % 3])
        ctx.put_partition_leadership_info(tp, info(leader, (leader,)))
    ctx.put_partition_state(T0, P.ONLINE)
    ctx.put_partition_state(T2, P.NEW)  # a state without an assignment or leadership
    leadership = ctx.partitions_leadership_info
    assert dict(leadership) == {tp: ctx.partition_leadership_info(tp) for tp in (T0, T1, U0)}
    assert len(leadership) == ctx.partition_with_leaders_count == 3
    assert leadership.get(T2) is None and T2 not in leadership
    assert dict(ctx.partition_states) == {T0: P.ONLINE, T2: P.NEW}
    assert ctx.partitions_of(ctx.partition_ids_in_states([P.NEW])) == [T2]
    ctx.remove_live_brokers([2])
    assert ctx.partitions_of(ctx.partition_ids_with_offline_leader()) == [T1]
