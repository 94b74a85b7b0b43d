"""MirrorState: counters stay exact, states are derived or reported, reads never regress."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Set as AbstractSet

import pytest

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.clusters import layout
from dashboard.clusters.layout import PartitionRow
from workers.mirror.state import MANAGED, OBSERVED, MirrorState, StateRead

BROKERS = {b: {"id": b, "endpoints": [f"PLAINTEXT://h{b}:9092"]} for b in (1, 2, 3)}


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def read(leader: int, epoch: int, isr: tuple[int, ...], mzxid: int) -> StateRead:
    return StateRead(leader, epoch, isr, 1, epoch, mzxid)


def cluster(mode: str = OBSERVED) -> MirrorState:
    state = MirrorState("c", mode=mode)
    state.set_brokers(BROKERS)
    state.set_topic_names(["orders"])
    state.set_topic("orders", "id-1", {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 3])}, min_isr=2)
    state.apply_state_reads({tp("orders", 0): read(1, 0, (1, 2), 10), tp("orders", 1): read(2, 0, (2, 3), 11)})
    return state


def _row_counts(row: PartitionRow, live: AbstractSet[int], min_isr: int, per_broker: bool) -> Counter[str]:
    """One partition's share of the counters, from the definitions in ``dashboard/clusters/layout.py``
    (written here independently of ``workers.mirror.aggregates``, whose sums the mirror keeps)."""
    c: Counter[str] = Counter()
    c["partitions"] += 1
    c[f"p:{row.state}"] += 1
    c["replicas"] += len(row.replicas)
    c["offline"] += row.leader == -1 or row.leader not in live
    c["urp"] += len(row.isr) < len(row.replicas)
    c["umi"] += len(row.isr) < min_isr
    c["nonpref"] += not row.replicas or row.leader != row.replicas[0]
    c["reassigning"] += bool(row.adding or row.removing or row.admin_reassign)
    if row.leader >= 0:
        c[f"b:{row.leader}:leaders"] += 1
    for broker in row.replicas:
        replica_state = row.replica_states.get(broker, "NewReplica")
        c[f"r:{replica_state}"] += 1
        c[f"b:{broker}:replicas"] += 1
        if per_broker:
            c[f"b:{broker}:p:{row.state}"] += 1
            c[f"b:{broker}:r:{replica_state}"] += 1
    return c


def recomputed(state: MirrorState, topic: str | None = None) -> Counter[str]:
    """The counters from scratch (the cluster's, or one topic's): what incremental maintenance must equal."""
    total: Counter[str] = Counter()
    for row in state.partitions.values():
        if topic is None or row.topic == topic:
            total.update(_row_counts(row, state.live, state.topics[row.topic].min_isr, per_broker=topic is None))
    return total


def derived_state(row: PartitionRow, live: AbstractSet[int]) -> tuple[str, dict[int, str]]:
    """Observed mode by Kafka's meaning: no state znode yet is New; a registered leader Online."""
    if row.mzxid < 0 and row.leader_epoch < 0:
        return "NewPartition", dict.fromkeys(row.replicas, "NewReplica")
    online = row.leader >= 0 and row.leader in live
    replicas = {b: "OnlineReplica" if b in live else "OfflineReplica" for b in row.replicas}
    return ("OnlinePartition" if online else "OfflinePartition"), replicas


def nonzero(counter: Counter[str]) -> dict[str, int]:
    return {k: v for k, v in counter.items() if v and k not in (layout.LIVE_BROKERS, layout.TOPICS)}


def test_it_counts_partitions_replicas_and_leaders() -> None:
    state = cluster()
    c = state.counts
    assert (c["partitions"], c["replicas"], c["brokers"], c["topics"]) == (2, 4, 3, 1)
    assert (c["p:OnlinePartition"], c["r:OnlineReplica"], c["offline"], c["urp"]) == (2, 4, 0, 0)
    assert (c["b:1:leaders"], c["b:2:leaders"], c["b:2:replicas"], c["b:2:r:OnlineReplica"]) == (1, 1, 2, 2)


