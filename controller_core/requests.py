"""The three controller-to-broker requests and their responses, as plain data with a JSON form.

This is the wire format between the controller and our broker agents (HTTP/JSON): each request
and response has ``to_dict()`` giving JSON-ready builtins (lists, ints, strings, ``None``) and a
``from_dict()`` that accepts what ``json.loads`` returns. Every top-level dict carries ``kind``
("LeaderAndIsr", "StopReplica", "UpdateMetadata") so one endpoint can dispatch with
``request_from_dict`` / ``response_from_dict``.

Fields follow Kafka's request schemas (reference §6.3) with snake_case names. Per-partition states
are slotted dataclasses holding tuples; the request batch shares one state object between every
broker that receives the same partition, so treat them as immutable.

Error codes are Kafka's numbers (``ErrorCode``) so that the broker agent, the dashboard and the
analytics speak the same vocabulary as Kafka's tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar, TypeAlias

from controller_core.model import TopicPartition

JsonDict: TypeAlias = dict[str, Any]


class ErrorCode(IntEnum):
    """Kafka protocol error codes used by the controller, the broker agents and their callers."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    STALE_CONTROLLER_EPOCH = 11
    NETWORK_EXCEPTION = 13
    INVALID_TOPIC_EXCEPTION = 17
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    REASSIGNMENT_IN_PROGRESS = 60
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    INELIGIBLE_REPLICA = 107

    @classmethod
    def parse(cls, value: int) -> ErrorCode:
        """Map a wire value to a member; codes we do not know become UNKNOWN_SERVER_ERROR."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


def _ints(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


# --- per-partition and per-broker parts ----------------------------------------------------------


@dataclass(slots=True)
class LeaderAndIsrPartitionState:
    """What one broker must do for one partition: follow or lead, at which epoch, with which ISR."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> JsonDict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "zk_version": self.zk_version,
            "replicas": list(self.replicas),
            "adding_replicas": list(self.adding_replicas),
            "removing_replicas": list(self.removing_replicas),
            "is_new": self.is_new,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LeaderAndIsrPartitionState:
        return cls(
            topic=str(d["topic"]),
            partition=int(d["partition"]),
            controller_epoch=int(d["controller_epoch"]),
            leader=int(d["leader"]),
            leader_epoch=int(d["leader_epoch"]),
            isr=_ints(d["isr"]),
            zk_version=int(d["zk_version"]),
            replicas=_ints(d["replicas"]),
            adding_replicas=_ints(d.get("adding_replicas", ())),
            removing_replicas=_ints(d.get("removing_replicas", ())),
            is_new=bool(d.get("is_new", False)),
        )


@dataclass(frozen=True, slots=True)
class LiveLeader:
    """A leader named in a LeaderAndIsr request, with its inter-broker address."""

    id: int
    host: str | None
    port: int

    def to_dict(self) -> JsonDict:
        return {"id": self.id, "host": self.host, "port": self.port}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LiveLeader:
        host = d.get("host")
        return cls(int(d["id"]), None if host is None else str(host), int(d["port"]))


@dataclass(slots=True)
class StopReplicaPartitionState:
    """Stop (and maybe delete) one replica; ``leader_epoch`` fences stale requests (-2: deleting)."""

    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> JsonDict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader_epoch": self.leader_epoch,
            "delete_partition": self.delete_partition,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StopReplicaPartitionState:
        return cls(str(d["topic"]), int(d["partition"]), int(d["leader_epoch"]), bool(d["delete_partition"]))


