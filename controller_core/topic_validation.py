"""Kafka's validation of topic admin requests (create, add partitions, delete), as a pure module.

Why pure: the dashboard's topic API, the CLI and tests must refuse exactly what ``kafka-topics``
refuses (``Topic.validate``, ``AdminZkClient.validateTopicCreate``, ``validateReplicaAssignment``,
``addPartitions``) and say why, before anything is written to ZooKeeper. Every function takes the
request as parsed JSON plus the cluster facts it needs, and returns a plan or raises
``TopicRequestError`` carrying an HTTP status and a Kafka error name for the caller.

Numbers must be JSON integers: ``"3"``, ``3.0``, ``true`` and ``null`` are refused, not coerced.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from controller_core.zk.paths import MAX_TOPIC_NAME_LENGTH, validate_topic_name

INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})
MAX_PARTITIONS: Final = 10_000
MAX_REPLICATION_FACTOR: Final = 32
MAX_BROKER_ID: Final = 2**31 - 1
#: ZooKeeper refuses a znode over ``jute.maxbuffer`` (1 MiB by default); keep well under it.
MAX_ZNODE_BYTES: Final = 900 * 1024
MAX_CONFIG_VALUE: Final = 1024


class TopicRequestError(ValueError):
    """A refused request: ``status`` is the HTTP status, ``error`` Kafka's error name."""

    def __init__(self, message: str, *, status: int = 400, error: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.status = status
        self.error = error


# -- primitives -------------------------------------------------------------------------------------


def strict_int(value: Any, what: str, low: int, high: int, error: str = "INVALID_REQUEST") -> int:
    """A JSON integer in ``[low, high]``; booleans, floats, strings and null are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopicRequestError(f"{what} must be a whole number, got {json.dumps(value)[:40]}", error=error)
    if not low <= value <= high:
        raise TopicRequestError(f"{what} must be between {low} and {high}, got {value}", error=error)
    return value


def validate_name(name: Any) -> str:
    """Kafka's ``Topic.validate``: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not isinstance(name, str):
        raise TopicRequestError(f"the topic name must be a string, got {json.dumps(name)[:40]}", error="INVALID_TOPIC")
    try:
        validate_topic_name(name)
    except ValueError as exc:
        raise TopicRequestError(str(exc), error="INVALID_TOPIC_EXCEPTION") from None
    return name


def collides(a: str, b: str) -> bool:
    """Kafka's ``Topic.hasCollision``: metric names replace ``.`` by ``_``, so ``a.b`` and ``a_b`` clash."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


def _only_keys(request: Any, allowed: Collection[str], what: str) -> Mapping[str, Any]:
    if not isinstance(request, Mapping):
        raise TopicRequestError(f"the {what} request must be a JSON object")
    unknown = sorted(str(k) for k in request if k not in allowed)
    if unknown:
        raise TopicRequestError(f"unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")
    return request


# -- replica assignment -----------------------------------------------------------------------------


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's rack-unaware ``AdminUtils.assignReplicasToBrokers``: leaders round-robin from a random
    start, followers shifted so replicas of consecutive partitions spread over different brokers."""
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise TopicRequestError(
            f"replication factor {replication_factor} is larger than the {n} available broker(s)",
            error="INVALID_REPLICATION_FACTOR",
        )
    pick = rng or random.Random()
    first = start_index if start_index >= 0 else pick.randrange(n)
    shift = start_index if start_index >= 0 else pick.randrange(n)
    out: dict[int, list[int]] = {}
    partition = max(0, start_partition)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        leader = (partition + first) % n
        replicas = [ids[leader]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(leader + 1 + (shift + j) % (n - 1)) % n])
        out[partition] = replicas
        partition += 1
    return out


