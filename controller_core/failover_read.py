"""A cold failover's read of the partition states, with the start-up's per-partition work done as each
batch lands.

Why: at a million partitions the state znodes take ~4.4 s to read, and the event thread waits for
ZooKeeper for part of it (200,000 partitions, ``scripts/bench_context.py --zookeeper``: 0.44 s of
its CPU in 0.75 s of wall); the two state machines' start-ups then spent another ~2.5 s of pure
event-thread CPU over every partition. What those start-ups derive for a partition (its initial
partition and replica states, and the LeaderAndIsr and UpdateMetadata states the replica state
machine's start-up sends) depends only on its assignment, its leadership and the live brokers, all
known once its state znode is read (reference/kafka-controller.md, "replica state machine start-up").
So each batch's are built while ZooKeeper answers the next reads, by the code that keeps them on a
warm standby (``standby.warm_context.derive_initial_states``, ``standby.kept_requests``), and after
the read the failover goes on as a warm takeover does (``start_replica_state_machine``,
``start_partition_state_machine``).

What does not move: nothing is sent before every state znode is read (the requests are only
built); what the failover decides after the read (topics queued for deletion, shutting-down
brokers) is applied at the send, as for a warm takeover (``ControllerBrokerRequestBatch.add_kept``);
the requests are the bytes ``ReplicaStateMachine.startup`` sends on the same context (the order of
the context, group by group: ``KeptRequests``). If the live brokers changed after the read, or log
directories failed (never on the event thread within one failover), the start-ups derive everything
again as before (``ColdStartUp.still_valid``).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller_core.context import ControllerContext
from controller_core.model import TopicPartition
from controller_core.standby.kept_requests import KeptRequests
from controller_core.standby.warm_context import derive_initial_states
from controller_core.zk.store import ZkStore


@dataclass(slots=True)
class ColdStartUp:
    """The start-ups' work done during a cold read: the kept requests of every partition read, built
    against ``live`` (the initial states are in the context)."""

    kept: KeptRequests
    live: frozenset[int]

    def still_valid(self, ctx: ControllerContext) -> bool:
        """The context still derives what was built: the same live brokers, no failed log directory."""
        return ctx.live_broker_ids is self.live and not ctx.has_replicas_on_offline_dirs


def read_partition_states(ctx: ControllerContext, store: ZkStore) -> ColdStartUp | None:
    """Read the state znode of every assigned partition of ``ctx`` into its leadership column (missing
    or unreadable ones stay without), and, for each batch as it lands, its partitions' initial states
    and start-up request states. Returns them; None when nothing was built (replicas on failed log
    directories: their online replicas are per partition, so the start-ups derive them)."""
    kept = None if ctx.has_replicas_on_offline_dirs else KeptRequests(ctx)
    live = ctx.live_broker_ids
    # Every assigned partition and its number (loaded with the assignments), in the context's order,
    # gathered a topic at a time in C: each batch read is a consecutive slice of both, so its numbers
    # are a slice too (no lookup per partition, no dict of a million to drop repeats there are none of).
    tps: list[TopicPartition] = []
    numbers: list[int] = []
    for members in ctx.table.by_topic.values():
        tps += members.keys()
        numbers += members.values()
    start = 0
    for batch, states, complete in store.iter_partition_leadership(tps, distinct=True):
        ids = numbers[start : start + len(batch)]
        start += len(batch)
        if complete:
            ctx.put_leadership_by_id(zip(ids, states, strict=True))  # type: ignore[arg-type]  # complete: no None
        else:
            ctx.put_leadership_by_id(
                [(pid, state) for pid, state in zip(ids, states, strict=True) if state is not None]
            )
        if kept is not None:
            derive_initial_states(ctx, ids)
            kept.add_loaded(ids)  # read in the context's order: each batch is last so far
    return None if kept is None else ColdStartUp(kept, live)
