"""Accumulate control requests per broker during one state change, then send them in one go.

Kafka's ``ControllerBrokerRequestBatch`` (reference §6.1 to §6.3): a state-machine call opens a
batch (``new_batch``), adds LeaderAndIsr / StopReplica / UpdateMetadata entries while it decides,
and sends everything at the end (``send_requests_to_brokers``), so each broker gets at most one
request of each kind per state change, in the order LeaderAndIsr -> UpdateMetadata -> StopReplica.

Rules that matter (checklist §15 items 4 to 6):

* Broker ids below 0 are ignored when adding; requests for brokers that are not registered when
  the batch is sent are dropped (the broker is gone; it gets full metadata when it comes back).
* Within one batch ``is_new`` and ``delete_partition`` are sticky: once true for a (broker,
  partition) they stay true even if a later add says false.
* Every LeaderAndIsr add also schedules an UpdateMetadata for that partition to every registered
  broker, so the whole cluster learns each leadership decision.

UpdateMetadata partition states are built once at send time from the context (the newest cached
leadership) and the same list is shared by every target broker's request, which keeps a 100k
partition batch to one pass instead of one per add and per broker.

Responses come back on the transport's thread. The callbacks given here must only enqueue
controller events; so that they never read the context, everything they need (which partitions
belong to topics whose deletion has started) is captured when the batch is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from functools import partial
from itertools import chain
from operator import attrgetter
from types import MappingProxyType
from typing import Any

import msgspec

from controller_core.context import ControllerContext
from controller_core.errors import IllegalStateError
from controller_core.model import (
    EPOCH_DURING_DELETE,
    INITIAL_LEADER_EPOCH,
    INITIAL_PARTITION_ZK_VERSION,
    LEADER_DURING_DELETE,
    NO_BROKER_EPOCH,
    NO_EPOCH,
    BrokerRegistration,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.ports import RequestTransport
from controller_core.protocol.messages import (
    ErrorCode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    PartedList,
    SharedList,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from controller_core.state_change_log import StateChangeLogger

logger = logging.getLogger(__name__)

_MIN_PART = 64
"""Shared LeaderAndIsr parts only when a broker's groups hold this many partitions on average: a part
costs a few hundred bytes of its own (a cluster of many brokers and small groups sends plain lists)."""
_LEADER = attrgetter("leader")
_TOPIC = attrgetter("topic")

LeaderAndIsrResponseCallback = Callable[[int, LeaderAndIsrResponse], None]
"""``(broker_id, response)``: must only enqueue a LeaderAndIsrResponseReceived event."""

UpdateMetadataResponseCallback = Callable[[int, UpdateMetadataResponse], None]
"""``(broker_id, response)``: must only enqueue (or log)."""

LeaderAndIsrEntry = tuple[Iterable[int], TopicPartition, LeaderIsrAndControllerEpoch, ReplicaAssignment]
"""``(broker_ids, partition, leadership, assignment)``: one partition of ``add_leader_and_isr_requests``."""

LeaderAndIsrIdEntry = tuple[Iterable[int], int, LeaderIsrAndControllerEpoch, ReplicaAssignment]
"""``(broker_ids, partition number, leadership, assignment)``: one partition of
``add_leader_and_isr_requests_by_id`` (the number is the context's ``table`` row)."""

StopReplicaResponseCallback = Callable[[int, ErrorCode, Mapping[TopicPartition, ErrorCode]], None]
"""``(broker_id, top_level_error, errors of partitions being deleted)``: enqueue a
TopicDeletionStopReplicaResponseReceived event. Called only when the request carried
delete=true partitions of topics whose deletion had started; with a top-level error and no
per-partition list, every such partition carries the top-level error."""


class GroupedStates:
    """A broker's pending LeaderAndIsr states as the groups whose concatenation they are (partition
    number -> state, each group the states of one recipient list, shared with its other recipients),
    merged into one dict only if the batch needs one (more states added before the send).

    Why: a failover's start-up sends every broker the groups it replicates, whole, in order
    (``standby.kept_requests``); at a million partitions, RF 3, merging them into per-broker dicts
    was 3,000,000 inserts, ~0.35 s of the cold failover's replica state machine phase, for dicts the
    send then only read back in order.
    """

    __slots__ = ("groups",)

    def __init__(self, groups: list[dict[int, LeaderAndIsrPartitionState]]) -> None:
        self.groups = groups

    def __len__(self) -> int:
        return sum(map(len, self.groups))

    def values(self) -> Iterator[LeaderAndIsrPartitionState]:
        return chain.from_iterable([group.values() for group in self.groups])

    def items(self) -> Iterator[tuple[int, LeaderAndIsrPartitionState]]:
        return chain.from_iterable([group.items() for group in self.groups])

    def merged(self) -> dict[int, LeaderAndIsrPartitionState]:
        merged: dict[int, LeaderAndIsrPartitionState] = {}
        for group in self.groups:
            merged.update(group)
        return merged


PendingStates = dict[int, LeaderAndIsrPartitionState] | GroupedStates
"""A broker's pending LeaderAndIsr states: partition number -> state, or whole groups (``GroupedStates``)."""


class ControllerBrokerRequestBatch:
    """One batch of pending control requests, owned by one state machine or helper.

    Example::

        batch = ControllerBrokerRequestBatch(ctx, transport, log)
        batch.new_batch()
        batch.add_leader_and_isr_request_for_brokers([1, 2], tp, info, assignment, is_new=False)
        batch.send_requests_to_brokers(ctx.epoch)
    """

    def __init__(
        self,
        context: ControllerContext,
        transport: RequestTransport,
        state_change_logger: StateChangeLogger | None = None,
        *,
        inter_broker_listener: str = "PLAINTEXT",
        on_leader_and_isr_response: LeaderAndIsrResponseCallback | None = None,
        on_update_metadata_response: UpdateMetadataResponseCallback | None = None,
        on_stop_replica_response: StopReplicaResponseCallback | None = None,
    ) -> None:
        self._ctx = context
        self._transport = transport
        self._log = state_change_logger
        self.inter_broker_listener = inter_broker_listener.upper()
        self.on_leader_and_isr_response = on_leader_and_isr_response
        self.on_update_metadata_response = on_update_metadata_response
        self.on_stop_replica_response = on_stop_replica_response
        # Pending partitions are keyed by the context's partition numbers (ints hash for free).
        self._leader_and_isr: dict[int, PendingStates] = {}
        # Per broker whose pending LeaderAndIsr states are, in order, whole groups added at once (a
        # failover's start-up): those groups' states, each list shared by the group's recipients so
        # that its JSON is made once for all of them (``PartedList``). Dropped when the broker's
        # pending states change otherwise.
        self._leader_and_isr_parts: dict[int, list[SharedList[LeaderAndIsrPartitionState]]] = {}
        # The brokers whose pending LeaderAndIsr holds a new partition state (``is_new`` is sticky): only
        # theirs need a look per partition when more states are added.
        self._with_new: set[int] = set()
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._um_partitions: dict[int, None] = {}  # insertion-ordered set of partition numbers
        self._um_partitions_are_kept = False
        """The pending UpdateMetadata partitions are the kept states' (``add_kept``), not yet copied into
        ``_um_partitions`` (a million-key dict, and a comparison of it at the send, for nothing): see
        ``_update_metadata_partitions``."""
        # The registered-id set last merged into the UpdateMetadata targets. The context replaces
        # that frozenset on every membership change, so identity tells us whether to merge again.
        self._merged_registered: frozenset[int] | None = None
        # A warm standby's kept UpdateMetadata states for the pending partitions (``add_kept``): one send.
        self._kept_update_metadata: Mapping[int, UpdateMetadataPartitionState] | None = None
        # UpdateMetadata states built ahead (``prebuild_update_metadata``), each with the leadership it
        # was built from, and the live-broker set they were built against (their offline replicas).
        self._prebuilt_update_metadata: dict[int, tuple[LeaderIsrAndControllerEpoch, UpdateMetadataPartitionState]] = {}
        self._prebuilt_live: frozenset[int] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not (
            self._leader_and_isr
            or self._stop_replica
            or self._update_metadata_brokers
            or self._um_partitions
            or (self._um_partitions_are_kept and bool(self._kept_update_metadata))
        )

    def new_batch(self) -> None:
        """Start a batch; a non-empty batch means an earlier one was never sent (invariant breach)."""
        if not self.is_empty():
            raise IllegalStateError(
                "Controller to broker state change requests batch is not empty while creating a new one. "
                f"Some state changes were not sent: leader_and_isr={sorted(self._leader_and_isr)} "
                f"update_metadata={sorted(self._update_metadata_brokers)} "
                f"stop_replica={sorted(self._stop_replica)}"
            )

    def clear(self) -> None:
        self._leader_and_isr = {}
        self._leader_and_isr_parts = {}
        self._with_new = set()
        self._stop_replica = {}
        self._update_metadata_brokers = set()
        self._update_metadata_partitions = {}
        self._merged_registered = None
        self._kept_update_metadata = None
        self._prebuilt_update_metadata = {}
        self._prebuilt_live = None

    @property
    def _update_metadata_partitions(self) -> dict[int, None]:
        """The partition numbers pending for UpdateMetadata (insertion-ordered), copied from the kept
        states first if they are theirs."""
        if self._um_partitions_are_kept:
            self._um_partitions_are_kept = False
            self._um_partitions = dict.fromkeys(self._kept_update_metadata or ())
        return self._um_partitions

    @_update_metadata_partitions.setter
    def _update_metadata_partitions(self, partitions: dict[int, None]) -> None:
        self._um_partitions_are_kept = False
        self._um_partitions = partitions

    # -- pending contents (read-only views) ------------------------------------------------------

    @property
    def leader_and_isr_requests(self) -> Mapping[int, Mapping[TopicPartition, LeaderAndIsrPartitionState]]:
        tps = self._ctx.table.tps
        return {
            broker: {tps[pid]: state for pid, state in states.items()}
            for broker, states in self._leader_and_isr.items()
        }

    @property
    def stop_replica_requests(self) -> Mapping[int, Mapping[TopicPartition, StopReplicaPartitionState]]:
        return MappingProxyType(self._stop_replica)

    @property
    def update_metadata_brokers(self) -> AbstractSet[int]:
        return frozenset(self._update_metadata_brokers)

    @property
    def update_metadata_partitions(self) -> list[TopicPartition]:
        return self._ctx.partitions_of(self._update_metadata_partitions)

    # -- adding ------------------------------------------------------------------------------------

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        """Tell ``broker_ids`` the partition's leader and ISR (and everyone, via UpdateMetadata)."""
        self.add_leader_and_isr_requests(
            ((broker_ids, tp, leader_isr_and_controller_epoch, replica_assignment),), is_new
        )

    def add_leader_and_isr_requests(self, entries: Iterable[LeaderAndIsrEntry], is_new: bool) -> None:
        """``add_leader_and_isr_request_for_brokers`` for many partitions in one pass: each entry is
        ``(broker_ids, partition, leadership, assignment)``."""
        id_of = self._ctx.table.id_of
        self.add_leader_and_isr_requests_by_id(
            [(broker_ids, id_of(tp), info, assignment) for broker_ids, tp, info, assignment in entries], is_new
        )

    def add_leader_and_isr_requests_by_id(self, entries: Iterable[LeaderAndIsrIdEntry], is_new: bool) -> None:
        """``add_leader_and_isr_requests`` keyed by partition number: the state machines' bulk path (a
        failover adds all 100,000 partitions this way, a broker failure its 10,000 elections).

        One partition state per entry; the entries are grouped by their recipients (a cluster has few
        distinct recipient lists), and each broker's pending map takes its group in one update. Only
        partitions already pending as new for a broker need a second look (``is_new`` is sticky).
        """
        groups = LeaderAndIsrGroups(self._ctx, is_new)
        groups.add(entries)
        self.add_leader_and_isr_groups(groups)

    def add_leader_and_isr_groups(self, staged: LeaderAndIsrGroups) -> None:
        """Add what ``staged`` built (``add_leader_and_isr_requests_by_id`` in two steps: an election
        builds its partitions' states as their writes come back, while ZooKeeper applies the later
        multis, and adds them all here once the last write is in, as one call would have, in the
        same order)."""
        groups, numbers, is_new = staged.groups, staged.numbers, staged.is_new
        if not numbers:
            return
        pending = self._leader_and_isr
        by_broker: dict[int, list[tuple[int, LeaderAndIsrPartitionState]]] = {}
        for recipients, group in groups.items():
            for broker_id in recipients:
                if broker_id >= 0:
                    by_broker.setdefault(broker_id, []).extend(group)
        shared: dict[tuple[int, ...], SharedList[LeaderAndIsrPartitionState]] = {}  # a group's states
        parts = self._leader_and_isr_parts
        with_new = self._with_new
        for broker_id, items in by_broker.items():
            per_broker = pending.get(broker_id)
            if isinstance(per_broker, GroupedStates):
                per_broker = pending[broker_id] = per_broker.merged()
            if per_broker is None:
                per_broker = pending[broker_id] = dict(items)
                if len(per_broker) == len(items):  # no partition twice: its groups' states, in order
                    own: list[SharedList[LeaderAndIsrPartitionState]] = []
                    for recipients, group in groups.items():
                        if broker_id in recipients:
                            part = shared.get(recipients)
                            if part is None:
                                part = shared[recipients] = SharedList(state for _, state in group)
                            own.append(part)
                    parts[broker_id] = own
                continue
            parts.pop(broker_id, None)
            if is_new or broker_id not in with_new:  # no pending new state of this broker to keep new
                per_broker.update(items)
            else:
                sticky = [pid for pid, _ in items if (p := per_broker.get(pid)) is not None and p.is_new]
                per_broker.update(items)
                for pid in sticky:
                    per_broker[pid] = msgspec.structs.replace(per_broker[pid], is_new=True)
        if is_new:
            with_new.update(by_broker)
        self._update_metadata_partitions.update(dict.fromkeys(numbers))
        registered = self._ctx.live_or_shutting_down_broker_ids
        if registered is not self._merged_registered:
            self._update_metadata_brokers.update(b for b in registered if b >= 0)
            self._merged_registered = registered

    def add_kept(
        self,
        leader_and_isr: Mapping[int, PendingStates],
        update_metadata: Mapping[int, UpdateMetadataPartitionState],
        parts: Mapping[int, list[SharedList[LeaderAndIsrPartitionState]]] | None = None,
    ) -> None:
        """A warm standby's kept start-up requests (``controller_core.standby.kept_requests``) into an
        empty batch: what ``add_leader_and_isr_requests_by_id(..., is_new=False)`` of every partition
        with a leadership and an online replica adds, already built (per broker, in partition order).
        At send, the kept UpdateMetadata states are used as they are unless the context then needs
        them built (topics queued for deletion, failed log directories) or other partitions joined.
        ``parts``: per broker, the shared lists its states are the concatenation of (``PartedList``)."""
        if not self.is_empty():
            raise IllegalStateError("kept start-up requests go into an empty batch only")
        self._leader_and_isr = {b: states for b, states in leader_and_isr.items() if b >= 0}
        self._leader_and_isr_parts = {b: p for b, p in (parts or {}).items() if b in self._leader_and_isr}
        self._with_new = set()  # kept start-up states are never new
        self._kept_update_metadata = update_metadata
        self._um_partitions, self._um_partitions_are_kept = {}, True  # ``update_metadata``'s keys
        if update_metadata:
            registered = self._ctx.live_or_shutting_down_broker_ids
            self._update_metadata_brokers.update(b for b in registered if b >= 0)
            self._merged_registered = registered

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        """Stop the replica of ``tp`` on ``broker_ids``; the leader epoch fences stale requests."""
        ctx = self._ctx
        if ctx.is_topic_queued_up_for_deletion(tp.topic):
            leader_epoch = EPOCH_DURING_DELETE
        else:
            info = ctx.partition_leadership_info(tp)
            leader_epoch = NO_EPOCH if info is None else info.leader_and_isr.leader_epoch
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._stop_replica.get(broker_id)
            if per_broker is None:
                per_broker = self._stop_replica[broker_id] = {}
            previous = per_broker.get(tp)
            delete = delete_partition or (previous is not None and previous.delete_partition)
            per_broker[tp] = StopReplicaPartitionState(tp.topic, tp.partition, leader_epoch, delete)

    def add_stop_replica_requests_for_broker(
        self, broker_id: int, partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """``add_stop_replica_request_for_brokers((broker_id,), tp, ...)`` for many partitions in one pass
        (a controlled shutdown or a broker failure stops tens of thousands of replicas of one broker)."""
        if broker_id < 0:
            return
        ctx = self._ctx
        deleting = ctx.topics_to_be_deleted
        ids = ctx.table.ids
        leadership = ctx.table.leadership
        per_broker = self._stop_replica.get(broker_id)
        if per_broker is None:
            per_broker = self._stop_replica[broker_id] = {}
        for tp in partitions:
            if deleting and tp.topic in deleting:
                leader_epoch = EPOCH_DURING_DELETE
            else:
                pid = ids.get(tp)
                info = None if pid is None else leadership[pid]
                leader_epoch = NO_EPOCH if info is None else info.leader_and_isr.leader_epoch
            delete = delete_partition
            if not delete:
                previous = per_broker.get(tp)
                delete = previous is not None and previous.delete_partition
            per_broker[tp] = StopReplicaPartitionState(tp.topic, tp.partition, leader_epoch, delete)

    def add_stop_replica_requests_by_id(self, broker_id: int, ids: Iterable[int], delete_partition: bool) -> None:
        """``add_stop_replica_requests_for_broker`` for partitions given by number of the context's table
        (a controlled shutdown's or a broker failure's replicas: no ``TopicPartition`` turned back into
        a number). The same states: the leader epoch fences stale requests, -2 while deleting, and a
        delete already pending for the broker stays a delete."""
        if broker_id < 0:
            return
        ctx = self._ctx
        deleting = ctx.topics_to_be_deleted
        table = ctx.table
        tps, leadership = table.tps, table.leadership
        per_broker = self._stop_replica.get(broker_id)
        if per_broker is None:
            per_broker = self._stop_replica[broker_id] = {}
        state = StopReplicaPartitionState
        no_epoch = NO_EPOCH
        if not per_broker and not deleting:  # a fresh batch (the usual case): no earlier delete to keep
            for pid in ids:
                tp = tps[pid]
                info = leadership[pid]
                leader_epoch = no_epoch if info is None else info.leader_and_isr.leader_epoch
                per_broker[tp] = state(tp.topic, tp.partition, leader_epoch, delete_partition)
            return
        self.add_stop_replica_requests_for_broker(broker_id, [tps[pid] for pid in ids], delete_partition)

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        """Send ``broker_ids`` the metadata of ``partitions`` (none: just the live-broker list)."""
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self._update_metadata_partitions.update(dict.fromkeys(self._ctx.table.ids_of(partitions)))

    def prebuild_update_metadata(self, ids: Iterable[int]) -> None:
        """Build the UpdateMetadata states of ``ids`` (partition numbers, cached already) now, for the send
        to use unless their leadership or the live brokers change meanwhile: an election builds them
        as its writes come back, while ZooKeeper applies the later multis, instead of all at the send.
        Nothing is built while topics are being deleted or log directories have failed (the send then
        builds every state, as without this)."""
        ctx = self._ctx
        if ctx.topics_to_be_deleted or ctx.has_replicas_on_offline_dirs:
            return
        live = ctx.live_broker_ids
        prebuilt = self._prebuilt_update_metadata
        if live is not self._prebuilt_live:
            prebuilt.clear()
            self._prebuilt_live = live
        self._build_update_metadata_states(ids, prebuilt)

    def _build_update_metadata_states(
        self,
        ids: Iterable[int],
        into: dict[int, tuple[LeaderIsrAndControllerEpoch, UpdateMetadataPartitionState]] | None = None,
    ) -> SharedList[UpdateMetadataPartitionState]:
        """The UpdateMetadata states of ``ids`` (partition numbers) from the context, partitions
        without leadership skipped. With ``into`` each goes there instead, with the leadership it was
        built from (states built ahead: ``prebuild_update_metadata``), and one without leadership
        leaves it. Runs for every partition after a failover (100,000+) and for every partition an
        election writes: lookups bound once, topic deletion and failed log directories a test each."""
        ctx = self._ctx
        table = ctx.table
        leadership, assignments, tps = table.leadership, table.assignment, table.tps
        live = ctx.live_broker_ids
        deleting = ctx.topics_to_be_deleted
        per_partition_online = ctx.has_replicas_on_offline_dirs
        # Offline replicas depend only on the replica list while no log dir failed, and a cluster
        # has few distinct replica lists: compute each once.
        offline_of: dict[tuple[int, ...], tuple[int, ...]] = {}
        state = UpdateMetadataPartitionState
        states: SharedList[UpdateMetadataPartitionState] = SharedList()
        append = states.append
        for pid in ids:
            info = leadership[pid]
            if info is None:
                if into is not None:
                    into.pop(pid, None)
                continue
            tp = tps[pid]
            lai = info.leader_and_isr
            assignment = assignments[pid]
            replicas = () if assignment is None else assignment.replicas
            # Shutting-down brokers count as offline here: clients must stop using them.
            if per_partition_online:
                online = ctx.online_replica_set(tp)
                offline = tuple([r for r in replicas if r not in online])
            else:
                offline = offline_of.get(replicas)  # type: ignore[assignment]
                if offline is None:
                    offline = offline_of[replicas] = tuple([r for r in replicas if r not in live])
            if deleting and tp.topic in deleting:
                # Leader -2 tells brokers to drop the topic from the metadata they serve.
                leader, epoch, version = LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, INITIAL_PARTITION_ZK_VERSION
            else:
                leader, epoch, version = lai.leader, lai.leader_epoch, lai.zk_version
            built = state(
                tp.topic, tp.partition, info.controller_epoch, leader, epoch, lai.isr, version, replicas, offline
            )
            if into is None:
                append(built)
            else:
                into[pid] = (info, built)
        return states

    # -- sending -------------------------------------------------------------------------------

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """Send everything pending, LeaderAndIsr then UpdateMetadata then StopReplica.

        Any failure is an ``IllegalStateError`` (the caller resigns); what was not sent stays in
        the batch so that the breach is visible to the next ``new_batch``.
        """
        try:
            leader_and_isr = self._send_leader_and_isr(controller_epoch)
            update_metadata_brokers, update_metadata_partitions = self._send_update_metadata(controller_epoch)
            stop_replica = self._send_stop_replica(controller_epoch)
        except Exception as e:
            raise IllegalStateError(f"failed to send controller requests to brokers: {e!r}") from e
        if self._log is not None and (leader_and_isr or update_metadata_brokers or stop_replica):
            self._log.request_batch(
                controller_epoch, leader_and_isr, update_metadata_brokers, update_metadata_partitions, stop_replica
            )

    def _send_leader_and_isr(self, controller_epoch: int) -> dict[int, int]:
        ctx = self._ctx
        registered = ctx.live_or_shutting_down_broker_ids
        sent: dict[int, int] = {}
        live_leaders: dict[int, LiveLeader] = {}
        # Per shared part (by identity; alive through this call): its leaders and topics, found once for
        # all the brokers whose requests hold it instead of once per broker.
        of_parts: dict[int, tuple[set[int], tuple[str, ...]]] = {}
        with_ids = bool(ctx.topic_ids)
        for broker_id in sorted(self._leader_and_isr):
            if broker_id not in registered:
                continue
            pending = self._leader_and_isr[broker_id]
            parts = self._leader_and_isr_parts.get(broker_id)
            states: list[LeaderAndIsrPartitionState]
            if parts and len(pending) >= len(parts) * _MIN_PART:
                states = PartedList(pending.values())  # the concatenation of ``parts``, by construction
                states.parts = parts
                leader_ids, topics = _leaders_and_topics_of_parts(parts, of_parts)
            else:
                states = list(pending.values())
                leader_ids = set(map(_LEADER, states))
                topics = set(map(_TOPIC, states)) if with_ids else set()
            leaders: list[LiveLeader] = []
            for leader_id in sorted(leader_ids):
                if leader_id in registered:
                    leader = live_leaders.get(leader_id)
                    if leader is None:
                        leader = live_leaders[leader_id] = self._live_leader(leader_id)
                    leaders.append(leader)
            request = LeaderAndIsrRequest(
                *self._header(broker_id, controller_epoch), states, leaders, self._topic_ids(topics)
            )
            self._send(broker_id, request, self.on_leader_and_isr_response, LeaderAndIsrResponse)
            sent[broker_id] = len(states)
        self._leader_and_isr = {}
        self._leader_and_isr_parts = {}
        self._with_new = set()
        return sent

    def _send_update_metadata(self, controller_epoch: int) -> tuple[list[int], int]:
        ctx = self._ctx
        registered = ctx.live_or_shutting_down_broker_ids
        targets = sorted(b for b in self._update_metadata_brokers if b in registered)
        partition_count = 0
        if targets:
            states = self._update_metadata_states()
            partition_count = len(states)
            live_brokers = [_update_metadata_broker(b) for b in ctx.live_or_shutting_down_brokers()]
            topic_ids = self._topic_ids(set(map(_TOPIC, states))) if ctx.topic_ids else {}
            for broker_id in targets:
                request = UpdateMetadataRequest(
                    *self._header(broker_id, controller_epoch), states, live_brokers, topic_ids
                )
                self._send(broker_id, request, self.on_update_metadata_response, UpdateMetadataResponse)
        self._update_metadata_brokers = set()
        self._update_metadata_partitions = {}
        self._merged_registered = None
        self._kept_update_metadata = None
        self._prebuilt_update_metadata = {}
        self._prebuilt_live = None
        return targets, partition_count

    def _update_metadata_states(self) -> SharedList[UpdateMetadataPartitionState]:
        """The partition states every target broker's UpdateMetadata shares (one list: encoded once)."""
        ctx = self._ctx
        kept = self._kept_update_metadata
        if (
            kept is not None
            and not ctx.topics_to_be_deleted
            and not ctx.has_replicas_on_offline_dirs
            and (self._um_partitions_are_kept or kept.keys() == self._update_metadata_partitions.keys())
        ):
            return SharedList(kept.values())
        if self._prebuilt_update_metadata:
            prebuilt_states = self._prebuilt_update_metadata_states()
            if prebuilt_states is not None:
                return prebuilt_states
        pending = self._update_metadata_partitions
        states = self._build_update_metadata_states(pending)
        if len(states) < len(pending):
            logger.debug("UpdateMetadata skipped %d partitions without leadership info", len(pending) - len(states))
        return states

    def _prebuilt_update_metadata_states(self) -> SharedList[UpdateMetadataPartitionState] | None:
        """``_update_metadata_states`` from the states built ahead, the pending partitions whose
        leadership changed since (or never built) built now; None when the context no longer allows
        them (a live-broker change, a topic deletion or a failed log directory meanwhile)."""
        ctx = self._ctx
        if (
            ctx.live_broker_ids is not self._prebuilt_live
            or ctx.topics_to_be_deleted
            or ctx.has_replicas_on_offline_dirs
        ):
            return None
        prebuilt = self._prebuilt_update_metadata
        leadership = ctx.table.leadership
        pending = self._update_metadata_partitions
        get = prebuilt.get
        # Not built ahead, or their leadership changed since: built now, in one call.
        stale = [pid for pid in pending if (p := get(pid)) is None or p[0] is not leadership[pid]]
        if stale:
            self.prebuild_update_metadata(stale)
        states: SharedList[UpdateMetadataPartitionState] = SharedList()
        append = states.append
        for pid in pending:  # a lookup a partition; those without leadership have none
            p = get(pid)
            if p is not None:
                append(p[1])
        if len(states) < len(pending):
            logger.debug("UpdateMetadata skipped %d partitions without leadership info", len(pending) - len(states))
        return states

    def _send_stop_replica(self, controller_epoch: int) -> dict[int, int]:
        ctx = self._ctx
        registered = ctx.live_or_shutting_down_broker_ids
        sent: dict[int, int] = {}
        for broker_id in sorted(self._stop_replica):
            if broker_id not in registered:
                continue
            per_broker = self._stop_replica[broker_id]
            callback = None
            handler = self.on_stop_replica_response
            if handler is not None:
                deleting = frozenset(
                    tp
                    for tp, state in per_broker.items()
                    if state.delete_partition and ctx.is_topic_deletion_in_progress(tp.topic)
                )
                if deleting:
                    callback = partial(_deliver_stop_replica, broker_id, deleting, handler)
            request = StopReplicaRequest(*self._header(broker_id, controller_epoch), list(per_broker.values()))
            self._transport.send(broker_id, request, callback)
            sent[broker_id] = len(per_broker)
        self._stop_replica = {}
        return sent

    # -- helpers -------------------------------------------------------------------------------------

    def _send(self, broker_id: int, request: Any, handler: Any, response_type: type[Any]) -> None:
        """Hand ``request`` to the transport; its answer goes to ``handler`` if it is a ``response_type``
        (no callback without a handler)."""
        callback = None if handler is None else partial(_deliver, response_type, broker_id, handler)
        self._transport.send(broker_id, request, callback)

    def _header(self, broker_id: int, controller_epoch: int) -> tuple[int, int, int]:
        """The fields every control request starts with: controller id, controller epoch and the
        recipient's broker epoch (which fences a request meant for an earlier registration)."""
        epoch = self._ctx.broker_epoch(broker_id)
        return self._ctx.controller_id, controller_epoch, NO_BROKER_EPOCH if epoch is None else epoch

    def _topic_ids(self, topics: AbstractSet[str]) -> dict[str, str]:
        ids = self._ctx.topic_ids
        if not ids:
            return {}
        return {topic: ids[topic] for topic in topics if topic in ids}

    def _live_leader(self, broker_id: int) -> LiveLeader:
        broker = self._ctx.live_or_shutting_down_broker(broker_id)
        if broker is None or not broker.endpoints:
            return LiveLeader(broker_id, None, -1)
        endpoint = broker.endpoint(self.inter_broker_listener) or broker.endpoints[0]
        return LiveLeader(broker_id, endpoint.host, endpoint.port)


class LeaderAndIsrGroups:
    """LeaderAndIsr partition states built ahead of ``add_leader_and_isr_groups``, grouped by their
    recipients, in the order added (one election's writes, built as each multi comes back).

    Example::

        staged = LeaderAndIsrGroups(ctx, is_new=False)
        staged.add([((1, 2), pid, info, assignment)])
        batch.add_leader_and_isr_groups(staged)
    """

    __slots__ = ("_tps", "groups", "is_new", "numbers")

    def __init__(self, context: ControllerContext, is_new: bool) -> None:
        self._tps = context.table.tps
        self.is_new = is_new
        self.groups: dict[tuple[int, ...], list[tuple[int, LeaderAndIsrPartitionState]]] = {}
        self.numbers: list[int] = []

    def add(self, entries: Iterable[LeaderAndIsrIdEntry]) -> None:
        """One partition state per ``(broker_ids, partition number, leadership, assignment)``."""
        tps, groups, is_new = self._tps, self.groups, self.is_new
        number = self.numbers.append
        state = LeaderAndIsrPartitionState
        for broker_ids, pid, info, assignment in entries:
            number(pid)
            recipients = broker_ids if type(broker_ids) is tuple else tuple(broker_ids)
            group = groups.get(recipients)
            tp = tps[pid]
            lai = info.leader_and_isr
            # leader_and_isr_state(tp, info, assignment, is_new) without the call: once per partition.
            item = (
                pid,
                state(
                    tp.topic,
                    tp.partition,
                    info.controller_epoch,
                    lai.leader,
                    lai.leader_epoch,
                    lai.isr,
                    lai.zk_version,
                    assignment.replicas,
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                    is_new,
                ),
            )
            if group is None:
                groups[recipients] = [item]
            else:
                group.append(item)


def leader_and_isr_state(
    tp: TopicPartition,
    info: LeaderIsrAndControllerEpoch,
    assignment: ReplicaAssignment,
    is_new: bool,
) -> LeaderAndIsrPartitionState:
    """One partition's LeaderAndIsr state: what the batch sends, and what a warm standby keeps."""
    leader_and_isr = info.leader_and_isr
    return LeaderAndIsrPartitionState(
        tp.topic,
        tp.partition,
        info.controller_epoch,
        leader_and_isr.leader,
        leader_and_isr.leader_epoch,
        leader_and_isr.isr,
        leader_and_isr.zk_version,
        assignment.replicas,
        assignment.adding_replicas,
        assignment.removing_replicas,
        is_new,
    )


def _update_metadata_broker(broker: BrokerRegistration) -> UpdateMetadataBroker:
    return UpdateMetadataBroker(
        broker.id,
        tuple(UpdateMetadataEndpoint(e.host, e.port, e.listener, e.security_protocol) for e in broker.endpoints),
        broker.rack,
    )


# Response delivery runs on the transport's thread: no context access below this line.


def _coerce(response: Any, cls: type[Any]) -> Any:
    return response if isinstance(response, cls) else None


def _deliver(cls: type[Any], broker_id: int, handler: Callable[[int, Any], None], response: Any) -> None:
    """Hand ``handler`` the broker's answer if it is a ``cls`` (LeaderAndIsrResponse,
    UpdateMetadataResponse); anything else is logged and dropped."""
    decoded = _coerce(response, cls)
    if decoded is None:
        logger.warning("ignoring unexpected %s from broker %s: %r", cls.__name__, broker_id, response)
        return
    handler(broker_id, decoded)


def _deliver_stop_replica(
    broker_id: int,
    deleting: frozenset[TopicPartition],
    handler: StopReplicaResponseCallback,
    response: Any,
) -> None:
    decoded: StopReplicaResponse | None = _coerce(response, StopReplicaResponse)
    if decoded is None:
        logger.warning("ignoring unexpected StopReplica response from broker %s: %r", broker_id, response)
        return
    errors: dict[TopicPartition, ErrorCode] = {}
    for error in decoded.partition_errors:
        tp = TopicPartition(error.topic, error.partition)
        if tp in deleting:
            errors[tp] = error.error_code
    if not errors and decoded.error_code != ErrorCode.NONE:
        errors = dict.fromkeys(deleting, decoded.error_code)
    if errors:
        handler(broker_id, decoded.error_code, errors)


def _leaders_and_topics_of_parts(
    parts: list[SharedList[LeaderAndIsrPartitionState]], seen: dict[int, tuple[set[int], tuple[str, ...]]]
) -> tuple[set[int], set[str]]:
    """The leaders and the topics of the states of a ``PartedList`` made of ``parts``, each part's
    looked at once for every broker whose request holds it (``seen``, by part): a takeover's parts
    go to each of their replicas, and a loop over every broker's states was a third of its replica
    state machine start-up. The topics are the set ``set(map(_TOPIC, states))`` would build, added
    in the same order (each part's distinct topics in order, the parts in order) and one by one (a
    set updated from a dict or a set is resized ahead to another size: another iteration order), so
    the request's ``topic_ids`` come out in the same order, byte for byte."""
    leaders: set[int] = set()
    topics: set[str] = set()
    for part in parts:
        known = seen.get(id(part))
        if known is None:
            known = seen[id(part)] = (set(map(_LEADER, part)), tuple(dict.fromkeys(map(_TOPIC, part))))
        leaders |= known[0]
        topics.update(known[1])
    return leaders, topics