def test_it_derives_offline_when_the_leader_dies_and_marks_it_derived() -> None:
    state = cluster()
    state.set_brokers({b: r for b, r in BROKERS.items() if b != 1})
    row = state.partitions["orders/000000"]
    assert (row.state, row.derived, row.replica_states[1], row.replica_states[2]) == (
        "OfflinePartition", True, "OfflineReplica", "OnlineReplica",
    )  # fmt: skip
    assert state.counts["offline"] == 1 and state.counts["p:OfflinePartition"] == 1
    # orders-0 [1,2] leader 1 (dead), ISR (1,2); orders-1 [2,3] leader 2, ISR (2,3); min ISR 2.
    assert nonzero(state.counts) == {
        "partitions": 2, "replicas": 4, "p:OfflinePartition": 1, "p:OnlinePartition": 1, "offline": 1,
        "r:OfflineReplica": 1, "r:OnlineReplica": 3,
        "b:1:leaders": 1, "b:2:leaders": 1, "b:1:replicas": 1, "b:2:replicas": 2, "b:3:replicas": 1,
        "b:1:p:OfflinePartition": 1, "b:2:p:OfflinePartition": 1, "b:2:p:OnlinePartition": 1,
        "b:3:p:OnlinePartition": 1, "b:1:r:OfflineReplica": 1, "b:2:r:OnlineReplica": 2, "b:3:r:OnlineReplica": 1,
    }  # fmt: skip
    assert nonzero(state.counts) == nonzero(recomputed(state))


def test_a_partition_without_state_znode_is_new() -> None:
    state = cluster()
    state.set_topic("fresh", None, {0: ReplicaAssignment.of([3])})
    row = state.partitions["fresh/000000"]
    assert (row.state, row.replica_states) == ("NewPartition", {3: "NewReplica"})


def test_it_never_regresses_to_an_older_state_read() -> None:
    state = cluster()
    state.apply_state_reads({tp("orders", 0): read(2, 3, (2,), 50)})
    state.apply_state_reads({tp("orders", 0): read(1, 2, (1, 2), 60)})  # older leader epoch
    state.apply_state_reads({tp("orders", 0): read(1, 3, (1, 2), 40)})  # same epoch, older mzxid
    row = state.partitions["orders/000000"]
    assert (row.leader, row.leader_epoch, row.isr) == (2, 3, (2,))
    assert state.counts["urp"] == 1 and state.counts["umi"] == 1 and state.counts["nonpref"] == 1


def test_counters_stay_exact_under_random_changes() -> None:
    rng = random.Random(1)
    state = cluster()
    for step in range(400):
        op = rng.random()
        if op < 0.15:
            live = {b: BROKERS[b] for b in BROKERS if rng.random() > 0.3}
            state.set_brokers(live)
        elif op < 0.3:
            topic = rng.choice(["orders", "t2", "t3"])
            n = rng.randint(1, 4)
            state.set_topic(topic, None, {p: ReplicaAssignment.of(rng.sample([1, 2, 3], 2)) for p in range(n)})
        elif op < 0.35:
            state.remove_topic(rng.choice(["t2", "t3"]))
        else:
            row = rng.choice(list(state.partitions.values()))
            leader = rng.choice([*row.replicas, -1])
            isr = tuple(rng.sample(list(row.replicas), rng.randint(1, len(row.replicas))))
            state.apply_state_reads(
                {tp(row.topic, row.partition): read(leader, row.leader_epoch + 1, isr, 1000 + step)}
            )
        if step % 10 == 0:
            state.take_changes()
    assert nonzero(state.counts) == nonzero(recomputed(state))
    for topic, tc in state.topic_counts.items():
        assert {k: v for k, v in tc.items() if v} == {k: v for k, v in recomputed(state, topic).items() if v}
    for row in state.partitions.values():  # observed mode: every state is derived, by Kafka's meaning
        assert (row.state, row.replica_states) == derived_state(row, state.live), row


def test_controller_records_set_states_that_are_not_derived() -> None:
    state = cluster(MANAGED)
    state.take_changes()
    state.apply_records(
        [
            {"kind": "election", "topic": "orders", "partition": 0, "from_state": "OnlinePartition",
             "to_state": "OnlinePartition", "leader_after": 2, "isr_after": [2], "leader_epoch_after": 1,
             "controller_epoch": 2},
            {"kind": "replica_transition", "topic": "orders", "partition": 0, "replica": 1,
             "from_state": "OnlineReplica", "to_state": "OfflineReplica"},
        ]
    )  # fmt: skip
    row = state.partitions["orders/000000"]
    assert (row.leader, row.isr, row.derived, row.replica_derived) == (2, (2,), False, False)
    assert row.replica_states[1] == "OfflineReplica"
    changes = state.take_changes()
    assert changes.edges["cluster"]["partition"]["OnlinePartition>OnlinePartition"] == 1
    assert changes.edges["broker:1"]["replica"]["OnlineReplica>OfflineReplica"] == 1
    assert "orders/000000" in changes.rows


