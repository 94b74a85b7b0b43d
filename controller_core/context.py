"""The active controller's in-memory view of the cluster (Kafka's ``ControllerContext``, reference §2.3).

ZooKeeper is the truth; this is a cache plus the state machines' states, kept for one controller
epoch and cleared on resignation. It does no I/O.

Scale drives the layout: the target is a million partitions (replication factor 3) in well under
1.5 GB, and a broker failure at 100,000 partitions touches 10,000 of them some 26 times each. So
per-partition data lives in the columns of a ``PartitionTable`` indexed by a partition number given
once per partition (``controller_core.partition_table``): the state machines turn an event's
partitions into numbers once and then index lists instead of hashing a tuple per touch. The values
are the immutable model types, and the table keeps *one* key object per partition, which every query
that returns partitions hands out.

Three indexes (sets of partition numbers) are maintained incrementally because the questions they
answer are asked on every broker event and a scan of a million partitions per event is too slow:

* partitions per broker (from assignments) for ``partitions_on_broker`` / ``replicas_on_brokers``;
* partitions per leader (from leadership info) for ``partition_leaders_on_broker`` and
  ``partitions_with_offline_leader``;
* partitions per non-online partition state, for ``partitions_in_states({New, Offline})``, which
  every broker change asks. Online partitions are the bulk and are not indexed.

The TopicPartition-keyed methods are the interface of everything outside the state machines
(deletion, reassignment, failover, the standby's hand-over); the ``*_id*`` methods are the bulk paths.

The two gauges ``offline_partition_count`` and ``preferred_replica_imbalance_count`` are maintained
exactly as §2.3 describes (including its quirks), never recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import TypeVar

from controller_core.errors import IllegalStateError
from controller_core.model import (
    EMPTY_ASSIGNMENT,
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
    BrokerRegistration,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.partition_table import PartitionTable
from controller_core.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
)

_EMPTY_IDS: frozenset[int] = frozenset()


def _imbalance(assignment: ReplicaAssignment | None, info: LeaderIsrAndControllerEpoch | None) -> int:
    """Return 1 if the partition counts towards the preferred-replica imbalance gauge, else 0.

    A partition is imbalanced when it has leadership info and does not "have its preferred
    leader". While a reassignment is *adding* the preferred replica, Kafka's literal rule counts
    the partition as imbalanced exactly when that replica is already in the ISR (§2.3). A partition
    with no assignment has no preferred replica and never counts.
    """
    if assignment is None or info is None or not assignment.replicas:
        return 0
    preferred = assignment.replicas[0]
    leader_and_isr = info.leader_and_isr
    if assignment.adding_replicas and preferred in assignment.adding_replicas:
        return 1 if preferred in leader_and_isr.isr else 0
    return 0 if leader_and_isr.leader == preferred else 1


_V = TypeVar("_V")


def _leadership_count(table: PartitionTable) -> int:
    return table.leadership_count


def _state_count(table: PartitionTable) -> int:
    return table.state_count


class _ColumnView(Mapping[TopicPartition, _V]):
    """One column of the partition table as a read-only mapping keyed by partition (rows without a
    value are absent): what the context's callers outside the state machines read."""

    __slots__ = ("_column", "_count", "_table")

    def __init__(self, table: PartitionTable, column: list[_V | None], count: Callable[[PartitionTable], int]) -> None:
        self._table = table
        self._column = column
        self._count = count

    def __getitem__(self, tp: TopicPartition) -> _V:
        pid = self._table.ids.get(tp)
        value = None if pid is None else self._column[pid]
        if value is None:
            raise KeyError(tp)
        return value

    def __iter__(self) -> Iterator[TopicPartition]:
        tps = self._table.tps
        return (tps[pid] for pid, value in enumerate(self._column) if value is not None)

    def __len__(self) -> int:
        return self._count(self._table)