def parse_assignment(raw: Any, known_brokers: Collection[int], *, first_partition: int = 0) -> dict[int, list[int]]:
    """An explicit assignment, ``{"0": [1, 2], "1": [2, 3]}`` or ``[[1, 2], [2, 3]]``, checked as Kafka does.

    Partition ids must be the consecutive integers from ``first_partition``; each replica list
    non-empty, integer, non-negative, without duplicates, on registered brokers, all of one length.
    """
    if isinstance(raw, list):
        items: list[tuple[Any, Any]] = [(first_partition + i, r) for i, r in enumerate(raw)]
    elif isinstance(raw, Mapping):
        items = list(raw.items())
    else:
        raise TopicRequestError("the assignment must be an object of partition -> replica list, or a list of lists")
    if not items:
        raise TopicRequestError("the assignment is empty", error="INVALID_REPLICA_ASSIGNMENT")
    out: dict[int, list[int]] = {}
    for key, replicas in items:
        text = str(key)
        if isinstance(key, bool) or not (isinstance(key, int) or (text.isascii() and text.isdigit())):
            raise TopicRequestError(
                f"partition id {json.dumps(key)[:40]} is not a non-negative integer: partitions must be a "
                "consecutive 0-based integer sequence",
                error="INVALID_REPLICA_ASSIGNMENT",
            )
        partition = int(text)
        if not isinstance(replicas, list) or not replicas:
            raise TopicRequestError(
                f"partition {partition}: the replica list must be a non-empty list", error="INVALID_REPLICA_ASSIGNMENT"
            )
        ids = [
            strict_int(r, f"partition {partition}: broker id", 0, MAX_BROKER_ID, "INVALID_REPLICA_ASSIGNMENT")
            for r in replicas
        ]
        if len(set(ids)) != len(ids):
            raise TopicRequestError(
                f"partition {partition}: Duplicate replica assignment found: {ids}", error="INVALID_REPLICA_ASSIGNMENT"
            )
        out[partition] = ids
    expected = list(range(first_partition, first_partition + len(out)))
    if sorted(out) != expected or len(out) != len(items):
        raise TopicRequestError(
            f"partitions {sorted(out)} must be the consecutive integer sequence {first_partition}.."
            f"{first_partition + len(items) - 1}",
            error="INVALID_REPLICA_ASSIGNMENT",
        )
    if len({len(r) for r in out.values()}) > 1:
        raise TopicRequestError(
            "All partitions should have the same number of replicas", error="INVALID_REPLICA_ASSIGNMENT"
        )
    unknown = sorted({b for r in out.values() for b in r} - set(known_brokers))
    if unknown:
        raise TopicRequestError(
            f"unknown broker(s) {unknown} in the replica assignment (registered: {sorted(known_brokers)})",
            error="INVALID_REPLICA_ASSIGNMENT",
        )
    return out


def _check_size(assignment: Mapping[int, Sequence[int]]) -> None:
    size = len(json.dumps({"version": 3, "partitions": {str(p): list(r) for p, r in assignment.items()}}))
    if size > MAX_ZNODE_BYTES:
        raise TopicRequestError(
            f"the assignment would be {size} bytes, over the {MAX_ZNODE_BYTES}-byte znode budget "
            "(ZooKeeper's jute.maxbuffer)",
            error="INVALID_REPLICA_ASSIGNMENT",
        )


# -- topic configuration ----------------------------------------------------------------------------

_BOOL: Final = ("true", "false")
_CONFIG_INTS: Final[Mapping[str, tuple[int, int]]] = {
    "retention.ms": (-1, 2**63 - 1),
    "retention.bytes": (-1, 2**63 - 1),
    "segment.bytes": (14, 2**31 - 1),
    "segment.ms": (1, 2**63 - 1),
    "max.message.bytes": (0, 2**31 - 1),
    "min.insync.replicas": (1, MAX_REPLICATION_FACTOR),
    "delete.retention.ms": (0, 2**63 - 1),
    "min.compaction.lag.ms": (0, 2**63 - 1),
    "flush.messages": (1, 2**63 - 1),
}
_CONFIG_CHOICES: Final[Mapping[str, Collection[str]]] = {
    "cleanup.policy": ("delete", "compact", "compact,delete", "delete,compact"),
    "compression.type": ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    "unclean.leader.election.enable": _BOOL,
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
}
TOPIC_CONFIG_KEYS: Final = frozenset({*_CONFIG_INTS, *_CONFIG_CHOICES})