def test_a_state_snapshot_overwrites_states_without_animating() -> None:
    state = cluster(MANAGED)
    state.take_changes()
    state.apply_records(
        [{"kind": "state_snapshot", "partition_states": {"OfflinePartition": ["orders-1"]},
          "replica_states": {"ReplicaDeletionIneligible": ["orders-1@3"]}}]
    )  # fmt: skip
    row = state.partitions["orders/000001"]
    assert (row.state, row.replica_states[3], row.derived) == ("OfflinePartition", "ReplicaDeletionIneligible", False)
    changes = state.take_changes()
    assert not changes.edges.get("cluster", {}).get("partition")
    assert changes.counts["p:OfflinePartition"] == 1


def test_records_that_arrive_before_the_topic_are_kept_until_it_does() -> None:
    state = cluster(MANAGED)
    state.apply_records(
        [{"kind": "partition_transition", "topic": "late", "partition": 0, "from_state": "NonExistentPartition",
          "to_state": "NewPartition"}]
    )  # fmt: skip
    state.set_topic("late", None, {0: ReplicaAssignment.of([1])})
    row = state.partitions["late/000000"]
    assert (row.state, row.derived) == ("NewPartition", False)


def test_malformed_records_are_ignored() -> None:
    state = cluster(MANAGED)
    state.apply_records([{"kind": "partition_transition", "topic": "orders", "partition": 0, "to_state": "Bogus"}])
    assert state.partitions["orders/000000"].state == "OnlinePartition"


def test_membership_moves_between_state_sets() -> None:
    state = cluster()
    state.mark_flushed_all()
    state.set_brokers({b: r for b, r in BROKERS.items() if b != 1})
    changes = state.take_changes()
    assert changes.zrem[layout.partition_state_set("c", "OnlinePartition")] == ["orders/000000"]
    assert changes.zadd[layout.partition_state_set("c", "OfflinePartition")] == ["orders/000000"]
    assert changes.zadd[layout.replica_state_set("c", "OfflineReplica")] == ["orders/000000@1"]
    assert changes.zadd[layout.replica_state_set("c", "OfflineReplica", 1)] == ["orders/000000"]


def test_removing_a_topic_removes_its_rows_and_counts() -> None:
    state = cluster()
    state.mark_flushed_all()
    state.set_topic_names([])
    changes = state.take_changes()
    assert sorted(changes.removed_rows) == ["orders/000000", "orders/000001"]
    assert changes.removed_topics == ["orders"]
    assert state.counts["partitions"] == 0 and changes.counts["partitions"] == 0
    assert changes.edges["cluster"]["partition"]["OnlinePartition>NonExistentPartition"] == 2


@pytest.mark.parametrize("mode", ["bogus", ""])
def test_it_refuses_unknown_modes(mode: str) -> None:
    with pytest.raises(ValueError, match="mode must be"):
        MirrorState("c", mode=mode)


def test_deferred_refresh_keeps_counters_exact_whatever_happens_in_between() -> None:
    state = cluster()
    pending = state.set_brokers({b: r for b, r in BROKERS.items() if b != 1}, defer=True)
    assert pending == ["orders/000000"]  # derived rows hosted by broker 1
    # A state read lands before the deferred re-derivation runs.
    state.apply_state_reads({tp("orders", 0): read(2, 1, (2,), 70)})
    state.refresh(pending)
    assert nonzero(state.counts) == nonzero(recomputed(state))
    assert state.partitions["orders/000000"].replica_states[1] == "OfflineReplica"
    # orders-0 now led by 2 (ISR (2,)) with broker 1 dead; orders-1 unchanged (leader 2, ISR (2,3)).
    assert nonzero(state.counts) == {
        "partitions": 2, "replicas": 4, "p:OnlinePartition": 2, "urp": 1, "umi": 1, "nonpref": 1,
        "r:OfflineReplica": 1, "r:OnlineReplica": 3, "b:2:leaders": 2,
        "b:1:replicas": 1, "b:2:replicas": 2, "b:3:replicas": 1,
        "b:1:p:OnlinePartition": 1, "b:2:p:OnlinePartition": 2, "b:3:p:OnlinePartition": 1,
        "b:1:r:OfflineReplica": 1, "b:2:r:OnlineReplica": 2, "b:3:r:OnlineReplica": 1,
    }  # fmt: skip
