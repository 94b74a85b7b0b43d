"""Partition reassignment, Kafka's KIP-455 sequence (reference §9).

While a partition moves, its topic znode holds RS = TRS + (ORS - TRS) with ``adding_replicas`` and
``removing_replicas``: that znode is the only persistent record of the move, so a controller that
fails over in the middle resumes from it (§7.5 step 11). The steps:

* U: record the new RS/AR/RR in the topic znode and in memory; stop replicas of a superseded move.
* A (new replicas not yet in the ISR): bump the leader epoch, send LeaderAndIsr to ORS (isNew=false)
  and AR (isNew=true); AR replicas -> NewReplica. Completion is detected later, when an ISR change
  (AlterIsr, or an ISR-change notification) shows TRS within the ISR.
* B (complete): AR -> OnlineReplica; move leadership into TRS (reassign strategy) or bump the epoch;
  RR -> Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent; write RS = TRS; clear the
  partition from ``/admin/reassign_partitions``; UpdateMetadata to every broker.

Operators start moves by writing ``/admin/reassign_partitions`` in Kafka's format (the dashboard
does exactly what ``kafka-reassign-partitions`` does), which also works against a Kafka cluster.

Cancelling cannot be expressed in that znode: as in Kafka it goes through AlterPartitionReassignments
(``on_api_reassignment``, reached through the controller's HTTP API), where a target of None means
"revert to the original replicas": RS := ORS, the adding replicas are stopped and deleted, and
``adding_replicas``/``removing_replicas`` are cleared in the topic znode. A partition that is not
being reassigned answers NO_REASSIGNMENT_IN_PROGRESS. The API's targets are validated (§9.3); the
partitions it accepts are first dropped from ``/admin/reassign_partitions`` (the latest request wins).

The manager does not hold the ``Controller``: it drives the context, the state machines and the
store it is given, and reaches the controller only through ``ReassignmentClient`` (whether it is
active, the leader-epoch bump with its LeaderAndIsr, UpdateMetadata, enqueueing an event) and
topic deletion only through ``DeletionHooks``, as Kafka's ``TopicDeletionManager`` reaches its
controller through a ``DeletionClient``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from controller_core.context import ControllerContext
from controller_core.election import ReassignStrategy
from controller_core.errors import ControllerMovedError, IllegalStateError
from controller_core.events import ApiPartitionReassignment, ControllerEvent, ZkPartitionReassignment
from controller_core.model import LeaderIsrAndControllerEpoch, PartitionAndReplica, ReplicaAssignment, TopicPartition
from controller_core.partition_state_machine import PartitionStateMachine
from controller_core.ports import PartitionStateRead, ZkCode
from controller_core.protocol.messages import ErrorCode
from controller_core.record_kinds import RecordKind
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.state_change_log import StateChangeLogger
from controller_core.states import PartitionState, ReplicaState

logger = logging.getLogger(__name__)

_R = ReplicaState


class ReassignmentClient(Protocol):
    """What reassignment needs of the controller itself (the ``Controller`` implements it)."""

    @property
    def is_active(self) -> bool: ...

    def update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: ReplicaAssignment, recipients_isnew: Mapping[int, bool]
    ) -> LeaderIsrAndControllerEpoch | None:
        """Bump ``tp``'s leader epoch (fenced) and send LeaderAndIsr; None when a newer controller wrote."""
        ...

    def send_update_metadata(self, partitions: Sequence[TopicPartition]) -> None:
        """UpdateMetadata for ``partitions`` to every live or shutting-down broker."""
        ...

    def enqueue(self, event: ControllerEvent) -> None:
        """Put ``event`` on the controller's event queue."""
        ...


class DeletionHooks(Protocol):
    """What reassignment tells topic deletion (``TopicDeletionManager`` implements it)."""

    def mark_topics_ineligible(self, topics: Iterable[str]) -> None: ...

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None: ...


