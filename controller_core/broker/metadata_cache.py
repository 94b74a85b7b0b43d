"""The cluster metadata a broker serves to clients, as the controller's UpdateMetadata requests state it.

Kafka's ``MetadataCache``: every UpdateMetadata replaces the live-broker list and upserts the
partition states it carries; a partition whose leader is -2 (``LEADER_DURING_DELETE``) belongs to a
topic being deleted and is dropped. Guarded by the replica manager's lock.

One rule Kafka's ZooKeeper-mode brokers do not have: a partition state older than the one cached
(a lower leader epoch, or the same leader epoch and a lower state-znode version) is ignored. Kafka
relies on its connection delivering the controller's requests in order; ours is HTTP, and the
controller resends a request after a timeout or a reset connection, so a copy of an older
UpdateMetadata whose first delivery was still queued behind this broker's lock could otherwise be
applied after a newer one and put an old leader back. Both numbers only grow for a partition (the
controller sends what it wrote to ZooKeeper, and the znode's version counts every write), and a
deleted topic's entries are dropped before it can be created again, so the rule never refuses a
current state.
"""

from __future__ import annotations

from typing import Any

import msgspec

from controller_core.model import LEADER_DURING_DELETE, TopicPartition
from controller_core.protocol.messages import UpdateMetadataBroker, UpdateMetadataPartitionState, UpdateMetadataRequest


class MetadataCache:
    """Partitions and live brokers from the newest UpdateMetadata."""

    def __init__(self) -> None:
        self.controller_id: int | None = None
        self.controller_epoch = -1
        self.partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        self.live_brokers: dict[int, UpdateMetadataBroker] = {}
        self.topic_ids: dict[str, str] = {}
        self.updates = 0
        self.stale_states_ignored = 0
        """Partition states older than the cached ones (a resent, reordered request), left out."""

    def update(self, request: UpdateMetadataRequest) -> None:
        """Apply one (already validated) UpdateMetadata request."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.live_brokers = {b.id: b for b in request.live_brokers}
        partitions = self.partitions
        deleted_topics: set[str] = set()
        for state in request.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            if state.leader == LEADER_DURING_DELETE:
                partitions.pop(tp, None)
                deleted_topics.add(state.topic)
                continue
            cached = partitions.get(tp)
            if cached is not None and (
                state.leader_epoch < cached.leader_epoch
                or (state.leader_epoch == cached.leader_epoch and state.zk_version < cached.zk_version)
            ):
                self.stale_states_ignored += 1
                continue
            partitions[tp] = state
        for topic in deleted_topics:
            self.topic_ids.pop(topic, None)
        self.topic_ids.update(request.topic_ids)
        self.updates += 1

    def broker_address(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        """``(host, port)`` of ``broker_id``'s ``listener``, if the broker is live."""
        broker = self.live_brokers.get(broker_id)
        if broker is None:
            return None
        name = listener.upper()
        endpoint = next((e for e in broker.endpoints if e.listener.upper() == name), None)
        if endpoint is None or endpoint.host is None:
            return None
        return endpoint.host, endpoint.port

    def snapshot(self, *, include_partitions: bool = True, topic: str | None = None) -> dict[str, Any]:
        """JSON-ready view; partitions can be left out (they may be 100,000) or filtered by topic."""
        d: dict[str, Any] = {
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "updates": self.updates,
            "stale_states_ignored": self.stale_states_ignored,
            "partition_count": len(self.partitions),
            "live_brokers": [msgspec.to_builtins(b) for b in sorted(self.live_brokers.values(), key=lambda b: b.id)],
        }
        if include_partitions:
            states = (s for tp, s in sorted(self.partitions.items()) if topic is None or tp.topic == topic)
            d["partitions"] = [
                {
                    "topic": s.topic,
                    "partition": s.partition,
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": list(s.isr),
                    "replicas": list(s.replicas),
                    "offline_replicas": list(s.offline_replicas),
                }
                for s in states
            ]
        return d