@dataclass(slots=True)
class UpdateMetadataPartitionState:
    """One partition's metadata as every broker should serve it to clients."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> JsonDict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "zk_version": self.zk_version,
            "replicas": list(self.replicas),
            "offline_replicas": list(self.offline_replicas),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UpdateMetadataPartitionState:
        return cls(
            topic=str(d["topic"]),
            partition=int(d["partition"]),
            controller_epoch=int(d["controller_epoch"]),
            leader=int(d["leader"]),
            leader_epoch=int(d["leader_epoch"]),
            isr=_ints(d["isr"]),
            zk_version=int(d["zk_version"]),
            replicas=_ints(d["replicas"]),
            offline_replicas=_ints(d.get("offline_replicas", ())),
        )


@dataclass(frozen=True, slots=True)
class UpdateMetadataEndpoint:
    """One listener of a live broker as carried in UpdateMetadata."""

    host: str | None
    port: int
    listener: str
    security_protocol: str

    def to_dict(self) -> JsonDict:
        return {
            "host": self.host,
            "port": self.port,
            "listener": self.listener,
            "security_protocol": self.security_protocol,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UpdateMetadataEndpoint:
        host = d.get("host")
        return cls(
            None if host is None else str(host),
            int(d["port"]),
            str(d["listener"]),
            str(d.get("security_protocol", "PLAINTEXT")),
        )


@dataclass(frozen=True, slots=True)
class UpdateMetadataBroker:
    """A live-or-shutting-down broker as every broker should know it."""

    id: int
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = None

    def to_dict(self) -> JsonDict:
        return {"id": self.id, "endpoints": [e.to_dict() for e in self.endpoints], "rack": self.rack}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UpdateMetadataBroker:
        rack = d.get("rack")
        return cls(
            int(d["id"]),
            tuple(UpdateMetadataEndpoint.from_dict(e) for e in d.get("endpoints", ())),
            None if rack is None else str(rack),
        )


@dataclass(frozen=True, slots=True)
class PartitionError:
    """A per-partition result code in a response."""

    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> JsonDict:
        return {"topic": self.topic, "partition": self.partition, "error_code": int(self.error_code)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionError:
        return cls(str(d["topic"]), int(d["partition"]), ErrorCode.parse(int(d.get("error_code", 0))))


# --- requests ------------------------------------------------------------------------------------


@dataclass(slots=True)
class LeaderAndIsrRequest:
    """Tell one broker which partitions it leads or follows (reference §6.3).

    ``controller_epoch`` is the sender's current epoch (brokers reject older ones);
    each partition state carries the epoch of the controller that *made* that decision.
    """

    kind: ClassVar[str] = "LeaderAndIsr"

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[LeaderAndIsrPartitionState]
    live_leaders: list[LiveLeader]
    topic_ids: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> JsonDict:
        return {
            "kind": self.kind,
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": self.broker_epoch,
            "partition_states": [s.to_dict() for s in self.partition_states],
            "live_leaders": [b.to_dict() for b in self.live_leaders],
            "topic_ids": dict(self.topic_ids),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LeaderAndIsrRequest:
        _check_kind(d, cls.kind)
        return cls(
            controller_id=int(d["controller_id"]),
            controller_epoch=int(d["controller_epoch"]),
            broker_epoch=int(d["broker_epoch"]),
            partition_states=[LeaderAndIsrPartitionState.from_dict(s) for s in d.get("partition_states", ())],
            live_leaders=[LiveLeader.from_dict(b) for b in d.get("live_leaders", ())],
            topic_ids={str(k): str(v) for k, v in d.get("topic_ids", {}).items()},
        )


@dataclass(slots=True)
class StopReplicaRequest:
    """Tell one broker to stop replicas, deleting their logs where ``delete_partition`` is set."""

    kind: ClassVar[str] = "StopReplica"

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: list[StopReplicaPartitionState]

    def to_dict(self) -> JsonDict:
        return {
            "kind": self.kind,
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": self.broker_epoch,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StopReplicaRequest:
        _check_kind(d, cls.kind)
        return cls(
            controller_id=int(d["controller_id"]),
            controller_epoch=int(d["controller_epoch"]),
            broker_epoch=int(d["broker_epoch"]),
            partitions=[StopReplicaPartitionState.from_dict(p) for p in d.get("partitions", ())],
        )


@dataclass(slots=True)
class UpdateMetadataRequest:
    """Give one broker the cluster metadata it serves to clients: partitions and live brokers.

    The batch sends the *same* ``partition_states`` and ``live_brokers`` lists to every target
    broker; do not mutate them.
    """

    kind: ClassVar[str] = "UpdateMetadata"

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[UpdateMetadataPartitionState]
    live_brokers: list[UpdateMetadataBroker]
    topic_ids: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> JsonDict:
        return {
            "kind": self.kind,
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": self.broker_epoch,
            "partition_states": [s.to_dict() for s in self.partition_states],
            "live_brokers": [b.to_dict() for b in self.live_brokers],
            "topic_ids": dict(self.topic_ids),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UpdateMetadataRequest:
        _check_kind(d, cls.kind)
        return cls(
            controller_id=int(d["controller_id"]),
            controller_epoch=int(d["controller_epoch"]),
            broker_epoch=int(d["broker_epoch"]),
            partition_states=[UpdateMetadataPartitionState.from_dict(s) for s in d.get("partition_states", ())],
            live_brokers=[UpdateMetadataBroker.from_dict(b) for b in d.get("live_brokers", ())],
            topic_ids={str(k): str(v) for k, v in d.get("topic_ids", {}).items()},
        )


# --- responses -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _PartitionErrorsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    partition_errors: list[PartitionError] = field(default_factory=list)

    def errors_by_partition(self) -> dict[TopicPartition, ErrorCode]:
        return {TopicPartition(e.topic, e.partition): e.error_code for e in self.partition_errors}

    def _to_dict(self, kind: str) -> JsonDict:
        return {
            "kind": kind,
            "error_code": int(self.error_code),
            "partition_errors": [e.to_dict() for e in self.partition_errors],
        }

    @staticmethod
    def _parse(d: Mapping[str, Any]) -> tuple[ErrorCode, list[PartitionError]]:
        return (
            ErrorCode.parse(int(d.get("error_code", 0))),
            [PartitionError.from_dict(e) for e in d.get("partition_errors", ())],
        )


@dataclass(slots=True)
class LeaderAndIsrResponse(_PartitionErrorsResponse):
    """Top-level error, else per-partition errors (KAFKA_STORAGE_ERROR marks an offline log dir)."""

    kind: ClassVar[str] = "LeaderAndIsr"

    def to_dict(self) -> JsonDict:
        return self._to_dict(self.kind)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LeaderAndIsrResponse:
        _check_kind(d, cls.kind)
        error_code, partition_errors = cls._parse(d)
        return cls(error_code, partition_errors)


@dataclass(slots=True)
class StopReplicaResponse(_PartitionErrorsResponse):
    """Top-level error, else per-partition errors; topic deletion reads them (§10)."""

    kind: ClassVar[str] = "StopReplica"

    def to_dict(self) -> JsonDict:
        return self._to_dict(self.kind)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StopReplicaResponse:
        _check_kind(d, cls.kind)
        error_code, partition_errors = cls._parse(d)
        return cls(error_code, partition_errors)


@dataclass(slots=True)
class UpdateMetadataResponse:
    """Only a top-level error: the controller merely logs it."""

    kind: ClassVar[str] = "UpdateMetadata"

    error_code: ErrorCode = ErrorCode.NONE

    def to_dict(self) -> JsonDict:
        return {"kind": self.kind, "error_code": int(self.error_code)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UpdateMetadataResponse:
        _check_kind(d, cls.kind)
        return cls(ErrorCode.parse(int(d.get("error_code", 0))))


ControlRequest: TypeAlias = LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
ControlResponse: TypeAlias = LeaderAndIsrResponse | StopReplicaResponse | UpdateMetadataResponse

_REQUESTS: dict[str, type[LeaderAndIsrRequest] | type[StopReplicaRequest] | type[UpdateMetadataRequest]] = {
    LeaderAndIsrRequest.kind: LeaderAndIsrRequest,
    StopReplicaRequest.kind: StopReplicaRequest,
    UpdateMetadataRequest.kind: UpdateMetadataRequest,
}
_RESPONSES: dict[str, type[LeaderAndIsrResponse] | type[StopReplicaResponse] | type[UpdateMetadataResponse]] = {
    LeaderAndIsrResponse.kind: LeaderAndIsrResponse,
    StopReplicaResponse.kind: StopReplicaResponse,
    UpdateMetadataResponse.kind: UpdateMetadataResponse,
}


def _check_kind(d: Mapping[str, Any], expected: str) -> None:
    kind = d.get("kind", expected)
    if kind != expected:
        raise ValueError(f"expected a {expected} message, got kind={kind!r}")


def request_from_dict(d: Mapping[str, Any]) -> ControlRequest:
    """Decode any control request by its ``kind``."""
    try:
        cls = _REQUESTS[d["kind"]]
    except KeyError:
        raise ValueError(f"unknown control request kind: {d.get('kind')!r}") from None
    return cls.from_dict(d)


def response_from_dict(d: Mapping[str, Any]) -> ControlResponse:
    """Decode any control response by its ``kind``."""
    try:
        cls = _RESPONSES[d["kind"]]
    except KeyError:
        raise ValueError(f"unknown control response kind: {d.get('kind')!r}") from None
    return cls.from_dict(d)


def empty_response_for(request: ControlRequest, error_code: ErrorCode = ErrorCode.NONE) -> ControlResponse:
    """A response to ``request`` with ``error_code`` everywhere (brokers, fakes and error paths use it)."""
    if isinstance(request, LeaderAndIsrRequest):
        return LeaderAndIsrResponse(
            error_code,
            [PartitionError(s.topic, s.partition, error_code) for s in request.partition_states],
        )
    if isinstance(request, StopReplicaRequest):
        return StopReplicaResponse(
            error_code, [PartitionError(p.topic, p.partition, error_code) for p in request.partitions]
        )
    return UpdateMetadataResponse(error_code)
