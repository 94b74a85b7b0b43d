"""Random clusters over the fake harness, and what a scenario did to one, for the tests that compare two
ways of running the same scenario (results taken in slices or at once, rounds pipelined or not)."""

from __future__ import annotations

import random
from typing import Any

import msgspec

from controller_core.model import TopicPartition
from controller_core.states import PartitionState, ReplicaState
from scripts.support.fakes import Harness, make_harness

BROKERS = (1, 2, 3, 4, 5)


def random_cluster(seed: int, partitions: int, topics: int, in_sync: float) -> Harness:
    """``partitions`` over ``topics`` topics and the five ``BROKERS``, random replica lists (RF 3) and
    ISRs (each replica in sync with probability ``in_sync``), every partition and replica Online, and
    decisions on the cache, as the controller runs."""
    rng = random.Random(seed)
    h = make_harness(brokers=BROKERS, decide_from_cache=True)
    for i in range(partitions):
        tp = TopicPartition(f"t{i % topics}", i)
        replicas = rng.sample(BROKERS, 3)
        isr = [r for r in replicas if rng.random() < in_sync] or replicas[:1]
        h.seed_partition(
            tp,
            replicas,
            leader=isr[0],
            isr=isr,
            leader_epoch=rng.randrange(20),
            partition_state=PartitionState.ONLINE,
            replica_state=ReplicaState.ONLINE,
        )
    return h


def what_happened(h: Harness) -> tuple[list[Any], list[Any], dict[TopicPartition, Any], dict[str, Any]]:
    """The requests sent (as their wire JSON, in order), the records (the log flushed first), the cache
    and the partition states."""
    sent = [(s.broker_id, msgspec.json.encode(s.request)) for s in h.transport.sent]
    h.log.flush()
    records = list(h.sink.records)
    ctx = h.ctx
    cache = {tp: ctx.partition_leadership_info(tp) for tp in ctx.all_partitions()}
    states = {str(tp): ctx.partition_state(tp) for tp in ctx.all_partitions()}
    return sent, records, cache, states
