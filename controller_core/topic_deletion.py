"""Topic deletion, Kafka's ``TopicDeletionManager`` (reference §10).

A topic queued for deletion (``/admin/delete_topics/<t>``) has its partitions taken offline and
non-existent, then every replica goes OfflineReplica -> ReplicaDeletionStarted (StopReplica with
delete) and, on the broker's answer, ReplicaDeletionSuccessful or ReplicaDeletionIneligible. When
every replica succeeded the topic's znodes are removed (fenced). Deletion halts (the topic is
*ineligible*) while a replica's broker is down or a partition is being reassigned, and resumes when
the broker returns or the reassignment completes: nothing is lost, nothing is deleted twice.

As Kafka's manager reaches its controller only through a ``DeletionClient``, this one holds the
context and the two state machines it drives and a ``DeletionClient`` for the three things that
leave the event thread (the topic's znodes and watches, the deletion requests, UpdateMetadata):
it can be exercised, and reasoned about, without a ``Controller``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Protocol

from controller_core.context import ControllerContext
from controller_core.model import PartitionAndReplica, TopicPartition
from controller_core.partition_state_machine import PartitionStateMachine
from controller_core.protocol.messages import ErrorCode
from controller_core.record_kinds import RecordKind
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.state_change_log import StateChangeLogger
from controller_core.states import PartitionState, ReplicaState
from controller_core.zk import paths

logger = logging.getLogger(__name__)

_R = ReplicaState


class DeletionClient(Protocol):
    """What topic deletion needs beyond the context and the state machines (Kafka's ``DeletionClient``)."""

    def delete_topic(self, topic: str) -> None:
        """Stop watching ``topic`` and remove its znodes: the topic tree, its configs, its request."""
        ...

    def delete_topic_deletions(self, topics: Sequence[str]) -> None:
        """Remove the ``/admin/delete_topics/<t>`` requests of ``topics`` (fenced)."""
        ...

    def send_update_metadata(self, partitions: Sequence[TopicPartition]) -> None:
        """UpdateMetadata for ``partitions`` to every live or shutting-down broker."""
        ...


class DeletionStore(Protocol):
    """The fenced deletes ``ControllerDeletionClient`` makes (``ZkStore`` implements them)."""

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None: ...

    def delete_topic_configs(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None: ...

    def delete_topic_deletions(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None: ...


class ControllerDeletionClient:
    """The controller's ``DeletionClient``: its store, watch registry and request batch, fenced with the
    context's current epoch."""

    def __init__(
        self,
        ctx: ControllerContext,
        store: DeletionStore,
        unwatch: Callable[[str], None],
        batch: ControllerBrokerRequestBatch,
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._unwatch = unwatch
        self._batch = batch

    def delete_topic(self, topic: str) -> None:
        self._unwatch(paths.topic_path(topic))
        self._unwatch(paths.topic_config_path(topic))
        zkv = self._ctx.epoch_zk_version
        self._store.delete_topic_recursively(topic, zkv)
        self._store.delete_topic_configs([topic], zkv)
        self._store.delete_topic_deletions([topic], zkv)

    def delete_topic_deletions(self, topics: Sequence[str]) -> None:
        self._store.delete_topic_deletions(topics, self._ctx.epoch_zk_version)

    def send_update_metadata(self, partitions: Sequence[TopicPartition]) -> None:
        batch = self._batch
        batch.new_batch()
        batch.add_update_metadata_request_for_brokers(list(self._ctx.live_or_shutting_down_broker_ids), partitions)
        batch.send_requests_to_brokers(self._ctx.epoch)


class TopicDeletionManager:
    """Deletes queued topics for one controller term (event thread only)."""

    def __init__(
        self,
        ctx: ControllerContext,
        replica_sm: ReplicaStateMachine,
        partition_sm: PartitionStateMachine,
        scl: StateChangeLogger,
        client: DeletionClient,
        *,
        delete_topic_enable: bool,
    ) -> None:
        self._ctx = ctx
        self._replica_sm = replica_sm
        self._partition_sm = partition_sm
        self._scl = scl
        self._client = client
        self._enabled = delete_topic_enable

    # -- entry points -------------------------------------------------------------------------------

    def init(self, to_delete: set[str], ineligible: set[str]) -> None:
        ctx = self._ctx
        if not self._enabled:
            self._client.delete_topic_deletions(sorted(to_delete))
            return
        ctx.queue_topic_deletion(to_delete)
        ctx.mark_topics_ineligible_for_deletion(ineligible & set(ctx.topics_to_be_deleted))

    def try_topic_deletion(self) -> None:
        if self._enabled:
            self._resume_deletions()

    def on_deletion_requested(self, requested: set[str]) -> None:
        """``TopicDeletion`` event (§10.1 step 2)."""
        ctx = self._ctx
        unknown = requested - set(ctx.all_topics)
        if unknown:
            self._client.delete_topic_deletions(sorted(unknown))
        topics = requested - unknown
        if not topics:
            return
        if not self._enabled:
            logger.info("delete.topic.enable=false: ignoring deletion of %s", sorted(topics))
            self._client.delete_topic_deletions(sorted(topics))
            return
        new = topics - set(ctx.topics_to_be_deleted)
        if new:
            self._scl.record(RecordKind.TOPIC_DELETION, phase="queued", topics=sorted(new))
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & topics
        ctx.queue_topic_deletion(topics)
        self.mark_topics_ineligible(reassigning)
        self._resume_deletions()

    def on_stop_replica_response(
        self, broker_id: int, request_error: int, errors: Mapping[TopicPartition, int]
    ) -> None:
        failed = {
            PartitionAndReplica(tp, broker_id) for tp, e in errors.items() if request_error or e != ErrorCode.NONE
        }
        succeeded = {PartitionAndReplica(tp, broker_id) for tp in errors} - failed
        if failed:
            self.fail_replica_deletion(failed)
        if succeeded:
            self._complete_replica_deletion(succeeded)

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        ctx = self._ctx
        queued = set(topics) & set(ctx.topics_to_be_deleted)
        if queued:
            ctx.mark_topics_eligible_for_deletion(queued)
            self._resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        ctx = self._ctx
        queued = set(ctx.topics_to_be_deleted)
        mine = [r for r in replicas if r.topic_partition.topic in queued]
        if not mine:
            return
        self._replica_sm.handle_state_changes(mine, _R.DELETION_INELIGIBLE)
        self.mark_topics_ineligible({r.topic_partition.topic for r in mine})
        self._resume_deletions()

    def mark_topics_ineligible(self, topics: Iterable[str]) -> None:
        if not self._enabled:
            return
        ctx = self._ctx
        ineligible = set(topics) & set(ctx.topics_to_be_deleted)
        if ineligible:
            ctx.mark_topics_ineligible_for_deletion(ineligible)

    # -- the procedure ------------------------------------------------------------------------------

    def _complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        queued = set(self._ctx.topics_to_be_deleted)
        mine = [r for r in replicas if r.topic_partition.topic in queued]
        if mine:
            self._replica_sm.handle_state_changes(mine, _R.DELETION_SUCCESSFUL)
        self._resume_deletions()

    def _is_eligible(self, topic: str) -> bool:
        ctx = self._ctx
        return (
            ctx.is_topic_queued_up_for_deletion(topic)
            and not ctx.is_any_replica_in_state(topic, _R.DELETION_STARTED)
            and topic not in ctx.topics_ineligible_for_deletion
        )

    def _resume_deletions(self) -> None:
        ctx = self._ctx
        retry: set[str] = set()
        start: set[str] = set()
        for topic in sorted(ctx.topics_to_be_deleted):
            if ctx.are_all_replicas_in_state(topic, _R.DELETION_SUCCESSFUL):
                self._complete_delete_topic(topic)
                continue
            if not ctx.is_any_replica_in_state(topic, _R.DELETION_STARTED) and ctx.is_any_replica_in_state(
                topic, _R.DELETION_INELIGIBLE
            ):
                retry.add(topic)
            if self._is_eligible(topic):
                start.add(topic)
        if retry:
            replicas = [r for t in sorted(retry) for r in ctx.replicas_in_state(t, _R.DELETION_INELIGIBLE)]
            self._replica_sm.handle_state_changes(replicas, _R.OFFLINE)
        if start:
            self._on_topic_deletion(start)

    def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self._ctx
        fresh = sorted(topics - set(ctx.topics_with_deletion_started))
        if fresh:
            partitions = [tp for t in fresh for tp in ctx.partitions_for_topic(t)]
            self._partition_sm.handle_state_changes(partitions, PartitionState.OFFLINE)
            self._partition_sm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            ctx.begin_topic_deletion(fresh)
            self._scl.record(RecordKind.TOPIC_DELETION, phase="started", topics=fresh)
        self._client.send_update_metadata([tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)])
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        topics_with_dead: set[str] = set()
        for topic in sorted(topics):
            for replica in sorted(ctx.replicas_for_topic(topic)):
                if not ctx.is_replica_online(replica.replica, replica.topic_partition):
                    dead.append(replica)
                    topics_with_dead.add(topic)
                elif ctx.replica_state(replica) is not _R.DELETION_SUCCESSFUL:
                    retry.append(replica)
        if dead:
            self._replica_sm.handle_state_changes(dead, _R.DELETION_INELIGIBLE)
        if retry:
            self._replica_sm.handle_state_changes(retry, _R.OFFLINE)
            self._replica_sm.handle_state_changes(retry, _R.DELETION_STARTED)
        if topics_with_dead:
            self.mark_topics_ineligible(topics_with_dead)

    def _complete_delete_topic(self, topic: str) -> None:
        ctx = self._ctx
        successful = ctx.replicas_in_state(topic, _R.DELETION_SUCCESSFUL)
        self._replica_sm.handle_state_changes(sorted(successful), _R.NON_EXISTENT)
        self._client.delete_topic(topic)
        ctx.remove_topic(topic)
        self._scl.record(RecordKind.TOPIC_DELETION, phase="completed", topics=[topic])
        logger.info("topic %s deleted", topic)
