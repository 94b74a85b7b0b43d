"""Value types the controller reasons about, with Kafka's (ZooKeeper-era) semantics.

Everything here is immutable and cheap: a cluster of a million partitions keeps one
``TopicPartition``, one ``ReplicaAssignment`` and one ``LeaderIsrAndControllerEpoch`` per
partition in memory, so the types are tuples, or frozen ``msgspec.Struct`` holding tuples for the
per-partition ones: built in C (a slotted frozen dataclass runs ``object.__setattr__`` per field,
and a broker failure builds two per elected partition) and untracked by the cycle collector
(``gc=False``: they hold only ints and tuples of ints, so they can be in no cycle).

Sentinels follow Kafka's ``LeaderAndIsr`` companion object (reference §0): ``NO_LEADER = -1``,
``LEADER_DURING_DELETE = -2`` and so on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import msgspec

NO_LEADER: Final = -1
NO_EPOCH: Final = -1
LEADER_DURING_DELETE: Final = -2
EPOCH_DURING_DELETE: Final = -2
INITIAL_LEADER_EPOCH: Final = 0
INITIAL_PARTITION_ZK_VERSION: Final = 0
INITIAL_CONTROLLER_EPOCH: Final = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION: Final = 0
NO_BROKER_EPOCH: Final = -1


class TopicPartition(NamedTuple):
    """A partition of a topic. A tuple so that hashing and comparing stay fast at scale."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Parse ``"orders-3"`` (topic names may themselves contain dashes)."""
        topic, sep, partition = text.rpartition("-")
        if not sep or not topic or not partition.isdigit():
            raise ValueError(f"not a topic-partition: {text!r} (expected <topic>-<partition>)")
        return cls(topic, int(partition))


class PartitionAndReplica(NamedTuple):
    """One replica of one partition: the unit the replica state machine tracks."""

    topic_partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[Topic={self.topic_partition.topic},Partition={self.topic_partition.partition},Replica={self.replica}]"


def _distinct(ids: Iterable[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(ids))


class LeaderAndIsr(msgspec.Struct, frozen=True, gc=False):
    """The leader, leader epoch and ISR of a partition, with the state znode's data version.

    ``zk_version`` is the version that was *read*: it is the expected version of the next
    conditional write. After a successful write the controller stores the version ZooKeeper returned.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = INITIAL_PARTITION_ZK_VERSION

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, self.isr, self.zk_version)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version)

    def new_epoch(self) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch + 1, self.isr, self.zk_version)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr, zk_version)

    def equals_ignore_zk(self, other: LeaderAndIsr) -> bool:
        return (self.leader, self.leader_epoch, self.isr) == (other.leader, other.leader_epoch, other.isr)

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0

    @staticmethod
    def during_delete(isr: Iterable[int]) -> LeaderAndIsr:
        return LeaderAndIsr(LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, tuple(isr), INITIAL_PARTITION_ZK_VERSION)


class LeaderIsrAndControllerEpoch(msgspec.Struct, frozen=True, gc=False):
    """What the controller caches per partition and writes to its state znode."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


class ReplicaAssignment(msgspec.Struct, frozen=True, gc=False):
    """A partition's full replica set (RS) with the replicas being added (AR) and removed (RR).

    During a reassignment ``replicas`` = target replicas first, then the origin replicas not in
    the target (reference §2.1, §9.1); the topic znode is the only persistent record of the origin.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @classmethod
    def of(cls, replicas: Iterable[int], adding: Iterable[int] = (), removing: Iterable[int] = ()) -> ReplicaAssignment:
        return cls(tuple(replicas), tuple(adding), tuple(removing))

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment (RS minus AR, in RS order)."""
        if not self.adding_replicas:
            return self.replicas
        adding = set(self.adding_replicas)
        return tuple(r for r in self.replicas if r not in adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS: the replicas after the reassignment (RS minus RR, in RS order)."""
        if not self.removing_replicas:
            return self.replicas
        removing = set(self.removing_replicas)
        return tuple(r for r in self.replicas if r not in removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas) or bool(self.removing_replicas)

    @property
    def preferred_replica(self) -> int | None:
        return self.replicas[0] if self.replicas else None

    def reassign_to(self, target: Iterable[int]) -> ReplicaAssignment:
        """The assignment that moves this partition from its *origin* replicas to ``target``.

        Computed from the origin, so re-targeting an in-flight reassignment (or cancelling it by
        targeting the origin) works as in Kafka: ``x.reassign_to(x.target_replicas) == x``.
        """
        target_t = tuple(target)
        origin = self.origin_replicas
        full = _distinct((*target_t, *origin))
        origin_set, target_set = set(origin), set(target_t)
        adding = tuple(r for r in full if r not in origin_set)
        removing = tuple(r for r in full if r not in target_set)
        return ReplicaAssignment(full, adding, removing)

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding_replicas if r != replica),
            tuple(r for r in self.removing_replicas if r != replica),
        )

    def with_replicas(self, replicas: Iterable[int]) -> ReplicaAssignment:
        return msgspec.structs.replace(self, replicas=tuple(replicas))


EMPTY_ASSIGNMENT: Final = ReplicaAssignment(())


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One advertised listener of a broker: ``LISTENER://host:port``."""

    listener: str
    host: str | None
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        return f"{self.listener}://{self.host or ''}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """Parse ``"PLAINTEXT://host:9092"``; listener names are upper-cased as Kafka does."""
        listener, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not listener:
            raise ValueError(f"not an endpoint: {text!r} (expected LISTENER://host:port)")
        name = listener.upper()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if protocol_map is not None and name in protocol_map:
            protocol = protocol_map[name]
        elif name in {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}:
            protocol = name
        elif protocol_map is None:
            # Our own brokers advertise extra listeners (CONTROL for the controller channel);
            # without a map they default to PLAINTEXT, which is what they speak.
            protocol = "PLAINTEXT"
        else:
            raise ValueError(f"no security protocol for listener {name!r}")
        return cls(name, host or None, int(port), protocol)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker as read from ``/brokers/ids/<id>``; ``epoch`` is the znode's czxid."""

    id: int
    endpoints: tuple[EndPoint, ...]
    epoch: int = NO_BROKER_EPOCH
    rack: str | None = None
    timestamp_ms: int | None = None
    jmx_port: int = -1
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = 5

    def endpoint(self, listener: str) -> EndPoint | None:
        name = listener.upper()
        return next((e for e in self.endpoints if e.listener == name), None)