class ControllerContext:
    """Mutated only on the controller event thread.

    Holds the controller's identity and fencing token (``controller_id``, ``epoch``,
    ``epoch_zk_version``), the registered brokers, topics and assignments, the leadership cache,
    the replica and partition states, and the topic-deletion bookkeeping. Read-only views returned
    by properties must not be mutated; methods that return collections return copies so callers
    may change the context while iterating over them.

    Example::

        ctx = ControllerContext(controller_id=1)
        ctx.set_live_brokers([BrokerRegistration(1, (EndPoint.parse("PLAINTEXT://h1:9092"),), epoch=10)])
        ctx.update_partition_full_replica_assignment(TopicPartition("orders", 0), ReplicaAssignment.of([1, 2]))
    """

    def __init__(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self._reset_state()

    # -- lifecycle ---------------------------------------------------------------------------

    def _reset_state(self) -> None:
        self.epoch: int = INITIAL_CONTROLLER_EPOCH
        self.epoch_zk_version: int = INITIAL_CONTROLLER_EPOCH_ZK_VERSION

        self._brokers: dict[int, BrokerRegistration] = {}
        self._shutting_down: set[int] = set()
        # Recomputed on every membership change: elections ask "is b live?" per partition.
        self._live_ids: frozenset[int] = _EMPTY_IDS
        self._live_or_shutting_down_ids: frozenset[int] = _EMPTY_IDS
        self._offline_dirs: dict[int, frozenset[TopicPartition]] = {}

        self._all_topics: set[str] = set()
        self._topic_ids: dict[str, str] = {}
        self._topic_names: dict[str, str] = {}
        self.table = PartitionTable()
        """Per-partition columns and their indexes (``controller_core.partition_table``): the state machines
        work on partition numbers over it; everything else goes through the methods below."""
        self.partitions_being_reassigned: set[TopicPartition] = set()

        self._topics_to_be_deleted: set[str] = set()
        self._topics_with_deletion_started: set[str] = set()
        self._topics_ineligible_for_deletion: set[str] = set()

        self._offline_partition_count = 0
        self._preferred_replica_imbalance_count = 0

    def reset(self) -> None:
        """Forget everything (resignation): epoch and fencing version go back to 0."""
        self._reset_state()

    # -- brokers -----------------------------------------------------------------------------

    def _refresh_broker_ids(self) -> None:
        registered = frozenset(self._brokers)
        self._live_or_shutting_down_ids = registered
        self._live_ids = registered - self._shutting_down if self._shutting_down else registered

    def set_live_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        """Replace the registered brokers (failover). Shutting-down ids are kept."""
        self._brokers = {b.id: b for b in brokers}
        self._refresh_broker_ids()

    def add_live_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        for broker in brokers:
            self._brokers[broker.id] = broker
        self._refresh_broker_ids()

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._brokers.pop(broker_id, None)
        self._refresh_broker_ids()

    def update_broker_metadata(self, broker: BrokerRegistration) -> None:
        """Replace a registered broker's endpoints/features (BrokerModifications)."""
        if broker.id in self._brokers:
            self._brokers[broker.id] = broker

    @property
    def live_broker_ids(self) -> frozenset[int]:
        """Registered brokers that are not in controlled shutdown: the ones that may lead."""
        return self._live_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> frozenset[int]:
        """Every registered broker: the ones that receive requests."""
        return self._live_or_shutting_down_ids

    def live_or_shutting_down_brokers(self) -> list[BrokerRegistration]:
        return list(self._brokers.values())

    def live_or_shutting_down_broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def broker_epoch(self, broker_id: int) -> int | None:
        """The cached broker epoch (czxid of its registration), ``None`` if not registered."""
        broker = self._brokers.get(broker_id)
        return None if broker is None else broker.epoch

    def live_broker_id_and_epochs(self) -> dict[int, int]:
        return {broker_id: broker.epoch for broker_id, broker in self._brokers.items()}

    @property
    def shutting_down_broker_ids(self) -> frozenset[int]:
        return frozenset(self._shutting_down)

    def add_shutting_down_broker(self, broker_id: int) -> None:
        self._shutting_down.add(broker_id)
        self._refresh_broker_ids()

    def remove_shutting_down_brokers(self, broker_ids: Iterable[int]) -> None:
        self._shutting_down.difference_update(broker_ids)
        self._refresh_broker_ids()

    # -- offline log directories -------------------------------------------------------------

    def replicas_on_offline_dirs(self, broker_id: int) -> frozenset[TopicPartition]:
        return self._offline_dirs.get(broker_id, frozenset())

    def set_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        """Record the partitions a broker reported as KAFKA_STORAGE_ERROR (empty clears)."""
        offline = frozenset(partitions)
        if offline:
            self._offline_dirs[broker_id] = offline
        else:
            self._offline_dirs.pop(broker_id, None)

    def clear_replicas_on_offline_dirs(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._offline_dirs.pop(broker_id, None)

    @property
    def has_replicas_on_offline_dirs(self) -> bool:
        """True when some broker reported failed log directories (replica online-ness is then per partition)."""
        return bool(self._offline_dirs)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        ids = self._live_or_shutting_down_ids if include_shutting_down else self._live_ids
        if broker_id not in ids:
            return False
        offline = self._offline_dirs.get(broker_id)
        return offline is None or tp not in offline

    def online_replica_set(self, tp: TopicPartition, include_shutting_down: bool = False) -> AbstractSet[int]:
        """The broker ids whose replica of ``tp`` would be online, as one set for fast tests.

        Usually the shared live-id set itself (no allocation); only brokers with failed log dirs
        holding ``tp`` make it a per-partition set.
        """
        base = self._live_or_shutting_down_ids if include_shutting_down else self._live_ids
        if not self._offline_dirs:
            return base
        excluded = [b for b, offline in self._offline_dirs.items() if tp in offline]
        return base.difference(excluded) if excluded else base

    # -- topics ------------------------------------------------------------------------------

    @property
    def all_topics(self) -> AbstractSet[str]:
        return self._all_topics

    def set_all_topics(self, topics: Iterable[str]) -> None:
        self._all_topics = set(topics)

    def add_topics(self, topics: Iterable[str]) -> None:
        self._all_topics.update(topics)

    def add_topic_id(self, topic: str, topic_id: str) -> None:
        """Record a topic's id; a conflicting or orphan id is an invariant breach (§2.3)."""
        if topic not in self._all_topics:
            raise IllegalStateError(f"cannot add topic id {topic_id} of unknown topic {topic}")
        existing_id = self._topic_ids.get(topic)
        if existing_id is not None and existing_id != topic_id:
            raise IllegalStateError(f"topic {topic} already has id {existing_id}, not {topic_id}")
        existing_name = self._topic_names.get(topic_id)
        if existing_name is not None and existing_name != topic:
            raise IllegalStateError(f"topic id {topic_id} already belongs to {existing_name}, not {topic}")
        self._topic_ids[topic] = topic_id
        self._topic_names[topic_id] = topic

    def topic_id(self, topic: str) -> str | None:
        return self._topic_ids.get(topic)

    def topic_name(self, topic_id: str) -> str | None:
        return self._topic_names.get(topic_id)

    @property
    def topic_ids(self) -> Mapping[str, str]:
        return self._topic_ids

    def remove_topic(self, topic: str) -> None:
        """Forget a topic entirely, except its partition states (they stay NonExistent, §15.15)."""
        if topic not in self._topics_to_be_deleted:
            # Queued topics were already subtracted when they were queued.
            self._subtract_topic_imbalance(topic)
        self._topics_to_be_deleted.discard(topic)
        self._topics_with_deletion_started.discard(topic)
        self._topics_ineligible_for_deletion.discard(topic)
        self._all_topics.discard(topic)
        topic_id = self._topic_ids.pop(topic, None)
        if topic_id is not None:
            self._topic_names.pop(topic_id, None)
        table = self.table
        members = table.by_topic.pop(topic, None)
        if not members:
            return
        for tp, pid in members.items():
            assignment = table.assignment[pid]
            table.assignment[pid] = None
            if assignment is not None:
                for broker_id in assignment.replicas:
                    table.unindex(table.by_broker, broker_id, pid)
            info = table.leadership[pid]
            if info is not None:
                table.leadership[pid] = None
                table.leadership_count -= 1
                table.unindex(table.by_leader, info.leader_and_isr.leader, pid)
            self.partitions_being_reassigned.discard(tp)

    # -- partition numbers ---------------------------------------------------------------------

    def partition_ids(self, partitions: Iterable[TopicPartition]) -> list[int]:
        """Each partition's number in ``table`` (unknown partitions get an empty row), in order.

        The state machines turn an event's partitions into numbers once and work on the columns.
        """
        return self.table.ids_of(partitions)

    def partitions_of(self, ids: Iterable[int]) -> list[TopicPartition]:
        tps = self.table.tps
        return [tps[pid] for pid in ids]

    # -- assignments -------------------------------------------------------------------------

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        table = self.table
        pid = table.id_of(tp)
        members = table.by_topic.get(tp.topic)
        if members is None:
            members = table.by_topic[tp.topic] = {}
        members[tp] = pid
        previous = table.assignment[pid]
        table.assignment[pid] = assignment
        if previous is None:
            for broker_id in assignment.replicas:
                table.index(table.by_broker, broker_id, pid)
        elif previous.replicas != assignment.replicas:
            old, new = set(previous.replicas), set(assignment.replicas)
            for broker_id in old - new:
                table.unindex(table.by_broker, broker_id, pid)
            for broker_id in new - old:
                table.index(table.by_broker, broker_id, pid)
        if tp.topic not in self._topics_to_be_deleted:
            info = table.leadership[pid]
            if info is not None:
                self._preferred_replica_imbalance_count += _imbalance(assignment, info) - _imbalance(previous, info)

    def load_topic_assignment(self, topic: str, assignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        """``update_partition_full_replica_assignment`` for a whole topic; one pass when the topic is new
        to the context and nothing is cached about it (failover loads 2,000 topics this way)."""
        if not assignments:
            return
        table = self.table
        ids = table.ids
        if topic not in table.by_topic and ids.keys().isdisjoint(assignments):
            self._load_new_topic_assignment(topic, assignments)
            return
        leadership = table.leadership
        if topic in table.by_topic or any(
            (pid := ids.get(tp)) is not None and leadership[pid] is not None for tp in assignments
        ):
            for tp, assignment in assignments.items():
                self.update_partition_full_replica_assignment(tp, assignment)
            return
        tps = list(assignments)
        new = [tp for tp in tps if tp not in ids]
        if new:
            table.add_rows(new)
        members = table.by_topic[topic] = {tp: ids[tp] for tp in tps}
        column = table.assignment
        by_broker = table.by_broker
        for pid, assignment in zip(members.values(), assignments.values(), strict=True):
            column[pid] = assignment
            for broker_id in assignment.replicas:
                partitions = by_broker.get(broker_id)
                if partitions is None:
                    by_broker[broker_id] = {pid}
                else:
                    partitions.add(pid)

    def _load_new_topic_assignment(self, topic: str, assignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        """``load_topic_assignment`` of a topic none of whose partitions has a row yet (a failover's
        20,000 topics at a million partitions): new rows in one block, the assignment column written
        as a slice, and the broker index updated once per distinct replica list of the topic (a few)
        instead of once per replica."""
        table = self.table
        tps = list(assignments)
        numbers = table.add_rows(tps)
        table.by_topic[topic] = dict(zip(tps, numbers, strict=True))
        values = list(assignments.values())
        table.assignment[numbers.start : numbers.stop] = values
        by_replicas: dict[tuple[int, ...], list[int]] = {}
        for pid, assignment in zip(numbers, values, strict=True):
            replicas = assignment.replicas
            group = by_replicas.get(replicas)
            if group is None:
                by_replicas[replicas] = [pid]
            else:
                group.append(pid)
        by_broker = table.by_broker
        for replicas, pids in by_replicas.items():
            for broker_id in replicas:
                partitions = by_broker.get(broker_id)
                if partitions is None:
                    by_broker[broker_id] = set(pids)
                else:
                    partitions.update(pids)

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """The partition's assignment, or the empty assignment if it is unknown."""
        pid = self.table.ids.get(tp)
        if pid is None:
            return EMPTY_ASSIGNMENT
        return self.table.assignment[pid] or EMPTY_ASSIGNMENT

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partition_full_replica_assignment_for_topic(self, topic: str) -> dict[TopicPartition, ReplicaAssignment]:
        column = self.table.assignment
        return {tp: column[pid] or EMPTY_ASSIGNMENT for tp, pid in self.table.by_topic.get(topic, {}).items()}

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return list(self.table.by_topic.get(topic, ()))

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for members in self.table.by_topic.values() for tp in members]

    def iter_assignments(self) -> Iterator[tuple[TopicPartition, ReplicaAssignment]]:
        """Every (partition, assignment); do not change assignments while iterating."""
        for tp, pid in self.iter_assigned_ids():
            yield tp, self.table.assignment[pid] or EMPTY_ASSIGNMENT

    def iter_assigned_ids(self) -> Iterator[tuple[TopicPartition, int]]:
        """Every assigned (partition, number), topic by topic; do not change assignments while iterating."""
        for members in self.table.by_topic.values():
            yield from members.items()

    @property
    def partition_count(self) -> int:
        return sum(len(members) for members in self.table.by_topic.values())

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Partitions with a replica assigned to ``broker_id`` (a copy; cost is per replica on it)."""
        tps = self.table.tps
        return {tps[pid] for pid in self.table.by_broker.get(broker_id, ())}

    def partition_ids_on_broker(self, broker_id: int) -> list[int]:
        """The numbers of ``partitions_on_broker`` (a copy)."""
        return list(self.table.by_broker.get(broker_id, ()))

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionAndReplica]:
        tps = self.table.tps
        by_broker = self.table.by_broker
        return {
            PartitionAndReplica(tps[pid], broker_id)
            for broker_id in set(broker_ids)
            for pid in by_broker.get(broker_id, ())
        }

    def replicas_for_topic(self, topic: str) -> set[PartitionAndReplica]:
        column = self.table.assignment
        return {
            PartitionAndReplica(tp, replica)
            for tp, pid in self.table.by_topic.get(topic, {}).items()
            for replica in (column[pid] or EMPTY_ASSIGNMENT).replicas
        }

    def replicas_for_partition(self, partitions: Iterable[TopicPartition]) -> set[PartitionAndReplica]:
        return {
            PartitionAndReplica(tp, replica)
            for tp in partitions
            for replica in self.partition_full_replica_assignment(tp).replicas
        }

    def all_live_replicas(self) -> set[PartitionAndReplica]:
        tps = self.table.tps
        by_broker = self.table.by_broker
        return {
            PartitionAndReplica(tps[pid], broker_id)
            for broker_id in self._live_ids
            for pid in by_broker.get(broker_id, ())
            if self.is_replica_online(broker_id, tps[pid])
        }

    def online_and_offline_replicas(self) -> tuple[set[PartitionAndReplica], set[PartitionAndReplica]]:
        """Split every assigned replica by ``is_replica_online`` (controller failover)."""
        online: set[PartitionAndReplica] = set()
        offline: set[PartitionAndReplica] = set()
        for tp, assignment in self.iter_assignments():
            online_set = self.online_replica_set(tp)
            for replica in assignment.replicas:
                (online if replica in online_set else offline).add(PartitionAndReplica(tp, replica))
        return online, offline

    # -- leadership cache --------------------------------------------------------------------

    def put_partition_leadership_info(self, tp: TopicPartition, info: LeaderIsrAndControllerEpoch) -> None:
        self.put_leadership_by_id([(self.table.id_of(tp), info)])

    def put_partition_leadership_infos(
        self, infos: Iterable[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]
    ) -> None:
        """``put_partition_leadership_info`` for many partitions in one pass (an election batch's results)."""
        id_of = self.table.id_of
        self.put_leadership_by_id([(id_of(tp), info) for tp, info in infos])

    def put_leadership_by_id(self, infos: Iterable[tuple[int, LeaderIsrAndControllerEpoch]]) -> None:
        """Cache each (partition number, leadership) in one pass: the leader index and the imbalance
        gauge follow. An election batch's results (10,000 in a broker failure) come this way."""
        table = self.table
        leadership = table.leadership
        assignments = table.assignment
        tps = table.tps
        by_leader = table.by_leader
        deleting = self._topics_to_be_deleted
        imbalance = 0
        added = 0
        for pid, info in infos:
            previous = leadership[pid]
            leadership[pid] = info
            new_leader = info.leader_and_isr.leader
            moved = True
            if previous is None:
                added += 1
            else:
                old_leader = previous.leader_and_isr.leader
                if old_leader == new_leader:
                    moved = False
                else:
                    led = by_leader.get(old_leader)
                    if led is not None:
                        led.discard(pid)
                        if not led:
                            del by_leader[old_leader]
            if moved:
                led = by_leader.get(new_leader)
                if led is None:
                    by_leader[new_leader] = {pid}
                else:
                    led.add(pid)
            if not deleting or tps[pid].topic not in deleting:
                assignment = assignments[pid]
                if assignment is not None and assignment.replicas and not assignment.adding_replicas:
                    # ``_imbalance`` of the usual partition (not adding replicas), inlined: per partition.
                    preferred = assignment.replicas[0]
                    imbalance += (new_leader != preferred) - (
                        previous is not None and previous.leader_and_isr.leader != preferred
                    )
                else:
                    imbalance += _imbalance(assignment, info) - _imbalance(assignment, previous)
        table.leadership_count += added
        self._preferred_replica_imbalance_count += imbalance

    def load_partition_leadership_info(self, infos: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        """``put_partition_leadership_info`` for many partitions (failover: every partition, into an empty cache)."""
        ids = self.table.ids
        get, id_of = ids.get, self.table.id_of
        # The partitions have their numbers already (their assignments were loaded first): one dict
        # lookup each, the method call only for the rare one that does not. A generator, not a list:
        # a million (number, state) pairs held ~70 MB at the top of a cold failover's read.
        self.put_leadership_by_id((pid if (pid := get(tp)) is not None else id_of(tp), s) for tp, s in infos.items())

    def partition_leadership_info(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        pid = self.table.ids.get(tp)
        return None if pid is None else self.table.leadership[pid]

    @property
    def partitions_leadership_info(self) -> Mapping[TopicPartition, LeaderIsrAndControllerEpoch]:
        """A read-only view of the leadership column keyed by partition."""
        return _ColumnView(self.table, self.table.leadership, _leadership_count)

    @property
    def partition_with_leaders_count(self) -> int:
        """Kafka's GlobalPartitionCount: partitions with leadership info."""
        return self.table.leadership_count

    def clear_partition_leadership_info(self) -> None:
        """Drop the whole cache (failover re-reads it). The imbalance gauge restarts from zero."""
        table = self.table
        table.leadership = [None] * len(table.tps)
        table.leadership_count = 0
        table.by_leader.clear()
        self._preferred_replica_imbalance_count = 0

    def partitions_with_leaders(self) -> set[TopicPartition]:
        """Partitions with leadership info, excluding topics queued for deletion."""
        queued = self._topics_to_be_deleted
        tps = self.table.tps
        return {
            tps[pid]
            for pid, info in enumerate(self.table.leadership)
            if info is not None and (not queued or tps[pid].topic not in queued)
        }

    def partitions_with_offline_leader(self) -> set[TopicPartition]:
        """Cached partitions whose leader is not online (-1 included), except topics being deleted."""
        return set(self.partitions_of(self.partition_ids_with_offline_leader()))

    def partition_ids_with_offline_leader(self) -> list[int]:
        """The numbers of ``partitions_with_offline_leader``, in number order.

        Answered from the leader index: all partitions led by non-live ids, plus those led by live
        brokers from a failed log directory.
        """
        table = self.table
        tps = table.tps
        result: set[int] = set()
        for leader, led in table.by_leader.items():
            if leader not in self._live_ids:
                result.update(led)
            else:
                offline = self._offline_dirs.get(leader)
                if offline:
                    result.update(pid for pid in led if tps[pid] in offline)
        queued = self._topics_to_be_deleted
        if queued and result:
            return sorted([pid for pid in result if tps[pid].topic not in queued])
        return sorted(result)

    def partition_leaders_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Partitions led by ``broker_id`` with replication factor > 1, topic not queued for deletion."""
        queued = self._topics_to_be_deleted
        table = self.table
        tps, assignment = table.tps, table.assignment
        return {
            tps[pid]
            for pid in table.by_leader.get(broker_id, ())
            if tps[pid].topic not in queued and len((assignment[pid] or EMPTY_ASSIGNMENT).replicas) > 1
        }

    # -- partition states --------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        pid = self.table.ids.get(tp)
        return None if pid is None else self.table.state[pid]

    @property
    def partition_states(self) -> Mapping[TopicPartition, PartitionState]:
        """A read-only view of the partition-state column keyed by partition."""
        return _ColumnView(self.table, self.table.state, _state_count)

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        """Set a partition's state and keep the offline gauge and the state index right."""
        self.move_partition_ids_to_state([self.table.id_of(tp)], state)

    def put_partition_states(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """``put_partition_state`` for many partitions (failover: every partition)."""
        by_target: dict[PartitionState, list[int]] = {}
        id_of = self.table.id_of
        for tp, state in states.items():
            by_target.setdefault(state, []).append(id_of(tp))
        for state, ids in by_target.items():
            self.move_partition_ids_to_state(ids, state)

    def move_partitions_to_state(
        self, partitions: Iterable[TopicPartition], state: PartitionState
    ) -> list[PartitionState | None]:
        """``put_partition_state(tp, state)`` for each partition in one pass; returns the state each had
        before (None: none), in order."""
        return self.move_partition_ids_to_state(self.table.ids_of(partitions), state)

    def move_partition_ids_to_state(self, ids: Iterable[int], state: PartitionState) -> list[PartitionState | None]:
        """Set the state of each partition number in one pass, keeping the offline gauge and the state
        index right; returns the state each had before (None: none), in order. A broker failure moves
        10,000 partitions to Offline, then back."""
        table = self.table
        states = table.state
        tps = table.tps
        by_state = table.by_state
        started = self._topics_with_deletion_started
        online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
        entered = None if state is online else by_state[state]
        offline_delta = 0
        added = 0
        previous: list[PartitionState | None] = []
        append = previous.append
        for pid in ids:
            current = states[pid]
            states[pid] = state
            append(current)
            if current is state:
                continue
            if current is None:
                added += 1
            elif current is not online:
                by_state[current].discard(pid)
            if entered is not None:
                entered.add(pid)
            # A missing state counts as NonExistent, so entering Offline from nothing is +1.
            if state is offline:
                if not started or tps[pid].topic not in started:
                    offline_delta += 1
            elif current is offline and (not started or tps[pid].topic not in started):
                offline_delta -= 1
        table.state_count += added
        self._offline_partition_count += offline_delta
        return previous

    def put_missing_partition_states(self, partitions: Iterable[TopicPartition], state: PartitionState) -> None:
        """``put_partition_state_if_not_exists`` for many partitions (usually all have a state already)."""
        states = self.table.state
        self.move_partition_ids_to_state([pid for pid in self.table.ids_of(partitions) if states[pid] is None], state)

    def put_partition_state_if_not_exists(self, tp: TopicPartition, state: PartitionState) -> None:
        self.put_missing_partition_states((tp,), state)

    def partitions_in_states(self, states: Collection[PartitionState], topic: str | None = None) -> set[TopicPartition]:
        """Partitions in any of ``states`` (optionally of one topic)."""
        return set(self.partitions_of(self.partition_ids_in_states(states, topic)))

    def partition_ids_in_states(self, states: Collection[PartitionState], topic: str | None = None) -> list[int]:
        """The numbers of ``partitions_in_states``, in number order."""
        table = self.table
        column = table.state
        if topic is not None:
            return sorted(pid for pid in table.by_topic.get(topic, {}).values() if column[pid] in states)
        result: set[int] = set()
        for state in states:
            if state is PartitionState.ONLINE:
                result.update(pid for pid, s in enumerate(column) if s is PartitionState.ONLINE)
            else:
                result.update(table.by_state[state])
        return sorted(result)

    def partitions_in_state(self, state: PartitionState, topic: str | None = None) -> set[TopicPartition]:
        return self.partitions_in_states((state,), topic)

    def check_valid_partition_state_change(
        self, partitions: Iterable[TopicPartition], target: PartitionState, default: PartitionState | None = None
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Split ``partitions`` into (valid, invalid) for moving to ``target``; unknown ones are invalid.

        With ``default``, a partition without a state is first given it (the state machine's "put if
        not exists"), in the same pass.
        """
        valid, invalid = self.check_valid_partition_id_state_change(self.table.ids_of(partitions), target, default)
        return self.partitions_of(valid), self.partitions_of(invalid)

    def check_valid_partition_id_state_change(
        self, ids: Iterable[int], target: PartitionState, default: PartitionState | None = None
    ) -> tuple[list[int], list[int]]:
        """``check_valid_partition_state_change`` on partition numbers."""
        allowed = PARTITION_VALID_PREVIOUS[target]
        states = self.table.state
        valid: list[int] = []
        invalid: list[int] = []
        missing: list[int] = []
        for pid in ids:
            state = states[pid]
            if state is None and default is not None:
                missing.append(pid)
                state = default
            (valid if state in allowed else invalid).append(pid)
        if missing and default is not None:
            self.move_partition_ids_to_state(missing, default)
        return valid, invalid

    # -- replica states ----------------------------------------------------------------------

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState | None:
        pid = self.table.ids.get(replica.topic_partition)
        if pid is None:
            return None
        states = self.table.replica_states[pid]
        return None if states is None else states.get(replica.replica)

    def put_replica_state(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        self.move_replica_ids_of_broker(replica.replica, [self.table.id_of(replica.topic_partition)], state)

    def move_replicas_of_broker(
        self, broker_id: int, partitions: Iterable[TopicPartition], state: ReplicaState
    ) -> list[ReplicaState | None]:
        """``put_replica_state`` for ``broker_id``'s replica of each partition, in one pass; returns the
        state each had before (None: none), in order. A controlled shutdown moves 20,000 at once."""
        return self.move_replica_ids_of_broker(broker_id, self.table.ids_of(partitions), state)

    def move_replica_ids_of_broker(
        self, broker_id: int, ids: Iterable[int], state: ReplicaState
    ) -> list[ReplicaState | None]:
        """``move_replicas_of_broker`` on partition numbers."""
        column = self.table.replica_states
        with_state = self.table.replica_state_maps.with_state
        moved: dict[int, dict[int, ReplicaState]] = {}  # per shared mapping (by id): where this move takes it
        previous: list[ReplicaState | None] = []
        append = previous.append
        for pid in ids:
            states = column[pid]
            append(None if states is None else states.get(broker_id))
            after = moved.get(id(states))
            if after is None:
                after = moved[id(states)] = with_state(states, broker_id, state)
            column[pid] = after
        return previous

    def load_replica_states(self, states: Mapping[TopicPartition, dict[int, ReplicaState]]) -> None:
        """Replace every replica state of each partition given at once (failover: every partition); each
        dict non-empty."""
        self.load_replica_states_by_id(zip(self.table.ids_of(states), states.values(), strict=True))

    def load_replica_states_by_id(self, states: Iterable[tuple[int, dict[int, ReplicaState]]]) -> None:
        """``load_replica_states`` on partition numbers (the dicts are taken, not copied, and may be
        shared by the table with other partitions: do not change them afterwards). A dict given for
        many partitions (the replica state machine's start-up shares one per replica list) is
        interned once."""
        column = self.table.replica_states
        intern = self.table.replica_state_maps.intern
        given: dict[int, tuple[dict[int, ReplicaState], dict[int, ReplicaState] | None]] = {}
        for pid, replica_states in states:
            known = given.get(id(replica_states))
            if known is None:
                # The dict is kept alongside so its id cannot be reused within this call.
                known = given[id(replica_states)] = (replica_states, intern(replica_states))
            column[pid] = known[1]

    def put_replica_state_if_not_exists(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        if self.replica_state(replica) is None:
            self.put_replica_state(replica, state)

    def remove_replica_state(self, replica: PartitionAndReplica) -> None:
        pid = self.table.ids.get(replica.topic_partition)
        if pid is None:
            return
        column = self.table.replica_states
        if column[pid] is not None:
            column[pid] = self.table.replica_state_maps.without(column[pid], replica.replica)

    def replica_states_of(self, tp: TopicPartition) -> Mapping[int, ReplicaState]:
        """The recorded replica states of one partition (broker id -> state)."""
        pid = self.table.ids.get(tp)
        return (None if pid is None else self.table.replica_states[pid]) or {}

    def iter_replica_states(self) -> Iterator[tuple[PartitionAndReplica, ReplicaState]]:
        tps = self.table.tps
        for pid, states in enumerate(self.table.replica_states):
            if states:
                tp = tps[pid]
                for replica, state in states.items():
                    yield PartitionAndReplica(tp, replica), state

    def check_valid_replica_state_change(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaState, default: ReplicaState | None = None
    ) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        """Split ``replicas`` into those that may move to ``target`` and those that may not.

        With ``default``, a replica without a state is first given it (the state machine's
        "put if not exists"), in the same pass.
        """
        valid: list[PartitionAndReplica] = []
        invalid: list[PartitionAndReplica] = []
        id_of = self.table.id_of
        for replica in replicas:
            tp, broker_id = replica
            ok, _ = self.check_valid_replica_id_state_change(broker_id, (id_of(tp),), target, default)
            (valid if ok else invalid).append(replica)
        return valid, invalid

    def check_valid_replica_id_state_change(
        self, broker_id: int, ids: Iterable[int], target: ReplicaState, default: ReplicaState | None = None
    ) -> tuple[list[int], list[int]]:
        """``check_valid_replica_state_change`` for ``broker_id``'s replica of each partition number."""
        allowed = REPLICA_VALID_PREVIOUS[target]
        valid: list[int] = []
        invalid: list[int] = []
        column = self.table.replica_states
        with_state = self.table.replica_state_maps.with_state
        for pid in ids:
            states = column[pid]
            state = None if states is None else states.get(broker_id)
            if state is None and default is not None:
                state = default
                column[pid] = with_state(states, broker_id, default)
            (valid if state in allowed else invalid).append(pid)
        return valid, invalid

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        """Assigned replicas of ``topic`` currently in ``state``."""
        return {replica for replica in self.replicas_for_topic(topic) if self.replica_state(replica) is state}

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        """True when every assigned replica of ``topic`` is in ``state`` (vacuously true)."""
        return all(self.replica_state(replica) is state for replica in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.replica_state(replica) is state for replica in self.replicas_for_topic(topic))

    # -- topic deletion bookkeeping ------------------------------------------------------------

    @property
    def topics_to_be_deleted(self) -> AbstractSet[str]:
        return self._topics_to_be_deleted

    @property
    def topics_with_deletion_started(self) -> AbstractSet[str]:
        return self._topics_with_deletion_started

    @property
    def topics_ineligible_for_deletion(self) -> AbstractSet[str]:
        return self._topics_ineligible_for_deletion

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics for deletion and take them out of the imbalance gauge.

        Only newly queued topics are subtracted (the 3.3.2 fix, KAFKA-13572): 2.8 subtracted
        again for a topic queued twice and drove the gauge negative.
        """
        for topic in topics:
            if topic not in self._topics_to_be_deleted:
                self._subtract_topic_imbalance(topic)
                self._topics_to_be_deleted.add(topic)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        """Mark deletion as started: from now on these topics no longer move the offline gauge."""
        self._topics_with_deletion_started.update(topics)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self._topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self._topics_with_deletion_started

    def mark_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        self._topics_ineligible_for_deletion.update(topics)

    def mark_topics_eligible_for_deletion(self, topics: Iterable[str]) -> None:
        self._topics_ineligible_for_deletion.difference_update(topics)

    def _subtract_topic_imbalance(self, topic: str) -> None:
        table = self.table
        leadership, assignments = table.leadership, table.assignment
        for pid in table.by_topic.get(topic, {}).values():
            self._preferred_replica_imbalance_count -= _imbalance(assignments[pid], leadership[pid])

    # -- gauges --------------------------------------------------------------------------------

    @property
    def offline_partition_count(self) -> int:
        return self._offline_partition_count

    @property
    def preferred_replica_imbalance_count(self) -> int:
        return self._preferred_replica_imbalance_count

    @property
    def global_topic_count(self) -> int:
        return len(self._all_topics)
