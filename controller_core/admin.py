"""Topic creation the way ``kafka-topics --create`` does it: replica assignment, then the ZooKeeper writes.

The assignment follows Kafka's ``AdminUtils.assignReplicasToBrokers`` behaviour, so a topic created
here is laid out as Kafka would lay it out on the same brokers:

* **Without racks** (no broker has one, or rack awareness is off): brokers sorted by id; partition
  ``p``'s first replica is broker ``(p + start) mod n``; the other replicas follow at a shift that
  grows by one every ``n`` partitions, so followers spread as evenly as leaders.
* **With racks** (every broker has one): the brokers are first arranged in rack-alternating order
  (racks sorted, brokers of a rack sorted, taking one from each rack in turn); leaders go round
  that list, and each further replica takes the next broker along it whose rack has no replica yet
  (unless every rack has one) and which holds no replica yet (unless every broker does).
* ``start`` and the initial shift are random unless ``fixed_start_index`` is given (tests, tools).
* Rack modes, as Kafka's ``RackAwareMode``: ``ENFORCED`` (default) refuses brokers of which only
  some have a rack; ``SAFE`` falls back to ignoring racks then; ``DISABLED`` always ignores them.

``create_topic`` reads the registered brokers, assigns, and writes ``/config/topics/<t>`` then
``/brokers/topics/<t>`` through the store (an unfenced admin write, as Kafka's tools make). The
controller picks the new topic up from its watch; the dashboard reuses these functions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from controller_core.model import BrokerRegistration
from controller_core.zk import paths


class RackAwareMode(StrEnum):
    ENFORCED = "enforced"
    SAFE = "safe"
    DISABLED = "disabled"


class InvalidPartitionsError(ValueError):
    """The number of partitions is not positive (Kafka: INVALID_PARTITIONS)."""


class InvalidReplicationFactorError(ValueError):
    """The replication factor is not positive or exceeds the brokers (Kafka: INVALID_REPLICATION_FACTOR)."""


class AdminOperationError(ValueError):
    """The brokers cannot be used as asked (Kafka's AdminOperationException)."""


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as replica assignment sees it."""

    id: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """``name:partitions:replication_factor``, as the demo's ``--topics`` takes it."""

    name: str
    partitions: int
    replication_factor: int

    @classmethod
    def parse(cls, text: str) -> TopicSpec:
        """Parse ``demo-a:12:3``; the name is validated as a Kafka topic name."""
        name, sep1, rest = text.strip().partition(":")
        partitions, sep2, rf = rest.partition(":")
        if not (sep1 and sep2) or not partitions.strip().isdigit() or not rf.strip().isdigit():
            raise ValueError(
                f"not a topic spec: {text!r} (expected NAME:PARTITIONS:REPLICATION_FACTOR, e.g. demo-a:12:3)"
            )
        paths.validate_topic_name(name)
        spec = cls(name, int(partitions), int(rf))
        if spec.partitions <= 0:
            raise InvalidPartitionsError(f"topic {name}: the number of partitions must be larger than 0")
        if spec.replication_factor <= 0:
            raise InvalidReplicationFactorError(f"topic {name}: the replication factor must be larger than 0")
        return spec

    def __str__(self) -> str:
        return f"{self.name}:{self.partitions}:{self.replication_factor}"


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered by taking one from each rack in turn (racks and brokers sorted)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack], reverse=True) for rack in sorted(by_rack)]
    result: list[int] = []
    while len(result) < len(broker_racks):
        for queue in queues:
            if queue:
                result.append(queue.pop())
    return result


def _replica_index(first_replica_index: int, shift: int, replica: int, n_brokers: int) -> int:
    """Position of a follower: 1..n-1 places after the first replica, rotating with ``shift``."""
    return (first_replica_index + 1 + (shift + replica) % (n_brokers - 1)) % n_brokers


