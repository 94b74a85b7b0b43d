"""A controller context field by field, keyed by partition (not by the table's row numbers), so a warm
standby's kept context can be compared with a cold load: rows are numbered in a different order and a
kept context has emptied rows a fresh one never had."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from controller_core.context import ControllerContext
from controller_core.model import TopicPartition
from controller_core.zk.store import ZkStore


def context_fields(ctx: ControllerContext) -> dict[str, Any]:
    """Every field a failover's next steps read, partition-keyed; indexes and gauges included."""
    table = ctx.table
    tps = table.tps

    def rows(column: list[Any]) -> dict[TopicPartition, Any]:
        return {tps[pid]: value for pid, value in enumerate(column) if value is not None}

    def index(by: dict[Any, set[int]]) -> dict[Any, frozenset[TopicPartition]]:
        return {key: frozenset(tps[pid] for pid in members) for key, members in by.items() if members}

    return {
        "brokers": {b.id: b for b in ctx.live_or_shutting_down_brokers()},
        "live_broker_ids": ctx.live_broker_ids,
        "shutting_down": ctx.shutting_down_broker_ids,
        "topics": set(ctx.all_topics),
        "topic_ids": dict(ctx.topic_ids),
        "topic_names": {tid: ctx.topic_name(tid) for tid in ctx.topic_ids.values()},
        "by_topic": {topic: set(members) for topic, members in table.by_topic.items() if members},
        "assignments": dict(ctx.iter_assignments()),
        "assignment_rows": rows(table.assignment),
        "being_reassigned": set(ctx.partitions_being_reassigned),
        "leadership": rows(table.leadership),
        "partition_states": rows(table.state),
        "replica_states": {tp: dict(states) for tp, states in rows(table.replica_states).items()},
        "by_broker": index(table.by_broker),
        "by_leader": index(table.by_leader),
        "by_state": index(dict(table.by_state)),
        "leadership_count": table.leadership_count,
        "state_count": table.state_count,
        "partition_count": ctx.partition_count,
        "offline_partition_count": ctx.offline_partition_count,
        "preferred_replica_imbalance_count": ctx.preferred_replica_imbalance_count,
        "topics_to_be_deleted": set(ctx.topics_to_be_deleted),
    }


def load_brokers_topics_and_assignments(ctx: ControllerContext, store: ZkStore, topics: Collection[str]) -> None:
    """The brokers, topics and assignments of a cold failover's first reads
    (``Controller._load_controller_context``), the assignments read for ``topics`` in their order."""
    ctx.set_live_brokers(store.get_all_broker_registrations().values())
    ctx.set_all_topics(set(store.get_all_topics()))
    for topic, assignment in store.get_replica_assignments(topics).items():
        if assignment.topic_id:
            ctx.add_topic_id(topic, assignment.topic_id)
        by_partition = {TopicPartition(topic, p): a for p, a in assignment.partitions.items()}
        ctx.load_topic_assignment(topic, by_partition)
        ctx.partitions_being_reassigned.update(tp for tp, a in by_partition.items() if a.is_being_reassigned)


def cold_loaded_context(store: ZkStore, controller_id: int = -1) -> ControllerContext:
    """What a cold failover holds after its reads (``Controller._load_controller_context``) and its
    state machines' initializations, before their first transitions: Kafka's rules, written out
    independently of the warm standby's code (the oracle of its property test)."""
    from controller_core.states import PartitionState, ReplicaState

    ctx = ControllerContext(controller_id)
    load_brokers_topics_and_assignments(ctx, store, set(store.get_all_topics()))
    ctx.load_partition_leadership_info(store.get_partition_leadership(ctx.all_partitions()))
    live = ctx.live_broker_ids
    # ReplicaStateMachine.startup, step 1.
    ctx.load_replica_states(
        {
            tp: {r: ReplicaState.ONLINE if r in live else ReplicaState.DELETION_INELIGIBLE for r in a.replicas}
            for tp, a in ctx.iter_assignments()
            if a.replicas
        }
    )
    # PartitionStateMachine.startup's initialization.
    states: dict[TopicPartition, PartitionState] = {}
    for tp, _ in ctx.iter_assignments():
        info = ctx.partition_leadership_info(tp)
        if info is None:
            states[tp] = PartitionState.NEW
        elif info.leader_and_isr.leader in live:
            states[tp] = PartitionState.ONLINE
        else:
            states[tp] = PartitionState.OFFLINE
    ctx.put_partition_states(states)
    return ctx
