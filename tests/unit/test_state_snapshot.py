"""The state-snapshot record built from the table's columns: the same JSON, byte for byte, as the dict
of lists of entity strings it replaced (docs/contracts.md), whatever the slicing."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from controller_core import state_snapshot
from controller_core.context import ControllerContext
from controller_core.model import PartitionAndReplica, TopicPartition
from controller_core.record_kinds import RecordKind
from controller_core.state_change_log import MemorySink, StateChangeLogger, encode_record
from controller_core.states import PartitionState, ReplicaState


def reference_fields(ctx: ControllerContext) -> dict[str, Any]:
    """The record's fields as the controller built them before: a string per entity (the oracle)."""
    partition_states: dict[str, list[str]] = {}
    for tp, p_state in zip(ctx.table.tps, ctx.table.state, strict=True):
        if p_state is not None:
            partition_states.setdefault(p_state.value, []).append(f"{tp.topic}-{tp.partition}")
    replica_states: dict[str, list[str]] = {}
    for replica, r_state in ctx.iter_replica_states():
        rtp = replica.topic_partition
        replica_states.setdefault(r_state.value, []).append(f"{rtp.topic}-{rtp.partition}@{replica.replica}")
    return {"partition_states": partition_states, "replica_states": replica_states}


def mixed_context(partitions: int, seed: int) -> ControllerContext:
    """Partitions of several topics in random partition and replica states; some rows without any."""
    rng = random.Random(seed)
    ctx = ControllerContext(controller_id=1)
    p_states, r_states = list(PartitionState), list(ReplicaState)
    for n in range(partitions):
        tp = TopicPartition(f"t.{n % 7}_x-{n % 3}", n // 7)
        pid = ctx.table.id_of(tp)
        if rng.random() < 0.9:
            ctx.put_partition_state(tp, rng.choice(p_states) if rng.random() < 0.2 else PartitionState.ONLINE)
        for broker_id in rng.sample(range(1, 7), rng.choice((0, 1, 3))):
            state = rng.choice(r_states) if rng.random() < 0.2 else ReplicaState.ONLINE
            ctx.put_replica_state(PartitionAndReplica(tp, broker_id), state)
        assert pid == n
    return ctx


def logger() -> StateChangeLogger:
    return StateChangeLogger(MemorySink(), controller_id=1, epoch_source=lambda: 4, clock=lambda: 1.5)


def reference_json(ctx: ControllerContext) -> bytes:
    return encode_record(logger().record(RecordKind.STATE_SNAPSHOT, **reference_fields(ctx)))


def record_json(ctx: ControllerContext) -> bytes:
    return encode_record(
        logger().record_json(RecordKind.STATE_SNAPSHOT, state_snapshot.snapshot_json_fields(ctx.table))
    )


@pytest.mark.parametrize(("partitions", "slice_size", "seed"), [(0, 8, 0), (1, 8, 1), (300, 7, 2), (1000, 64, 3)])
def test_the_record_is_the_reference_json_byte_for_byte(
    partitions: int, slice_size: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_snapshot, "SLICE", slice_size)
    ctx = mixed_context(partitions, seed)
    expected = reference_json(ctx)
    assert record_json(ctx) == expected
    decoded = orjson.loads(expected)
    assert sum(len(v) for v in decoded["partition_states"].values()) == ctx.table.state_count


def test_a_state_first_seen_in_a_later_slice_keeps_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_snapshot, "SLICE", 2)
    ctx = ControllerContext(controller_id=1)
    for n, state in enumerate([PartitionState.ONLINE, PartitionState.ONLINE, PartitionState.OFFLINE,
                               PartitionState.ONLINE, PartitionState.NEW]):  # fmt: skip
        ctx.put_partition_state(TopicPartition("orders", n), state)
    decoded = orjson.loads(record_json(ctx))
    assert {k: decoded[k] for k in ("partition_states", "replica_states")} == {
        "partition_states": {
            "OnlinePartition": ["orders-0", "orders-1", "orders-3"],
            "OfflinePartition": ["orders-2"],
            "NewPartition": ["orders-4"],
        },
        "replica_states": {},
    }
    assert list(decoded["partition_states"]) == ["OnlinePartition", "OfflinePartition", "NewPartition"]
