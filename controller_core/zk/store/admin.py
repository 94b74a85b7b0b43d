"""Admin request znodes (reference §1.2.5, §1.2.6, §10): reassignment, preferred election, topic deletion.

Kafka's tools create them unfenced (``create_*_request``, ``mark_topic_for_deletion``; a pending
request makes a second one fail with NODEEXISTS); the controller reads them, rewrites or deletes
them fenced once handled. Invalid JSON is logged and read as an empty request, as Kafka's
controller does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from kazoo.exceptions import NodeExistsError

from controller_core.errors import ZkOperationError
from controller_core.model import TopicPartition
from controller_core.ports import ZkCode
from controller_core.zk import codecs, paths
from controller_core.zk.store.engine import FencedMultiEngine
from controller_core.zk.store.wire import CREATE, DELETE, SET, Op

logger = logging.getLogger(__name__)
T = TypeVar("T")


class AdminZnodes(FencedMultiEngine):
    """``/admin/reassign_partitions``, ``/admin/preferred_replica_election``, ``/admin/delete_topics``."""

    def _admin_request(self, path: str, decode: Callable[[bytes], T], empty: Callable[[], T]) -> T | None:
        """An ``/admin`` request znode decoded; None when absent. Invalid JSON is logged and read as
        an empty request (``empty()``), as Kafka's controller does, so it is deleted after handling."""
        data = self._get_or_none(path)
        if data is None:
            return None
        try:
            return decode(data)
        except ValueError as exc:
            logger.warning("ignoring the invalid request in %s: %s", path, exc)
            return empty()

    def _delete_admin_request(self, path: str, expected_controller_epoch_zk_version: int) -> bool:
        (outcome,) = self._fenced_write([Op(DELETE, path)], expected_controller_epoch_zk_version)
        return self._deleted(outcome, path)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        """``/admin/reassign_partitions`` as partition -> target replicas; None when absent.

        Invalid JSON is logged and read as an empty request, as Kafka's controller does.
        """
        return self._admin_request(
            paths.REASSIGN_PARTITIONS_PATH, codecs.decode_reassignment, dict[TopicPartition, tuple[int, ...]]
        )

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        """Rewrite (or create) ``/admin/reassign_partitions`` with the remaining entries; fenced."""
        payload = codecs.encode_reassignment(reassignment)
        (outcome,) = self._fenced_write(
            [Op(SET, paths.REASSIGN_PARTITIONS_PATH, payload)], expected_controller_epoch_zk_version
        )
        if outcome.code is ZkCode.NO_NODE:
            (outcome,) = self._fenced_write(
                [Op(CREATE, paths.REASSIGN_PARTITIONS_PATH, payload)], expected_controller_epoch_zk_version
            )
        if outcome.code is not ZkCode.OK:
            raise ZkOperationError(outcome.code, paths.REASSIGN_PARTITIONS_PATH, repr(outcome.error))

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/admin/reassign_partitions``; fenced; False when it was already gone."""
        return self._delete_admin_request(paths.REASSIGN_PARTITIONS_PATH, expected_controller_epoch_zk_version)

    def create_partition_reassignment_request(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Write ``/admin/reassign_partitions`` as the legacy reassignment tool does (unfenced admin
        write). Raises ``ZkOperationError`` (NODEEXISTS) while another ZooKeeper reassignment is pending."""
        if not reassignment:
            raise ValueError("a reassignment request needs at least one partition")
        try:
            self._client.create(paths.REASSIGN_PARTITIONS_PATH, codecs.encode_reassignment(reassignment), makepath=True)
        except NodeExistsError:
            raise ZkOperationError(
                ZkCode.NODE_EXISTS, paths.REASSIGN_PARTITIONS_PATH, "a partition reassignment is already pending"
            ) from None

    def get_preferred_replica_election(self) -> set[TopicPartition] | None:
        """Partitions named in ``/admin/preferred_replica_election``; None when absent (invalid JSON
        is logged and read as an empty set)."""
        return self._admin_request(
            paths.PREFERRED_REPLICA_ELECTION_PATH, codecs.decode_preferred_replica_election, set[TopicPartition]
        )

    def get_preferred_replica_election_entries(self) -> list[TopicPartition] | None:
        """``get_preferred_replica_election`` in the request's order, duplicates kept (what the
        controller handles: ``codecs.decode_preferred_replica_election_entries``)."""
        path, decode = paths.PREFERRED_REPLICA_ELECTION_PATH, codecs.decode_preferred_replica_election_entries
        return self._admin_request(path, decode, list[TopicPartition])

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/admin/preferred_replica_election``; fenced; False when it was already gone."""
        return self._delete_admin_request(paths.PREFERRED_REPLICA_ELECTION_PATH, expected_controller_epoch_zk_version)

    def create_preferred_replica_election_request(self, partitions: Iterable[TopicPartition]) -> None:
        """Write ``/admin/preferred_replica_election`` as Kafka's tool does (unfenced admin write).

        Raises ``ZkOperationError`` (NODEEXISTS) while a previous request is still pending, and
        ``ValueError`` (nothing written) when the request is over ``max_znode_bytes``: split it, as
        the dashboard's election action does (about 25,000 partitions of short topic names per MB).
        """
        chosen = list(dict.fromkeys(partitions))
        if not chosen:
            raise ValueError("a preferred replica election request needs at least one partition")
        payload = codecs.encode_preferred_replica_election(chosen)
        if len(payload) > self.max_znode_bytes:
            raise ValueError(
                f"a preferred replica election of {len(chosen):,} partitions is {len(payload):,} bytes, over the "
                f"{self.max_znode_bytes:,}-byte limit of one znode (ZooKeeper's jute.maxbuffer): split it"
            )
        try:
            self._client.create(paths.PREFERRED_REPLICA_ELECTION_PATH, payload, makepath=True)
        except NodeExistsError:
            raise ZkOperationError(
                ZkCode.NODE_EXISTS,
                paths.PREFERRED_REPLICA_ELECTION_PATH,
                "a preferred replica leader election is already in progress",
            ) from None

    def get_topic_deletions(self) -> list[str]:
        """Topics queued for deletion (children of ``/admin/delete_topics``), sorted."""
        return sorted(self._children(paths.DELETE_TOPICS_PATH))

    def delete_topic_deletions(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/admin/delete_topics/<t>`` of each topic; fenced; absent ones are fine."""
        self._delete_all([paths.delete_topic_path(t) for t in topics], expected_controller_epoch_zk_version)

    def mark_topic_for_deletion(self, topic: str) -> None:
        """Request deletion of a topic, as ``kafka-topics --delete`` does (unfenced admin write).

        Raises ``ZkOperationError``: NONODE when the topic does not exist, NODEEXISTS when it is
        already marked for deletion.
        """
        if self._client.exists(paths.topic_path(topic)) is None:
            raise ZkOperationError(ZkCode.NO_NODE, paths.topic_path(topic), f"topic '{topic}' does not exist")
        try:
            self._client.create(paths.delete_topic_path(topic), makepath=True)
        except NodeExistsError:
            raise ZkOperationError(
                ZkCode.NODE_EXISTS, paths.delete_topic_path(topic), f"topic '{topic}' is already marked for deletion"
            ) from None
