"""Whole snapshots against a real Redis: a full rewrite staged outside any transaction, then swapped in
by one short ``MULTI`` (other clients are served while a big cluster's rows go in), and the meta hash
updated only over its own generation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from redis.client import Pipeline

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.clusters import layout
from workers.mirror.snapshot import SnapshotWriter
from workers.mirror.state import OBSERVED, MirrorState, StateRead

PARTITIONS = 20_000


class CountingPipeline(Pipeline):
    """Records, per ``execute``, whether it was a transaction (an attribute of the pipeline, which the
    stubs know only as ``Redis.transaction``, the method) and how many arguments it carried."""

    executed: list[tuple[bool, int]]

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.executed.append((bool(vars(self)["transaction"]), sum(len(args) for args, _ in self.command_stack)))
        return super().execute(raise_on_error)


@pytest.fixture
def cluster() -> str:
    return f"rw-{uuid.uuid4().hex[:8]}"


def big_state(cluster: str, partitions: int = PARTITIONS) -> MirrorState:
    state = MirrorState(cluster, mode=OBSERVED)
    state.set_brokers({b: {"id": b} for b in (1, 2, 3)})
    state.set_topic_names(["big"])
    replicas = {p: [p % 3 + 1, (p + 1) % 3 + 1] for p in range(partitions)}
    state.set_topic("big", None, {p: ReplicaAssignment.of(r) for p, r in replicas.items()})
    state.apply_state_reads(
        {TopicPartition("big", p): StateRead(r[0], 0, tuple(r), 1, 0, p) for p, r in replicas.items()}
    )
    return state


def mirror_keys(client: redis.Redis, cluster: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=layout.all_mirror_keys_pattern(cluster), count=1000)}


def test_the_rows_go_in_outside_the_transaction_and_the_swap_is_short(rds: redis.Redis, cluster: str) -> None:
    executed: list[tuple[bool, int]] = []

    def pipeline(transaction: bool = True, shard_hint: Any = None) -> CountingPipeline:
        pipe = CountingPipeline(rds.connection_pool, rds.response_callbacks, transaction, shard_hint)
        pipe.executed = executed
        return pipe

    rds.pipeline = pipeline  # type: ignore[method-assign]
    SnapshotWriter(rds, cluster).write_full(big_state(cluster), {"gen": "g1", "seq": 1})
    transactions = [size for transaction, size in executed if transaction]
    assert len(transactions) == 1 and transactions[0] < 1_000, executed  # a few dozen keys, not 20,000 rows
    assert sum(size for transaction, size in executed if not transaction) > 2 * PARTITIONS
    # Whole, under the live names, nothing left staged.
    assert rds.hlen(layout.partitions_key(cluster)) == PARTITIONS
    assert rds.zcard(layout.partition_state_set(cluster, "OnlinePartition")) == PARTITIONS
    assert rds.zcard(layout.replica_state_set(cluster, "OnlineReplica")) == 2 * PARTITIONS
    assert rds.hget(layout.meta_key(cluster), "gen") == b"g1"
    assert not [k for k in mirror_keys(rds, cluster) if ":staging:" in k]


def test_a_rewrite_replaces_the_old_snapshot_and_the_leftovers_of_one_that_died(rds: redis.Redis, cluster: str) -> None:
    writer = SnapshotWriter(rds, cluster)
    writer.write_full(big_state(cluster, 50), {"gen": "g1", "seq": 1})
    rds.zadd(layout.partition_state_set(cluster, "OfflinePartition"), {"gone/000000": 0})  # not in the new one
    died = layout.staging_key(cluster, layout.partitions_key(cluster), "g0")
    rds.hset(died, "big/000099", "{}")  # a rewrite that died half-way
    same = layout.staging_key(cluster, layout.partitions_key(cluster), "g2")
    rds.hset(same, "stray/000000", "{}")  # ... and one of the very generation written next
    writer.write_full(big_state(cluster, 20), {"gen": "g2", "seq": 2})
    assert rds.hlen(layout.partitions_key(cluster)) == 20
    assert rds.hget(layout.partitions_key(cluster), "stray/000000") is None
    assert not rds.exists(layout.partition_state_set(cluster, "OfflinePartition"))
    assert rds.zcard(layout.partition_state_set(cluster, "OnlinePartition")) == 20
    assert not [k for k in mirror_keys(rds, cluster) if ":staging:" in k]
    assert rds.hget(layout.meta_key(cluster), "seq") == b"2"


def test_a_key_of_another_cluster_has_no_staging_name() -> None:
    with pytest.raises(ValueError, match="not a mirror key"):
        layout.staging_key("a", layout.partitions_key("b"), "g")


def test_the_meta_is_updated_only_over_its_own_generation(rds: redis.Redis, cluster: str) -> None:
    """A heartbeat's check and write were two commands: a FLUSHALL between them let the write bring
    the old generation back over an empty snapshot, and the loss was never seen (CI, stop 43)."""
    writer = SnapshotWriter(rds, cluster)
    writer.write_full(big_state(cluster, 4), {"gen": "g1", "seq": 1})
    assert writer.write_meta_of_gen({"gen": "g1", "seq": 2, "heartbeat_at": 5, "lag_ms": None}, "g1")
    assert rds.hmget(layout.meta_key(cluster), ["seq", "heartbeat_at", "lag_ms"]) == [b"2", b"5", b""]
    rds.unlink(*mirror_keys(rds, cluster))  # the snapshot lost, as FLUSHALL or a restart loses it
    assert not writer.write_meta_of_gen({"gen": "g1", "seq": 3, "heartbeat_at": 6}, "g1")
    assert not rds.exists(layout.meta_key(cluster))  # nothing written: the next heartbeat sees the loss too
    writer.write_full(big_state(cluster, 4), {"gen": "g2", "seq": 4})  # another writer's newer snapshot
    assert not writer.write_meta_of_gen({"gen": "g1", "seq": 5}, "g1")
    assert rds.hmget(layout.meta_key(cluster), ["gen", "seq"]) == [b"g2", b"4"]
