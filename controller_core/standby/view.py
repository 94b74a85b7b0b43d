"""The decoded cluster state a standby keeps: what a failover reads, and nothing else.

This view holds exactly the results of a failover's reads, decoded by the same codecs the store
uses: registered brokers (epoch = czxid), topic assignments (with topic ids and adding/removing
replicas), partition states (with their znode versions, the fencing of every later conditional
write), and the admin znodes (topic deletions, the ZooKeeper reassignment, the preferred election).
It is path-keyed, as ZooKeeper's events are; the controller context a failover takes over is kept
from it (``controller_core.standby.warm_context``), each re-read path applied here first.

A view is updated only by re-reading a path (``apply``), never from an event's type: a path changed
twice before it is read is read once, and the read, not the order of events, says what it holds. It
does no I/O and no locking; ``controller_core.standby.follower`` owns both.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

from kazoo.exceptions import NoNodeError

from controller_core.model import BrokerRegistration, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.codecs import TopicAssignment

logger = logging.getLogger(__name__)

#: Subtrees the standby follows with persistent recursive watches.
FOLLOWED_ROOTS: tuple[str, ...] = (paths.BROKERS_PATH, paths.ADMIN_PATH)


class Kind(Enum):
    BROKER = "broker"
    TOPIC = "topic"
    STATE = "state"
    DELETION = "deletion"
    REASSIGNMENT = "reassignment"
    PREFERRED = "preferred"


class Target(NamedTuple):
    """What a znode path means to the view (``key``: broker id, topic name or partition)."""

    kind: Kind
    key: Any = None


def classify(path: str) -> Target | None:
    """The view entry a path holds, or None for paths the failover never reads (parents, seqid...)."""
    parts = path.split("/")
    n = len(parts)
    if n < 3:
        return None
    # Partition states first: nearly every change a standby follows is one (a broker failure at
    # 100,000 partitions rewrites ~60,000 of them); same checks as ``paths.parse_partition_state_path``.
    if (
        n == 7
        and parts[6] == "state"
        and parts[4] == "partitions"
        and parts[2] == "topics"
        and parts[1] == "brokers"
        and parts[3]
        and parts[5].isdigit()
    ):
        return Target(Kind.STATE, TopicPartition(parts[3], int(parts[5])))
    if parts[1] == "brokers":
        if n == 4 and parts[2] == "ids" and parts[3].isdigit():
            return Target(Kind.BROKER, int(parts[3]))
        if parts[2] == "topics" and parts[3:4] != [""]:
            if n == 4:
                return Target(Kind.TOPIC, parts[3])
            tp = paths.parse_partition_state_path(path)
            if tp is not None:
                return Target(Kind.STATE, tp)
        return None
    if parts[1] == "admin":
        if n == 4 and parts[2] == "delete_topics" and parts[3]:
            return Target(Kind.DELETION, parts[3])
        if n == 3 and path == paths.REASSIGN_PARTITIONS_PATH:
            return Target(Kind.REASSIGNMENT)
        if n == 3 and path == paths.PREFERRED_REPLICA_ELECTION_PATH:
            return Target(Kind.PREFERRED)
    return None


@dataclass
class ClusterView:
    """Decoded brokers, topics, partition states and admin znodes, with the zxid seen so far.

    ``apply(target, read)`` takes one path's multi-read result (``DataResult``: data and stat, or a
    NoNode error) and makes the entry match it; a topic read as gone takes its partition states with
    it (ZooKeeper deletes them first anyway). Unreadable data is dropped and logged, as the store's
    bulk reads do.
    """

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[str, dict[TopicPartition, LeaderIsrAndControllerEpoch]] = field(default_factory=dict)
    topic_deletions: set[str] = field(default_factory=set)
    reassignment: dict[TopicPartition, tuple[int, ...]] | None = None
    preferred_election: set[TopicPartition] | None = None
    max_zxid: int = 0
    _shared: dict[tuple[int, ...], ReplicaAssignment] = field(default_factory=dict, repr=False)
    # Equal ISRs share one tuple (a cluster has few distinct ones): ~64 MB less at a million partitions.
    _isrs: dict[tuple[int, ...], tuple[int, ...]] = field(default_factory=dict, repr=False)

    # -- updates ----------------------------------------------------------------------------------
    def apply(self, target: Target, read: Any) -> None:
        error = read.error
        if error is not None and not isinstance(error, NoNodeError):
            logger.error(
                "standby: cannot read %s %s (%r); dropping it from the view", target.kind.value, target.key, error
            )
        data = read.data if error is None else None
        present = error is None
        stat: Any = read.stat if present else None
        if stat is not None and stat.mzxid > self.max_zxid:
            self.max_zxid = stat.mzxid
        kind = target.kind
        try:
            if kind is Kind.STATE:
                tp: TopicPartition = target.key
                if present:
                    state = codecs.decode_partition_state(data, stat.version, self._isrs)
                    by_partition = self.states.get(tp.topic)
                    if by_partition is None:
                        by_partition = self.states[tp.topic] = {}
                    if tp not in by_partition:
                        # Kept as the table's key too (``WarmContext``): one object a partition, and
                        # one topic name a topic (a path's split makes a string per znode).
                        tp = TopicPartition(sys.intern(tp.topic), tp.partition)
                    by_partition[tp] = state
                else:
                    self._drop_state(tp)
            elif kind is Kind.TOPIC:
                topic: str = target.key
                if present:
                    try:
                        self.topics[topic] = codecs.decode_topic_assignment(topic, data, self._shared)
                    except ValueError as exc:
                        logger.error("standby: unreadable assignment of topic %s: %s", topic, exc)
                        self.topics[topic] = TopicAssignment(None, {})
                else:
                    self.topics.pop(topic, None)
                    self.states.pop(topic, None)
            elif kind is Kind.BROKER:
                broker_id: int = target.key
                if present:
                    self.brokers[broker_id] = codecs.decode_broker_registration(broker_id, data, stat.czxid)
                else:
                    self.brokers.pop(broker_id, None)
            elif kind is Kind.DELETION:
                if present:
                    self.topic_deletions.add(target.key)
                else:
                    self.topic_deletions.discard(target.key)
            elif kind is Kind.REASSIGNMENT:
                self.reassignment = _decoded_or_empty(codecs.decode_reassignment, data, dict) if present else None
            elif kind is Kind.PREFERRED:
                self.preferred_election = (
                    _decoded_or_empty(codecs.decode_preferred_replica_election, data, set) if present else None
                )
        except ValueError as exc:
            logger.error("standby: unreadable %s %s: %s; dropping it from the view", kind.value, target.key, exc)
            if kind is Kind.STATE:
                self._drop_state(target.key)
            elif kind is Kind.BROKER:
                self.brokers.pop(target.key, None)

    def _drop_state(self, tp: TopicPartition) -> None:
        by_partition = self.states.get(tp.topic)
        if by_partition is not None:
            by_partition.pop(tp, None)
            if not by_partition:
                del self.states[tp.topic]

    # -- what the failover reads -------------------------------------------------------------------
    def assignments_for(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """``ZkStore.get_replica_assignments``: the topics that exist, with their assignments."""
        out: dict[str, TopicAssignment] = {}
        for topic in topics:
            assignment = self.topics.get(topic)
            if assignment is not None:
                out[topic] = assignment
        return out

    def leadership_for(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """``ZkStore.get_partition_leadership``: the partitions whose state znode exists and is readable."""
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        states = self.states
        for tp in partitions:
            by_partition = states.get(tp.topic)
            if by_partition is not None:
                state = by_partition.get(tp)
                if state is not None:
                    out[tp] = state
        return out

    def assigned_partitions(self) -> Iterator[TopicPartition]:
        for topic, assignment in self.topics.items():
            for partition in assignment.partitions:
                yield TopicPartition(topic, partition)

    @property
    def partition_state_count(self) -> int:
        return sum(len(v) for v in self.states.values())

    def summary(self) -> Mapping[str, int]:
        return {
            "brokers": len(self.brokers),
            "topics": len(self.topics),
            "partition_states": self.partition_state_count,
        }


def _decoded_or_empty(decode: Callable[[bytes | None], Any], data: bytes | None, empty: Callable[[], Any]) -> Any:
    """Kafka's controller reads an invalid admin request as an empty one (as ``ZkStore`` does)."""
    try:
        return decode(data)
    except ValueError as exc:
        logger.warning("standby: ignoring an invalid admin request: %s", exc)
        return empty()


def full_read_paths(
    broker_ids: Iterable[int], topics: Iterable[str], deletions: Iterable[str]
) -> list[tuple[str, Target]]:
    """Every path a full read takes, before partition states (those need the assignments first)."""
    out: list[tuple[str, Target]] = [(paths.broker_id_path(b), Target(Kind.BROKER, b)) for b in broker_ids]
    out += [(paths.topic_path(t), Target(Kind.TOPIC, t)) for t in topics]
    out += [(f"{paths.DELETE_TOPICS_PATH}/{t}", Target(Kind.DELETION, t)) for t in deletions]
    out.append((paths.REASSIGN_PARTITIONS_PATH, Target(Kind.REASSIGNMENT)))
    out.append((paths.PREFERRED_REPLICA_ELECTION_PATH, Target(Kind.PREFERRED)))
    return out
