"""``controlled_shutdown.partitions_to_move`` picks, by the table's indexes, what Kafka's per-partition rule picks.

Kafka's ``doControlledShutdown`` acts on the partitions with a replica on the broker, more than one
replica and a leadership, of topics not queued for deletion: those the broker leads move their leader,
the others drop it from their ISR. The function splits them by the table's replica and leader indexes;
this checks it against that rule, partition by partition, on a context with every exception in it.
"""

from __future__ import annotations

import pytest

from controller_core.context import ControllerContext
from controller_core.controlled_shutdown import partitions_to_move
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition

pytestmark = pytest.mark.unit


def _context() -> ControllerContext:
    ctx = ControllerContext(controller_id=9)
    ctx.add_topics(["a", "b", "doomed", "single"])
    for i in range(60):
        topic = ("a", "b", "doomed")[i % 3]
        replicas = [(i + k) % 5 + 1 for k in range(3)]
        tp = TopicPartition(topic, i)
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas))
        if i % 7 == 6:
            continue  # no leadership cached
        leader = 9 if i % 11 == 10 else replicas[i % 2]  # now and then a leader outside the replicas
        ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 1, tuple(replicas)), 1))
    for i in range(5):
        tp = TopicPartition("single", i)
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of([i + 1]))
        ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(i + 1, 1, (i + 1,)), 1))
    # A leader moving away and back keeps the leader index in step with the leadership column.
    moved = TopicPartition("a", 0)
    info = ctx.partition_leadership_info(moved)
    assert info is not None
    for leader in (4, info.leader_and_isr.leader):
        ctx.put_partition_leadership_info(moved, LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 2, (1, 2, 3)), 1))
    return ctx


def _kafka_rule(ctx: ControllerContext, broker_id: int) -> tuple[list[int], list[int]]:
    led: list[int] = []
    followed: list[int] = []
    for pid in sorted(ctx.partition_ids_on_broker(broker_id)):
        info = ctx.table.leadership[pid]
        assignment = ctx.table.assignment[pid]
        if info is None or assignment is None or len(assignment.replicas) <= 1:
            continue
        if ctx.table.tps[pid].topic in ctx.topics_to_be_deleted:
            continue
        (led if info.leader_and_isr.leader == broker_id else followed).append(pid)
    return led, followed


@pytest.mark.parametrize("deleting", [False, True])
@pytest.mark.parametrize("broker_id", [1, 2, 3, 4, 5, 9])
def test_the_partitions_a_shutdown_moves_are_kafkas(broker_id: int, deleting: bool) -> None:
    ctx = _context()
    if deleting:
        ctx.queue_topic_deletion(["doomed"])
    led, followed = partitions_to_move(ctx, broker_id)
    assert (led, followed) == _kafka_rule(ctx, broker_id)
    if broker_id != 9:
        assert led and followed  # the context exercises both sides