def validate_config(raw: Any, replication_factor: int) -> dict[str, str]:
    """Topic overrides: known keys only, string values of the right form, ``min.insync.replicas`` <= RF."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TopicRequestError("config must be an object of string keys to string values", error="INVALID_CONFIG")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key not in TOPIC_CONFIG_KEYS:
            raise TopicRequestError(
                f"unknown topic config {str(key)[:60]!r} (known: {', '.join(sorted(TOPIC_CONFIG_KEYS))})",
                error="INVALID_CONFIG",
            )
        if not isinstance(value, str):
            raise TopicRequestError(f"config {key}: the value must be a string", error="INVALID_CONFIG")
        if len(value) > MAX_CONFIG_VALUE or any(ord(c) < 32 for c in value):
            raise TopicRequestError(
                f"config {key}: the value is too long or has control characters", error="INVALID_CONFIG"
            )
        if key in _CONFIG_INTS:
            low, high = _CONFIG_INTS[key]
            if not (value.lstrip("-").isascii() and value.lstrip("-").isdigit()) or not low <= int(value) <= high:
                raise TopicRequestError(
                    f"config {key}: {value!r} is not a whole number in [{low}, {high}]", error="INVALID_CONFIG"
                )
        elif value not in _CONFIG_CHOICES[key]:
            raise TopicRequestError(
                f"config {key}: {value!r} is not one of {', '.join(_CONFIG_CHOICES[key])}", error="INVALID_CONFIG"
            )
        out[key] = value
    if int(out.get("min.insync.replicas", "1")) > replication_factor:
        raise TopicRequestError(
            f"config min.insync.replicas={out['min.insync.replicas']} is larger than the replication factor "
            f"{replication_factor}",
            error="INVALID_CONFIG",
        )
    return out


# -- the three requests -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What validation needs to know about the cluster, read from ZooKeeper by the caller."""

    topics: frozenset[str]
    live_brokers: frozenset[int]
    marked_for_deletion: frozenset[str] = frozenset()
    reassigning: frozenset[str] = frozenset()
    assignments: Mapping[str, Mapping[int, Sequence[int]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatePlan:
    topic: str
    assignment: dict[int, list[int]]
    config: dict[str, str]


CREATE_FIELDS: Final = frozenset({"name", "partitions", "replication_factor", "assignment", "config"})


def validate_create(request: Any, facts: ClusterFacts, rng: random.Random | None = None) -> CreatePlan:
    """``kafka-topics --create``: either ``partitions`` + ``replication_factor`` or an ``assignment``."""
    body = _only_keys(request, CREATE_FIELDS, "create-topic")
    topic = validate_name(body.get("name"))
    if topic in INTERNAL_TOPICS:
        raise TopicRequestError(f"topic '{topic}' is an internal topic name", error="INVALID_TOPIC_EXCEPTION")
    if topic in facts.marked_for_deletion:
        raise TopicRequestError(
            f"topic '{topic}' is marked for deletion; wait until the deletion completes",
            status=409,
            error="TOPIC_ALREADY_EXISTS",
        )
    if topic in facts.topics:
        raise TopicRequestError(f"topic '{topic}' already exists", status=409, error="TOPIC_ALREADY_EXISTS")
    clash = sorted(t for t in facts.topics if collides(topic, t))
    if clash:
        raise TopicRequestError(
            f"topic '{topic}' collides with existing topic '{clash[0]}': '.' and '_' are the same in metric names",
            status=409,
            error="INVALID_TOPIC_EXCEPTION",
        )
    if "assignment" in body:
        if "partitions" in body or "replication_factor" in body:
            raise TopicRequestError("give either an assignment or partitions and replication_factor, not both")
        assignment = parse_assignment(body["assignment"], facts.live_brokers)
        if len(assignment) > MAX_PARTITIONS:
            raise TopicRequestError(f"at most {MAX_PARTITIONS} partitions", error="INVALID_PARTITIONS")
    else:
        if "partitions" not in body or "replication_factor" not in body:
            raise TopicRequestError("partitions and replication_factor are required (or an explicit assignment)")
        partitions = strict_int(body["partitions"], "partitions", 1, MAX_PARTITIONS, "INVALID_PARTITIONS")
        rf = strict_int(
            body["replication_factor"], "replication_factor", 1, MAX_REPLICATION_FACTOR, "INVALID_REPLICATION_FACTOR"
        )
        if not facts.live_brokers:
            raise TopicRequestError("no broker is registered", status=409, error="INVALID_REPLICATION_FACTOR")
        assignment = assign_replicas(sorted(facts.live_brokers), partitions, rf, rng=rng)
    _check_size(assignment)
    config = validate_config(body.get("config"), len(next(iter(assignment.values()))))
    return CreatePlan(topic, assignment, config)


@dataclass(frozen=True, slots=True)
class AddPartitionsPlan:
    topic: str
    added: dict[int, list[int]]


ADD_FIELDS: Final = frozenset({"partitions", "assignment"})


def _existing(topic: Any, facts: ClusterFacts) -> str:
    name = validate_name(topic)
    if name not in facts.topics:
        raise TopicRequestError(f"topic '{name}' does not exist", status=404, error="UNKNOWN_TOPIC_OR_PARTITION")
    return name


def validate_add_partitions(topic: Any, request: Any, facts: ClusterFacts) -> AddPartitionsPlan:
    """``kafka-topics --alter --partitions N``: only more partitions; new ones assigned like Kafka's."""
    body = _only_keys(request, ADD_FIELDS, "add-partitions")
    name = _existing(topic, facts)
    if name in facts.marked_for_deletion:
        raise TopicRequestError(f"topic '{name}' is queued for deletion", status=409, error="INVALID_REQUEST")
    if name in facts.reassigning:
        raise TopicRequestError(
            f"topic '{name}' has a partition reassignment in progress", status=409, error="REASSIGNMENT_IN_PROGRESS"
        )
    current = dict(facts.assignments.get(name, {}))
    if not current:
        raise TopicRequestError(f"topic '{name}' has no readable assignment", status=409)
    count = strict_int(body.get("partitions"), "partitions", 1, MAX_PARTITIONS, "INVALID_PARTITIONS")
    if count <= len(current):
        raise TopicRequestError(
            f"topic '{name}' has {len(current)} partitions; the new count {count} must be larger "
            "(partitions can only be added)",
            error="INVALID_PARTITIONS",
        )
    rf = len(current[0])
    wanted = count - len(current)
    if "assignment" in body:
        added = parse_assignment(body["assignment"], facts.live_brokers, first_partition=len(current))
        if len(added) != wanted:
            raise TopicRequestError(
                f"the assignment lists {len(added)} partitions; adding {wanted} needs exactly {wanted}",
                error="INVALID_REPLICA_ASSIGNMENT",
            )
        if len(next(iter(added.values()))) != rf:
            raise TopicRequestError(
                f"new partitions need {rf} replicas, the topic's replication factor", error="INVALID_REPLICA_ASSIGNMENT"
            )
    else:
        brokers = sorted(facts.live_brokers)
        first = current[0][0]
        start = brokers.index(first) if first in brokers else -1
        added = assign_replicas(brokers, wanted, rf, start_index=start, start_partition=len(current))
    _check_size({**current, **added})
    return AddPartitionsPlan(name, added)


@dataclass(frozen=True, slots=True)
class DeletePlan:
    topic: str
    already_pending: bool


DELETE_FIELDS: Final = frozenset({"confirm"})


def validate_delete(topic: Any, request: Any, facts: ClusterFacts, *, deletion_enabled: bool = True) -> DeletePlan:
    """``kafka-topics --delete`` for one named topic, confirmed by typing its name again."""
    body = _only_keys(request, DELETE_FIELDS, "delete-topic")
    if not deletion_enabled:
        raise TopicRequestError("topic deletion is disabled (TOPIC_DELETION_ENABLED=0)", status=403)
    if isinstance(topic, str) and any(c in topic for c in "*?[]^$|+(){}\\,"):
        raise TopicRequestError(
            f"{topic[:60]!r} looks like a pattern: name exactly one topic", error="INVALID_TOPIC_EXCEPTION"
        )
    name = _existing(topic, facts)
    if body.get("confirm") != name:
        raise TopicRequestError(f"type the topic name '{name}' in confirm to delete it")
    if name in INTERNAL_TOPICS:
        raise TopicRequestError(
            f"topic '{name}' is internal and cannot be deleted", status=403, error="INVALID_REQUEST"
        )
    if name in facts.reassigning:
        raise TopicRequestError(
            f"topic '{name}' has a partition reassignment in progress", status=409, error="REASSIGNMENT_IN_PROGRESS"
        )
    return DeletePlan(name, name in facts.marked_for_deletion)


__all__ = [
    "CREATE_FIELDS",
    "INTERNAL_TOPICS",
    "MAX_PARTITIONS",
    "MAX_TOPIC_NAME_LENGTH",
    "AddPartitionsPlan",
    "ClusterFacts",
    "CreatePlan",
    "DeletePlan",
    "TopicRequestError",
    "assign_replicas",
    "collides",
    "parse_assignment",
    "validate_add_partitions",
    "validate_config",
    "validate_create",
    "validate_delete",
    "validate_name",
]
