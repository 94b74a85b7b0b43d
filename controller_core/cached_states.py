"""The first attempt of a bulk state change reads partition states from the controller's cache.

Kafka's controller reads every state znode before an election or an ISR shrink, and then writes it
back conditionally on the version it read. The conditional write is what makes the change safe: a
state changed behind the controller's back (a broker writing its ISR in the pre-AlterIsr protocol,
another controller) fails with BADVERSION and the partition is retried. The controller's cache holds
the version of its own last write or read, so the same conditional write can be made straight from
the cache; only the partitions that then conflict are read from ZooKeeper and retried. When the
cache is current (the usual case: this controller is the only writer) that halves the ZooKeeper
work of a broker failure, a controlled shutdown or a preferred election. The decision and the write
are never made on anything weaker than Kafka's read-then-compare-and-set.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller_core.context import ControllerContext
from controller_core.model import TopicPartition
from controller_core.ports import PartitionStateRead, PartitionStateStore, ZkCode


def current_partition_states(
    ctx: ControllerContext, store: PartitionStateStore, partitions: Sequence[TopicPartition], from_cache: bool
) -> dict[TopicPartition, PartitionStateRead]:
    """The state of each partition to decide on: the cache's when ``from_cache`` and known, else ZooKeeper's."""
    if not from_cache:
        return store.get_partition_states(partitions)
    cached = ctx.partition_leadership_info
    out: dict[TopicPartition, PartitionStateRead] = {}
    missing: list[TopicPartition] = []
    ok = ZkCode.OK
    for tp in partitions:
        info = cached(tp)
        if info is None:
            missing.append(tp)
        else:
            out[tp] = PartitionStateRead(ok, info)
    if missing:
        out.update(store.get_partition_states(missing))
    return out
