"""Memoized contributions: what a flush says (counters, state sets, transitions) equals a recount from scratch."""

from __future__ import annotations

import random
from collections import Counter

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.clusters.layout import PartitionRow
from workers.mirror.changes import ChangeSet
from workers.mirror.contributions import contribution, delta, membership, moves, signature
from workers.mirror.state import MANAGED, OBSERVED, MirrorState, StateRead

BROKERS = {b: {"id": b} for b in (1, 2, 3, 4)}
STATES = ["OnlinePartition", "OfflinePartition", "NewPartition"]
RSTATES = ["OnlineReplica", "OfflineReplica", "NewReplica", None]


def random_signature(rng: random.Random) -> tuple:  # type: ignore[type-arg]
    replicas = tuple(rng.sample([1, 2, 3, 4], rng.randint(1, 3)))
    return (
        rng.choice(STATES),
        replicas,
        tuple(rng.choice(RSTATES) for _ in replicas),
        rng.choice([-1, *replicas]),
        rng.random() < 0.5,
        rng.random() < 0.5,
        rng.random() < 0.5,
        rng.random() < 0.2,
    )


def test_a_delta_moves_one_contribution_exactly_onto_the_other() -> None:
    rng = random.Random(3)
    for _ in range(500):
        old = random_signature(rng) if rng.random() > 0.1 else None
        new = random_signature(rng) if rng.random() > 0.1 else None
        d = delta(old, new)
        old_topic, old_broker = contribution(old) if old else ([], [])
        new_topic, new_broker = contribution(new) if new else ([], [])
        cluster = Counter(old_topic + old_broker)
        cluster.update(d.plus)
        cluster.subtract(d.minus)
        assert +cluster == Counter(new_topic + new_broker)
        topic = Counter(old_topic)
        topic.update(d.topic_plus)
        topic.subtract(d.topic_minus)
        assert +topic == Counter(new_topic)
        moved = Counter(new_topic + new_broker)
        moved.subtract(old_topic + old_broker)
        assert d.keys == {k for k, n in moved.items() if n}


def test_state_set_moves_take_a_row_from_its_old_sets_to_its_new_ones() -> None:
    row = PartitionRow("t", 1, (1, 2), state="OnlinePartition", replica_states={1: "OnlineReplica"})
    before = membership(row)
    row.state, row.replica_states = "OfflinePartition", {1: "OfflineReplica", 2: "OnlineReplica"}
    after = membership(row)
    ops = moves("c", before, after)
    removed = {(key, b) for add, key, b in ops if not add}
    added = {(key, b) for add, key, b in ops if add}
    assert ("kcp:c:m:pz:OnlinePartition", None) in removed and ("kcp:c:m:pz:OfflinePartition", None) in added
    # Broker 2's replica had no state (counted as NewReplica): it moves to OnlineReplica.
    assert ("kcp:c:m:rz:NewReplica", 2) in removed and ("kcp:c:m:rz:OnlineReplica", 2) in added
    assert ("kcp:c:m:bz:1", None) not in removed | added  # still hosted


def test_a_signature_says_what_the_counters_need() -> None:
    row = PartitionRow("t", 0, (1, 2, 3), leader=2, isr=(2,), state="OnlinePartition", replica_states={1: "x"})
    assert signature(row, {2, 3}, 2) == ("OnlinePartition", (1, 2, 3), ("x", None, None), 2, False, True, True, False)
    assert signature(row, {3}, 1)[4] is True  # its leader is not live: offline


def reference_edges(old: PartitionRow | None, new: PartitionRow | None, ch: Counter[tuple[str, str, str, str]]) -> None:
    """Transitions of one row change by their definition (``MirrorState._record_diff``), written independently."""
    ref = new or old
    assert ref is not None
    hosts = set(old.replicas if old else ()) | set(new.replicas if new else ())
    src_p = old.state if old else "NonExistentPartition"
    dst_p = new.state if new else "NonExistentPartition"
    scopes = ["cluster", f"topic:{ref.topic}"]
    if src_p != dst_p:
        for scope in [*scopes, *(f"broker:{b}" for b in hosts)]:
            ch[(scope, "partition", src_p, dst_p)] += 1
    for b in hosts:
        src = old.replica_states.get(b, "NonExistentReplica") if old else "NonExistentReplica"
        dst = new.replica_states.get(b, "NonExistentReplica") if new else "NonExistentReplica"
        if src != dst:
            for scope in [*scopes, f"broker:{b}"]:
                ch[(scope, "replica", src, dst)] += 1


