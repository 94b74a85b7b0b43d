"""A controlled shutdown's moves (Kafka's ``doControlledShutdown`` after its checks, reference §8.4).

Apart from ``controller.Controller``, which checks the request (active controller, broker epoch,
registration) and answers it, so that the moves themselves, which bound ``controlled_shutdown_s``,
run the same in the controller and in ``scripts/bench_elections.py``'s controlled-shutdown step.
"""

from __future__ import annotations

from collections.abc import Callable

from controller_core.context import ControllerContext
from controller_core.election import ControlledShutdownStrategy
from controller_core.partition_state_machine import PartitionStateMachine
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.states import PartitionState, ReplicaState


def partitions_to_move(ctx: ControllerContext, broker_id: int) -> tuple[list[int], list[int]]:
    """The partitions (numbers, ascending) with a replica on ``broker_id`` that the shutdown acts on:
    those it leads, whose leaders move, and those it follows, whose ISR it leaves. Partitions with
    one replica (nowhere to move) and of topics being deleted are left alone, as in Kafka."""
    deleting = ctx.topics_to_be_deleted
    table = ctx.table
    leadership, assignments, tps = table.leadership, table.assignment, table.tps
    led: list[int] = []
    followed: list[int] = []
    for pid in sorted(ctx.partition_ids_on_broker(broker_id)):
        info = leadership[pid]
        assignment = assignments[pid]
        if info is None or assignment is None or len(assignment.replicas) <= 1:
            continue
        if deleting and tps[pid].topic in deleting:
            continue
        (led if info.leader_and_isr.leader == broker_id else followed).append(pid)
    return led, followed


def move_off_broker(
    ctx: ControllerContext,
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    batch: ControllerBrokerRequestBatch,
    send_held: Callable[[], None],
    broker_id: int,
) -> None:
    """Move leadership off ``broker_id`` and take it out of the ISRs it is in (the broker is already
    marked shutting down): elect its partitions' new leaders (``ControlledShutdownStrategy``) and
    hand their LeaderAndIsr over (``send_held``) before anything else, then StopReplica (keep the
    log) for the partitions it follows and those replicas to Offline, which shrinks their ISRs.

    The requests go out in that order, and the state machines record, cache and request in that order,
    as in Kafka; only ZooKeeper's writes overlap: the ISR removals of the followed partitions (none of
    them led, so the leader moves change nothing they are decided from) are decided on the cache first
    and carried behind the leader moves in one stream of pipelined fenced multis (``TrailingWrites``),
    so ZooKeeper applies them while the event thread takes the leader moves' results, sends their
    LeaderAndIsr and the StopReplica, instead of waiting for that between two rounds. Every write stays
    conditional on its znode's version and fenced by the epoch; a conflict is re-read and retried by
    its own machine, a fence raises where its outcome is taken."""
    led, followed = partitions_to_move(ctx, broker_id)
    with (
        replica_sm.offline_planned(broker_id, followed if led else []) as shrinks,
        partition_sm.carrying(shrinks),
    ):
        if led:
            partition_sm.handle_partition_ids(led, PartitionState.ONLINE, ControlledShutdownStrategy())
            send_held()  # the new leaders take over before the ISR shrinks below
        if followed:
            batch.new_batch()
            batch.add_stop_replica_requests_by_id(broker_id, followed, delete_partition=False)
            batch.send_requests_to_brokers(ctx.epoch)
            replica_sm.handle_replica_ids(broker_id, followed, ReplicaState.OFFLINE)