class ReassignmentStore(Protocol):
    """The znodes reassignment reads and writes (``ZkStore`` implements them; writes are fenced)."""

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]] | None: ...

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_zk_version: int
    ) -> None: ...

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> bool: ...

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]: ...

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment],
        expected_controller_epoch_zk_version: int,
    ) -> None: ...


class ReassignmentManager:
    """Runs reassignments for one controller term (event thread only)."""

    def __init__(
        self,
        ctx: ControllerContext,
        store: ReassignmentStore,
        replica_sm: ReplicaStateMachine,
        partition_sm: PartitionStateMachine,
        scl: StateChangeLogger,
        deletion: DeletionHooks,
        client: ReassignmentClient,
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._replica_sm = replica_sm
        self._partition_sm = partition_sm
        self._scl = scl
        self._deletion = deletion
        self._client = client

    def reset(self) -> None:
        """Nothing to drop: all reassignment state lives in the context and the topic znodes."""

    # -- entry points -----------------------------------------------------------------------------

    def initialize(self) -> None:
        """Failover step 11: the ZooKeeper request first, then moves persisted in topic znodes."""
        handled = self.on_zk_reassignment()
        ctx = self._ctx
        for tp in sorted(ctx.partitions_being_reassigned - handled):
            self.on_partition_reassignment(tp, ctx.partition_full_replica_assignment(tp))

    def on_zk_reassignment(self) -> set[TopicPartition]:
        """Handle ``/admin/reassign_partitions`` (§9.3, ZooKeeper path: no replica validation)."""
        requested = self._store.get_partition_reassignment()
        if requested is None:
            return set()
        ctx = self._ctx
        handled: set[TopicPartition] = set()
        rejected: dict[TopicPartition, str] = {}
        for tp, target in sorted(requested.items()):
            current = ctx.partition_full_replica_assignment(tp)
            if ctx.is_topic_queued_up_for_deletion(tp.topic) or not current.replicas:
                rejected[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
                continue
            if not target:
                rejected[tp] = "INVALID_REPLICA_ASSIGNMENT"
                continue
            self.on_partition_reassignment(tp, current.reassign_to(target))
            handled.add(tp)
        if rejected:
            self._scl.record(
                RecordKind.REASSIGNMENT_REJECTED, partitions={str(tp): why for tp, why in rejected.items()}
            )
            self._remove_from_zk_request(set(rejected), only_if_target=None)
        return handled

    def on_api_event(self, event: ApiPartitionReassignment) -> None:
        """Handle the API event and always answer its caller (NOT_CONTROLLER when not active, or
        when the controller moves mid-way)."""
        if not self._client.is_active:
            event.callback(int(ErrorCode.NOT_CONTROLLER), {})
            return
        try:
            results = self.on_api_reassignment(event.reassignments)
        except ControllerMovedError:
            event.callback(int(ErrorCode.NOT_CONTROLLER), {})
            raise
        except BaseException:
            event.callback(int(ErrorCode.UNKNOWN_SERVER_ERROR), {})
            raise
        event.callback(int(ErrorCode.NONE), results)

    def on_api_reassignment(
        self, reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[int, str]]:
        """AlterPartitionReassignments (§9.3, API path): validate, drop from the ZooKeeper request,
        then start, retarget or cancel (None). Returns ``{partition: (error code, message)}``."""
        ctx = self._ctx
        results: dict[TopicPartition, tuple[int, str]] = {}
        accepted: dict[TopicPartition, tuple[ReplicaAssignment, bool]] = {}
        live = ctx.live_broker_ids
        for tp, target in sorted(reassignments.items()):
            current = ctx.partition_full_replica_assignment(tp)
            if ctx.is_topic_queued_up_for_deletion(tp.topic) or not current.replicas:
                results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"unknown partition {tp}")
                continue
            if target is None:
                if not current.is_being_reassigned:
                    results[tp] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), f"no reassignment of {tp} in progress")
                    continue
                accepted[tp] = (current.reassign_to(current.origin_replicas), True)
                continue
            problem = _invalid_target(target)
            if problem is None:
                wanted = current.reassign_to(target)
                dead = sorted(r for r in wanted.adding_replicas if r not in live)
                if dead:
                    problem = f"replica assignment has brokers that are not alive: {dead}"
                else:
                    accepted[tp] = (wanted, False)
                    continue
            results[tp] = (int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), problem)
        if accepted:
            self._remove_from_zk_request(set(accepted), only_if_target=None)
        for tp, (wanted, cancel) in accepted.items():
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"topic {tp.topic} is being deleted")
                continue
            try:
                if cancel:
                    self._cancel(tp, wanted)
                else:
                    self.on_partition_reassignment(tp, wanted)
            except ControllerMovedError:
                raise
            except Exception as exc:  # one partition's failure must not hide the others' results
                logger.exception("reassignment of %s failed", tp)
                results[tp] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}")
                continue
            results[tp] = (int(ErrorCode.NONE), "")
        return results

    def _cancel(self, tp: TopicPartition, revert: ReplicaAssignment) -> None:
        """KIP-455 cancel: RS := ORS (U1 rewrites the topic znode without AR/RR, U3 stops the adding
        replicas), then the completion path settles leadership and UpdateMetadata."""
        ctx = self._ctx
        current = ctx.partition_full_replica_assignment(tp)
        # Leaving the set first makes the completion path record "cancelled" (below), not "completed".
        ctx.partitions_being_reassigned.discard(tp)
        self._record_phase("cancelled", tp, current.origin_replicas, current.target_replicas)
        self.on_partition_reassignment(tp, revert)

    def _record_phase(self, phase: str, tp: TopicPartition, origin: Sequence[int], target: Sequence[int]) -> None:
        """One ``reassignment`` record: a partition's reassignment started, completed or was cancelled."""
        self._scl.record(
            RecordKind.REASSIGNMENT,
            phase=phase,
            entity=str(tp),
            topic=tp.topic,
            partition=tp.partition,
            origin_replicas=list(origin),
            target_replicas=list(target),
        )

    def maybe_complete(self, tp: TopicPartition) -> None:
        ctx = self._ctx
        if tp in ctx.partitions_being_reassigned and self._is_complete(tp, ctx.partition_full_replica_assignment(tp)):
            self.on_partition_reassignment(tp, ctx.partition_full_replica_assignment(tp))

    # -- the sequence (§9.2) ------------------------------------------------------------------------

    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self._ctx
        self._deletion.mark_topics_ineligible({tp.topic})
        current = ctx.partition_full_replica_assignment(tp)
        started = tp not in ctx.partitions_being_reassigned
        if current != reassignment:
            self._write_assignment(tp, reassignment)
            unneeded = set(current.replicas) - set(reassignment.replicas)
            if unneeded:
                self._stop_removed_replicas(tp, sorted(unneeded))
        if reassignment.is_being_reassigned:
            ctx.partitions_being_reassigned.add(tp)
            if started:
                self._record_phase("started", tp, reassignment.origin_replicas, reassignment.target_replicas)
        if self._is_complete(tp, reassignment):
            self._complete(tp, reassignment)
        else:
            self._start_copy(tp, reassignment)

    def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        read = self._store.get_partition_states([tp])[tp]
        if read.code is not ZkCode.OK or read.state is None:
            return False
        return set(assignment.target_replicas) <= set(read.state.leader_and_isr.isr)

    def _start_copy(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Phase A: epoch bump + LeaderAndIsr (ORS isNew=false, AR isNew=true); AR -> NewReplica."""
        recipients = {b: False for b in assignment.origin_replicas}
        recipients.update({b: True for b in assignment.adding_replicas})
        if self._client.update_leader_epoch_and_send_request(tp, assignment, recipients) is None:
            logger.warning("reassignment of %s: leader epoch bump skipped (newer controller)", tp)
        for replica in assignment.adding_replicas:
            self._replica_sm.handle_state_changes([PartitionAndReplica(tp, replica)], _R.NEW)

    def _complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Phase B: leadership into TRS, old replicas stopped and deleted, znodes cleaned up."""
        ctx = self._ctx
        target = assignment.target_replicas
        self._replica_sm.handle_state_changes(
            [PartitionAndReplica(tp, r) for r in assignment.adding_replicas], _R.ONLINE
        )
        final = ReplicaAssignment(target)
        ctx.update_partition_full_replica_assignment(tp, final)
        self._move_leader_if_required(tp, final)
        removing = list(assignment.removing_replicas)
        if removing:
            self._stop_removed_replicas(tp, removing)
        self._write_assignment(tp, final, update_context=False)
        self._remove_from_zk_request({tp}, only_if_target=target)
        was_reassigning = tp in ctx.partitions_being_reassigned
        ctx.partitions_being_reassigned.discard(tp)
        self._client.send_update_metadata([tp])
        if was_reassigning or assignment.is_being_reassigned:
            self._record_phase("completed", tp, assignment.origin_replicas, target)
        self._deletion.resume_deletion_for_topics({tp.topic})

    def _move_leader_if_required(self, tp: TopicPartition, final: ReplicaAssignment) -> None:
        info = self._ctx.partition_leadership_info(tp)
        leader = -1 if info is None else info.leader_and_isr.leader
        if leader not in final.replicas or not self._ctx.is_replica_online(leader, tp):
            self._partition_sm.handle_state_changes([tp], PartitionState.ONLINE, ReassignStrategy())
        else:
            self._client.update_leader_epoch_and_send_request(tp, final, dict.fromkeys(final.replicas, False))

    def _stop_removed_replicas(self, tp: TopicPartition, replicas: list[int]) -> None:
        removed = [PartitionAndReplica(tp, r) for r in replicas]
        for state in (_R.OFFLINE, _R.DELETION_STARTED, _R.DELETION_SUCCESSFUL, _R.NON_EXISTENT):
            self._replica_sm.handle_state_changes(removed, state)

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment, update_context: bool = True) -> None:
        """Rewrite the whole topic znode with this partition's assignment replaced (fenced)."""
        ctx = self._ctx
        partitions = {p.partition: a for p, a in ctx.partition_full_replica_assignment_for_topic(tp.topic).items()}
        if tp.partition not in partitions:
            raise IllegalStateError(f"topic {tp.topic} has no current assignment for partition {tp.partition}")
        partitions[tp.partition] = assignment
        try:
            self._store.set_topic_assignment(tp.topic, ctx.topic_id(tp.topic), partitions, ctx.epoch_zk_version)
        except ControllerMovedError:
            raise
        if update_context:
            ctx.update_partition_full_replica_assignment(tp, assignment)

    def _remove_from_zk_request(self, done: set[TopicPartition], only_if_target: tuple[int, ...] | None) -> None:
        """B7: drop finished partitions from ``/admin/reassign_partitions`` (delete it when empty)."""
        requested = self._store.get_partition_reassignment()
        if requested is None:
            return
        remaining = {
            tp: target
            for tp, target in requested.items()
            if not (tp in done and (only_if_target is None or tuple(target) == tuple(only_if_target)))
        }
        if len(remaining) == len(requested):
            return
        zkv = self._ctx.epoch_zk_version
        if remaining:
            self._store.set_partition_reassignment(remaining, zkv)
        else:
            self._store.delete_partition_reassignment(zkv)
            self._client.enqueue(ZkPartitionReassignment())


def _invalid_target(target: tuple[int, ...]) -> str | None:
    """The API path's replica validation (§9.3); None when the target may be used."""
    if not target:
        return "empty replica list specified in partition reassignment"
    if len(set(target)) != len(target):
        return f"duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(r < 0 for r in target):
        return f"invalid broker id in replica list: {list(target)}"
    return None