def _assign_rack_unaware(
    n_partitions: int,
    replication_factor: int,
    brokers: Sequence[int],
    start_index: int,
    shift: int,
    first_partition: int,
) -> dict[int, tuple[int, ...]]:
    n = len(brokers)
    out: dict[int, tuple[int, ...]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [brokers[first]]
        replicas.extend(brokers[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
        out[partition] = tuple(replicas)
    return out


def _assign_rack_aware(
    n_partitions: int,
    replication_factor: int,
    broker_racks: Mapping[int, str],
    start_index: int,
    shift: int,
    first_partition: int,
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    n_racks = len(set(broker_racks.values()))
    out: dict[int, tuple[int, ...]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0  # keeps counting across replicas: skipped candidates are not revisited
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                rack_ok = rack not in racks_used or len(racks_used) == n_racks
                broker_ok = broker not in brokers_used or len(brokers_used) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[partition] = tuple(replicas)
    return out


def assign_replicas_to_brokers(
    brokers: Iterable[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Assign ``n_partitions`` partitions of ``replication_factor`` replicas (see the module docstring).

    Returns ``{partition: (replica, ...)}`` with partitions numbered from ``max(0, start_partition_id)``.
    """
    metadata = sorted(brokers, key=lambda b: b.id)
    if len({b.id for b in metadata}) != len(metadata):
        raise AdminOperationError(f"duplicate broker ids in {[b.id for b in metadata]}")
    if n_partitions <= 0:
        raise InvalidPartitionsError("the number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("the replication factor must be larger than 0")
    if replication_factor > len(metadata):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(metadata)} available brokers"
        )
    with_rack = [b for b in metadata if b.rack is not None]
    use_racks = bool(with_rack) and rack_aware_mode != RackAwareMode.DISABLED
    if use_racks and len(with_rack) != len(metadata):
        if rack_aware_mode == RackAwareMode.ENFORCED:
            missing = [b.id for b in metadata if b.rack is None]
            raise AdminOperationError(
                f"not all brokers have rack information for rack-aware assignment (no rack: {missing}); "
                "give every broker a rack or use rack-aware mode 'safe' or 'disabled'"
            )
        use_racks = False
    random_source = rng or random.Random()
    n = len(metadata)
    start_index = fixed_start_index if fixed_start_index >= 0 else random_source.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else random_source.randrange(n)
    first_partition = max(0, start_partition_id)
    if use_racks:
        racks = {b.id: b.rack for b in metadata if b.rack is not None}
        return _assign_rack_aware(n_partitions, replication_factor, racks, start_index, shift, first_partition)
    return _assign_rack_unaware(
        n_partitions, replication_factor, [b.id for b in metadata], start_index, shift, first_partition
    )


class TopicStore(Protocol):
    """What topic creation needs from ZooKeeper (``controller_core.zk.store.ZkStore`` has it)."""

    def get_all_broker_registrations(self) -> dict[int, BrokerRegistration]: ...

    def get_all_topics(self) -> set[str]: ...

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None: ...


def broker_metadata(registrations: Mapping[int, BrokerRegistration]) -> list[BrokerMetadata]:
    return [BrokerMetadata(r.id, r.rack) for r in sorted(registrations.values(), key=lambda r: r.id)]


def create_topic(
    store: TopicStore,
    spec: TopicSpec,
    *,
    config: Mapping[str, str] | None = None,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Create ``spec`` on the registered brokers, as ``kafka-topics --create``; return the assignment.

    Raises ``ValueError`` subclasses for an invalid spec or too few brokers, and the store's
    ``ZkOperationError`` (NODEEXISTS) when the topic exists.
    """
    brokers = broker_metadata(store.get_all_broker_registrations())
    if not brokers:
        raise AdminOperationError("no brokers are registered in /brokers/ids")
    assignment = assign_replicas_to_brokers(
        brokers, spec.partitions, spec.replication_factor, rack_aware_mode=rack_aware_mode, rng=rng
    )
    store.create_topic(spec.name, {p: list(r) for p, r in assignment.items()}, config or {})
    return assignment
