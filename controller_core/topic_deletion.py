"""Topic deletion, Kafka's ``TopicDeletionManager`` (reference §10).

A topic queued for deletion (``/admin/delete_topics/<t>``) has its partitions taken offline and
non-existent, then every replica goes OfflineReplica -> ReplicaDeletionStarted (StopReplica with
delete) and, on the broker's answer, ReplicaDeletionSuccessful or ReplicaDeletionIneligible. When
every replica succeeded the topic's znodes are removed (fenced). Deletion halts (the topic is
*ineligible*) while a replica's broker is down or a partition is being reassigned, and resumes when
the broker returns or the reassignment completes: nothing is lost, nothing is deleted twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from controller_core.model import PartitionAndReplica, TopicPartition
from controller_core.protocol.messages import ErrorCode
from controller_core.states import PartitionState, ReplicaState
from controller_core.zk import paths

if TYPE_CHECKING:
    from controller_core.controller import Controller

logger = logging.getLogger(__name__)

_R = ReplicaState


class TopicDeletionManager:
    """Deletes queued topics for one controller term (event thread only)."""

    def __init__(self, controller: Controller) -> None:
        self._c = controller

    @property
    def _enabled(self) -> bool:
        return self._c.config.delete_topic_enable

    # -- entry points -------------------------------------------------------------------------------

    def init(self, to_delete: set[str], ineligible: set[str]) -> None:
        c = self._c
        if not self._enabled:
            c.store.delete_topic_deletions(sorted(to_delete), c.ctx.epoch_zk_version)
            return
        c.ctx.queue_topic_deletion(to_delete)
        c.ctx.mark_topics_ineligible_for_deletion(ineligible & set(c.ctx.topics_to_be_deleted))

    def try_topic_deletion(self) -> None:
        if self._enabled:
            self._resume_deletions()

    def on_deletion_requested(self, requested: set[str]) -> None:
        """``TopicDeletion`` event (§10.1 step 2)."""
        c = self._c
        ctx = c.ctx
        unknown = requested - set(ctx.all_topics)
        if unknown:
            c.store.delete_topic_deletions(sorted(unknown), ctx.epoch_zk_version)
        topics = requested - unknown
        if not topics:
            return
        if not self._enabled:
            logger.info("delete.topic.enable=false: ignoring deletion of %s", sorted(topics))
            c.store.delete_topic_deletions(sorted(topics), ctx.epoch_zk_version)
            return
        new = topics - set(ctx.topics_to_be_deleted)
        if new:
            c.scl.record("topic_deletion", phase="queued", topics=sorted(new))
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
        ctx = self._c.ctx
        queued = set(topics) & set(ctx.topics_to_be_deleted)
        if queued:
            ctx.mark_topics_eligible_for_deletion(queued)
            self._resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        ctx = self._c.ctx
        queued = set(ctx.topics_to_be_deleted)
        mine = [r for r in replicas if r.topic_partition.topic in queued]
        if not mine:
            return
        self._c.replica_sm.handle_state_changes(mine, _R.DELETION_INELIGIBLE)
        self.mark_topics_ineligible({r.topic_partition.topic for r in mine})
        self._resume_deletions()

    def mark_topics_ineligible(self, topics: Iterable[str]) -> None:
        if not self._enabled:
            return
        ctx = self._c.ctx
        ineligible = set(topics) & set(ctx.topics_to_be_deleted)
        if ineligible:
            ctx.mark_topics_ineligible_for_deletion(ineligible)

    # -- the procedure ------------------------------------------------------------------------------

    def _complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        queued = set(self._c.ctx.topics_to_be_deleted)
        mine = [r for r in replicas if r.topic_partition.topic in queued]
        if mine:
            self._c.replica_sm.handle_state_changes(mine, _R.DELETION_SUCCESSFUL)
        self._resume_deletions()

    def _is_eligible(self, topic: str) -> bool:
        ctx = self._c.ctx
        return (
            ctx.is_topic_queued_up_for_deletion(topic)
            and not ctx.is_any_replica_in_state(topic, _R.DELETION_STARTED)
            and topic not in ctx.topics_ineligible_for_deletion
        )

    def _resume_deletions(self) -> None:
        ctx = self._c.ctx
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
            self._c.replica_sm.handle_state_changes(replicas, _R.OFFLINE)
        if start:
            self._on_topic_deletion(start)

    def _on_topic_deletion(self, topics: set[str]) -> None:
        c = self._c
        ctx = c.ctx
        fresh = sorted(topics - set(ctx.topics_with_deletion_started))
        if fresh:
            partitions = [tp for t in fresh for tp in ctx.partitions_for_topic(t)]
            c.partition_sm.handle_state_changes(partitions, PartitionState.OFFLINE)
            c.partition_sm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            ctx.begin_topic_deletion(fresh)
            c.scl.record("topic_deletion", phase="started", topics=fresh)
        all_partitions = [tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)]
        c.batch.new_batch()
        c.batch.add_update_metadata_request_for_brokers(list(ctx.live_or_shutting_down_broker_ids), all_partitions)
        c.batch.send_requests_to_brokers(ctx.epoch)
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
            c.replica_sm.handle_state_changes(dead, _R.DELETION_INELIGIBLE)
        if retry:
            c.replica_sm.handle_state_changes(retry, _R.OFFLINE)
            c.replica_sm.handle_state_changes(retry, _R.DELETION_STARTED)
        if topics_with_dead:
            self.mark_topics_ineligible(topics_with_dead)

    def _complete_delete_topic(self, topic: str) -> None:
        c = self._c
        ctx = c.ctx
        c.watches.unregister(paths.topic_path(topic))
        c.watches.unregister(paths.topic_config_path(topic))
        successful = ctx.replicas_in_state(topic, _R.DELETION_SUCCESSFUL)
        c.replica_sm.handle_state_changes(sorted(successful), _R.NON_EXISTENT)
        c.store.delete_topic_recursively(topic, ctx.epoch_zk_version)
        c.store.delete_topic_configs([topic], ctx.epoch_zk_version)
        c.store.delete_topic_deletions([topic], ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        c.scl.record("topic_deletion", phase="completed", topics=[topic])
        logger.info("topic %s deleted", topic)
