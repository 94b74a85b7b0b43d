"""The replica state machine (Kafka's ``ZkReplicaStateMachine``, reference §3).

Tracks one state per (partition, broker) replica and performs the side effects of moving between
them: LeaderAndIsr / StopReplica requests, and for OfflineReplica the removal of the replica from
the partition's ISR in ZooKeeper.

Failure behaviour (§3.2, §15.7):

* Invalid transitions are recorded as failed changes in the state-change log and left unchanged;
  they never raise.
* ``ControllerMovedError`` (a fenced write found a newer controller) propagates: the caller resigns.
* Any other error is logged and swallowed; the batch is then left as it was so the next
  ``new_batch`` reports the breach.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from controller_core.context import ControllerContext
from controller_core.errors import ControllerMovedError, StateChangeFailedError
from controller_core.model import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)
from controller_core.ports import PartitionStateStore, ZkCode
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.state_change_log import StateChangeLogger
from controller_core.states import ReplicaState

logger = logging.getLogger(__name__)

_R = ReplicaState


class ReplicaStateMachine:
    """Move replicas between the seven replica states, with Kafka's side effects.

    Example::

        rsm = ReplicaStateMachine(ctx, store, ControllerBrokerRequestBatch(ctx, transport, log), log)
        rsm.startup()                                    # at failover
        rsm.handle_state_changes(ctx.replicas_on_brokers({3}), ReplicaState.OFFLINE)
    """

    def __init__(
        self,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
        state_change_logger: StateChangeLogger,
    ) -> None:
        self._ctx = context
        self._store = store
        self._batch = batch
        self._log = state_change_logger

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> None:
        """Initialize replica states from the context, then bring online and offline replicas in line.

        1. Online replicas -> OnlineReplica; replicas on dead brokers -> ReplicaDeletionIneligible,
           which lets topic deletion treat them as failed and lets them later go Offline/Online.
        2. Online replicas -> OnlineReplica again (LeaderAndIsr to each, for partitions with a leader).
        3. Offline replicas -> OfflineReplica (ISR shrink in ZooKeeper, LeaderAndIsr to the others).
        """
        ctx = self._ctx
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        for tp, assignment in ctx.iter_assignments():
            online_set = ctx.online_replica_set(tp)
            for replica_id in assignment.replicas:
                replica = PartitionAndReplica(tp, replica_id)
                if replica_id in online_set:
                    ctx.put_replica_state(replica, _R.ONLINE)
                    online.append(replica)
                else:
                    ctx.put_replica_state(replica, _R.DELETION_INELIGIBLE)
                    offline.append(replica)
        # Initializations, not transitions: one summary instead of a record per replica.
        self._log.record(
            "states_initialized",
            machine="replica",
            counts={str(_R.ONLINE): len(online), str(_R.DELETION_INELIGIBLE): len(offline)},
        )
        self.handle_state_changes(online, _R.ONLINE)
        self.handle_state_changes(offline, _R.OFFLINE)

    def shutdown(self) -> None:
        """Nothing to release: states die with the context."""
        logger.info("replica state machine stopped")

    # -- transitions -----------------------------------------------------------------------------

    def handle_state_changes(self, replicas: Iterable[PartitionAndReplica], target: ReplicaState) -> None:
        """Move ``replicas`` to ``target``, sending the resulting requests as one batch."""
        replicas = list(replicas)
        if not replicas:
            return
        try:
            self._batch.new_batch()
            by_broker: dict[int, list[PartitionAndReplica]] = {}
            for replica in replicas:
                group = by_broker.get(replica.replica)
                if group is None:
                    by_broker[replica.replica] = [replica]
                else:
                    group.append(replica)
            for broker_id, group in by_broker.items():
                self._do_handle_state_changes(broker_id, group, target)
            self._batch.send_requests_to_brokers(self._ctx.epoch)
        except ControllerMovedError:
            logger.error("controller moved while moving %d replicas to %s", len(replicas), target)
            raise
        except Exception:
            logger.exception("error while moving some of %d replicas to %s", len(replicas), target)

    def _do_handle_state_changes(
        self, broker_id: int, replicas: Sequence[PartitionAndReplica], target: ReplicaState
    ) -> None:
        ctx = self._ctx
        for replica in replicas:
            ctx.put_replica_state_if_not_exists(replica, _R.NON_EXISTENT)
        valid, invalid = ctx.check_valid_replica_state_change(replicas, target)
        if invalid:
            self._log_invalid(invalid, target)
        if not valid:
            return
        match target:
            case _R.NEW:
                self._to_new(broker_id, valid)
            case _R.ONLINE:
                self._to_online(broker_id, valid)
            case _R.OFFLINE:
                self._to_offline(broker_id, valid)
            case _R.DELETION_STARTED:
                for replica in valid:
                    self._put(replica, _R.DELETION_STARTED)
                    self._batch.add_stop_replica_request_for_brokers(
                        (broker_id,), replica.topic_partition, delete_partition=True
                    )
            case _R.DELETION_INELIGIBLE | _R.DELETION_SUCCESSFUL:
                for replica in valid:
                    self._put(replica, target)
            case _R.NON_EXISTENT:
                for replica in valid:
                    tp = replica.topic_partition
                    current = ctx.replica_state(replica)
                    assignment = ctx.partition_full_replica_assignment(tp)
                    ctx.update_partition_full_replica_assignment(tp, assignment.remove_replica(broker_id))
                    ctx.remove_replica_state(replica)
                    self._log.replica_transition(replica, current, _R.NON_EXISTENT)

    def _put(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        current = self._ctx.replica_state(replica)
        self._ctx.put_replica_state(replica, state)
        if current is not state:
            # Self-transitions (Online -> Online at every failover, for every replica) change no
            # state; their effects (an ISR shrink) have records of their own.
            self._log.replica_transition(replica, current, state)

    def _to_new(self, broker_id: int, replicas: Sequence[PartitionAndReplica]) -> None:
        ctx = self._ctx
        for replica in replicas:
            tp = replica.topic_partition
            info = ctx.partition_leadership_info(tp)
            if info is not None and info.leader_and_isr.leader == broker_id:
                # The leader must never be told it is a brand-new follower.
                self._log.failed_replica_change(
                    replica,
                    ctx.replica_state(replica),
                    _R.NEW,
                    StateChangeFailedError(
                        f"Replica {broker_id} for partition {tp} cannot be moved to NewReplica state "
                        "as it is being requested to become leader"
                    ),
                )
                continue
            if info is not None:
                self._batch.add_leader_and_isr_request_for_brokers(
                    (broker_id,), tp, info, ctx.partition_full_replica_assignment(tp), is_new=True
                )
            self._put(replica, _R.NEW)

    def _to_online(self, broker_id: int, replicas: Sequence[PartitionAndReplica]) -> None:
        ctx = self._ctx
        for replica in replicas:
            tp = replica.topic_partition
            if ctx.replica_state(replica) is _R.NEW:
                assignment = ctx.partition_full_replica_assignment(tp)
                if broker_id not in assignment.replicas:
                    logger.error(
                        "adding replica %s that is not part of the assignment %s of %s", broker_id, assignment, tp
                    )
                    ctx.update_partition_full_replica_assignment(
                        tp, assignment.with_replicas((*assignment.replicas, broker_id))
                    )
            else:
                info = ctx.partition_leadership_info(tp)
                if info is not None:
                    self._batch.add_leader_and_isr_request_for_brokers(
                        (broker_id,), tp, info, ctx.partition_full_replica_assignment(tp), is_new=False
                    )
            self._put(replica, _R.ONLINE)

    def _to_offline(self, broker_id: int, replicas: Sequence[PartitionAndReplica]) -> None:
        ctx = self._ctx
        batch = self._batch
        with_leadership: list[TopicPartition] = []
        without_leadership: list[PartitionAndReplica] = []
        for replica in replicas:
            tp = replica.topic_partition
            batch.add_stop_replica_request_for_brokers((broker_id,), tp, delete_partition=False)
            if ctx.partition_leadership_info(tp) is None:
                without_leadership.append(replica)
            else:
                with_leadership.append(tp)

        updated = self._remove_replicas_from_isr(broker_id, with_leadership)
        for tp, info in updated.items():
            if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                # Every other assigned replica learns the new ISR (not only the leader, §15.16).
                recipients = [r for r in ctx.partition_replica_assignment(tp) if r != broker_id]
                batch.add_leader_and_isr_request_for_brokers(
                    recipients, tp, info, ctx.partition_full_replica_assignment(tp), is_new=False
                )
            self._put(PartitionAndReplica(tp, broker_id), _R.OFFLINE)

        if without_leadership:
            registered = ctx.live_or_shutting_down_broker_ids
            for replica in without_leadership:
                batch.add_update_metadata_request_for_brokers(registered, (replica.topic_partition,))
                self._put(replica, _R.OFFLINE)

    # -- ISR removal (§3.3) -------------------------------------------------------------------------

    def _remove_replicas_from_isr(
        self, broker_id: int, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take ``broker_id`` out of each partition's ISR in ZooKeeper, retrying version conflicts.

        Returns the partitions that succeeded with their new cached state; failures are logged
        as failed changes and keep their replica state.
        """
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = list(partitions)
        while remaining:
            finished, remaining = self._do_remove_replicas_from_isr(broker_id, remaining)
            for tp, outcome in finished.items():
                if isinstance(outcome, Exception):
                    replica = PartitionAndReplica(tp, broker_id)
                    self._log.failed_replica_change(replica, self._ctx.replica_state(replica), _R.OFFLINE, outcome)
                else:
                    results[tp] = outcome
            if remaining:
                logger.info(
                    "retrying removal of replica %s from the ISR of %d partitions after version conflicts",
                    broker_id,
                    len(remaining),
                )
        return results

    def _do_remove_replicas_from_isr(
        self, broker_id: int, partitions: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception], list[TopicPartition]]:
        ctx = self._ctx
        finished: dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception] = {}
        try:
            reads = self._store.get_partition_states(partitions)
        except ControllerMovedError:
            raise
        except Exception as e:
            return dict.fromkeys(partitions, e), []

        current: dict[TopicPartition, LeaderAndIsr] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            read = reads.get(tp)
            if read is None or read.code == ZkCode.NO_NODE or (read.code == ZkCode.OK and read.state is None):
                # Nothing in ZooKeeper: expected for a topic being deleted, an error otherwise.
                if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                    finished[tp] = StateChangeFailedError(
                        f"Failed to change state of replica {broker_id} for partition {tp} since the leader "
                        "and isr path in zookeeper is empty"
                    )
                continue
            if read.code != ZkCode.OK or read.state is None:
                finished[tp] = StateChangeFailedError(f"reading the state of {tp} failed with {read.code}")
                continue
            if read.state.controller_epoch > ctx.epoch:
                finished[tp] = StateChangeFailedError(
                    f"Leader and isr path of {tp} written by another controller (epoch "
                    f"{read.state.controller_epoch} > {ctx.epoch}); this controller may have gone through "
                    "a soft failure. Aborting state change."
                )
                continue
            leader_and_isr = read.state.leader_and_isr
            if broker_id not in leader_and_isr.isr:
                current[tp] = leader_and_isr
                continue
            new_leader = NO_LEADER if leader_and_isr.leader == broker_id else leader_and_isr.leader
            # Never write an empty ISR: the last member stays, even when it is offline (§15.2).
            isr = leader_and_isr.isr
            new_isr = isr if len(isr) == 1 else tuple(r for r in isr if r != broker_id)
            adjusted[tp] = leader_and_isr.new_leader_and_isr(new_leader, new_isr)

        retry: list[TopicPartition] = []
        if adjusted:
            result = self._store.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            retry = result.needs_retry
            for tp, outcome in result.finished.items():
                if isinstance(outcome, Exception):
                    finished[tp] = outcome
                else:
                    current[tp] = outcome
                    before = reads[tp].state
                    self._log.isr_change(tp, None if before is None else before.leader_and_isr, outcome, broker_id)

        for tp, leader_and_isr in current.items():
            info = LeaderIsrAndControllerEpoch(leader_and_isr, ctx.epoch)
            ctx.put_partition_leadership_info(tp, info)
            finished[tp] = info
        return finished, retry

    # -- logging -----------------------------------------------------------------------------------

    def _log_invalid(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
        ctx = self._ctx
        allowed = ", ".join(sorted(target.valid_previous_states))
        error = f"IllegalStateError: replica must be in one of [{allowed}] before moving to {target}"
        for replica in replicas:
            self._log.failed_replica_change(replica, ctx.replica_state(replica), target, error)
        logger.warning(
            "%d replicas cannot move to %s: they must be in one of [%s] first", len(replicas), target, allowed
        )