def flat_edges(ch: ChangeSet) -> Counter[tuple[str, str, str, str]]:
    out: Counter[tuple[str, str, str, str]] = Counter()
    for scope, machines in ch.edges.items():
        for machine, edges in machines.items():
            for edge, n in edges.items():
                src, _, dst = edge.partition(">")
                out[(scope, machine, src, dst)] += n
    return out


def test_flushed_state_sets_and_transitions_equal_their_definitions_under_random_changes() -> None:
    rng = random.Random(7)
    state = MirrorState("c", mode=OBSERVED)
    state.set_brokers(BROKERS)
    state.set_topic_names(["a", "b"])
    for topic in ("a", "b"):
        state.set_topic(topic, None, {p: ReplicaAssignment.of(rng.sample([1, 2, 3, 4], 3)) for p in range(6)})
    state.mark_flushed_all()
    sets: dict[str, set[str]] = {}
    for m in state.partitions:
        for key, name in state.membership_of(m):
            sets.setdefault(key, set()).add(name)
    expected: Counter[tuple[str, str, str, str]] = Counter()
    for step in range(600):
        before = {m: row.clone() for m, row in state.partitions.items()}
        op = rng.random()
        if op < 0.15:
            state.set_brokers({b: reg for b, reg in BROKERS.items() if rng.random() > 0.3})
        elif op < 0.25:
            topic = rng.choice(["a", "b", "c"])
            state.set_topic_names({*state.topics, topic})
            count = rng.randint(1, 6)
            state.set_topic(topic, None, {p: ReplicaAssignment.of(rng.sample([1, 2, 3, 4], 3)) for p in range(count)})
        elif op < 0.3:
            state.remove_topic(rng.choice(["b", "c"]))
        else:
            row = rng.choice(list(state.partitions.values()))
            leader = rng.choice([*row.replicas, -1])
            isr = tuple(rng.sample(list(row.replicas), rng.randint(1, len(row.replicas))))
            read = StateRead(leader, row.leader_epoch + 1, isr, 1, row.leader_epoch + 1, 1000 + step)
            state.apply_state_reads({TopicPartition(row.topic, row.partition): read})
        for m in set(before) | set(state.partitions):
            old, new = before.get(m), state.partitions.get(m)
            if old is None or new is None or (old.state, old.replica_states) != (new.state, new.replica_states):
                reference_edges(old, new, expected)
        if step % 7 == 0:
            ch = state.take_changes()
            for key, names in ch.zrem.items():
                sets[key] -= set(names)
            for key, names in ch.zadd.items():
                sets.setdefault(key, set()).update(names)
            assert +flat_edges(ch) == +expected
            expected.clear()
            want: dict[str, set[str]] = {}
            for m in state.partitions:
                for key, name in state.membership_of(m):
                    want.setdefault(key, set()).add(name)
            assert {k: v for k, v in sets.items() if v} == want


def test_managed_records_still_count_exactly() -> None:
    state = MirrorState("c", mode=MANAGED)
    state.set_brokers(BROKERS)
    state.set_topic_names(["a"])
    state.set_topic("a", None, {0: ReplicaAssignment.of([1, 2])})
    state.apply_records(
        [
            {"kind": "replica_transition", "topic": "a", "partition": 0, "replica": 1, "to_state": "OnlineReplica"},
            {"kind": "partition_transition", "topic": "a", "partition": 0, "to_state": "OnlinePartition",
             "leader_after": 1, "leader_epoch_after": 0, "isr_after": [1]},
        ]
    )  # fmt: skip
    c = state.counts
    assert (c["p:OnlinePartition"], c["p:NewPartition"], c["b:1:leaders"], c["urp"]) == (1, 0, 1, 1)
    assert (c["r:OnlineReplica"], c["r:NewReplica"]) == (1, 1)
