"""Every message between the controller and the brokers, declared once as a msgspec ``Struct``.

The wire is JSON objects over HTTP (docs/protocol.md), readable and writable with ``curl``. Each
message type below *is* its wire form: msgspec encodes a struct's fields in order and decodes a body
straight into the struct, checking every value against the annotation on the way (strict mode: no
``"0"`` for an int, no ``4.9`` for an int, no ``"false"`` for a bool, no missing required field, no
error code outside ``ErrorCode``). A body that does not fit raises ``MessageError`` naming the
message and the field (``LeaderAndIsr request: Expected `int`, got `str` - at
`$.partition_states[3].leader_epoch```); the receiver answers it with HTTP 400 before applying
anything. Unknown keys are ignored, so a newer sender's extra fields do not break an older receiver.

Field names follow Kafka's request schemas (reference §6.3) in snake_case; error codes are Kafka's
numbers. The control requests and their responses carry ``kind`` (a msgspec tag), which must match
the path they are posted to. Per-partition parts are declared ``gc=False``: a 100,000-partition
request is 100,000 of them, they hold only strings, ints and tuples of ints (no cycles), and the
collector then never scans them. The request batch shares one partition state between every broker
that receives the same partition, so treat them as immutable even where they are not frozen.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from enum import IntEnum
from typing import Annotated, Any, ClassVar, Final, TypeAlias, TypeVar, cast

import msgspec

from controller_core.model import TopicPartition

# -- paths -----------------------------------------------------------------------------------------
# Broker endpoint (served by every broker agent on its CONTROL listener, which may share the port of
# its PLAINTEXT listener).
LEADER_AND_ISR_PATH: Final = "/v1/leader_and_isr"
STOP_REPLICA_PATH: Final = "/v1/stop_replica"
UPDATE_METADATA_PATH: Final = "/v1/update_metadata"
FETCH_PATH: Final = "/v1/fetch"
STATE_PATH: Final = "/v1/state"
HEALTH_PATH: Final = "/healthz"
# Controller endpoint (served by the active controller at the URL it writes into /controller).
ALTER_ISR_PATH: Final = "/v1/alter_isr"
CONTROLLED_SHUTDOWN_PATH: Final = "/v1/controlled_shutdown"
ALTER_PARTITION_REASSIGNMENTS_PATH: Final = "/v1/alter_partition_reassignments"

#: The listener a broker registers for controller traffic (``CONTROL://host:port``).
CONTROL_LISTENER: Final = "CONTROL"
#: The inter-broker listener: followers fetch from leaders here (``PLAINTEXT://host:port``).
REPLICATION_LISTENER: Final = "PLAINTEXT"

CONTENT_TYPE: Final = "application/json"


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
        """Map a number to a member; codes we do not know become UNKNOWN_SERVER_ERROR.

        For numbers this process computes itself (the controller API's results). A message on the
        wire is decoded strictly instead: an ``error_code`` outside this enum rejects the whole
        message (docs/protocol.md), which its receiver then treats as UNKNOWN_SERVER_ERROR for every
        partition of the request."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


Replicas: TypeAlias = tuple[int, ...]


class PartitionId(msgspec.Struct, frozen=True, gc=False):
    """A partition named on the wire as ``{"topic": ..., "partition": ...}``."""

    topic: str
    partition: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# ==================================================================================================
# Control requests (controller -> broker): LeaderAndIsr, StopReplica, UpdateMetadata
# ==================================================================================================
class _PartitionState(msgspec.Struct, gc=False):
    """The fields LeaderAndIsr and UpdateMetadata partition states share, in their wire order."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: Replicas
    zk_version: int
    replicas: Replicas

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class LeaderAndIsrPartitionState(_PartitionState, gc=False):
    """What one broker must do for one partition: follow or lead, at which epoch, with which ISR."""

    adding_replicas: Replicas = ()
    removing_replicas: Replicas = ()
    is_new: bool = False


class LiveLeader(msgspec.Struct, frozen=True, gc=False):
    """A leader named in a LeaderAndIsr request, with its inter-broker address (host null: unknown)."""

    id: int
    host: str | None
    port: int


class StopReplicaPartitionState(msgspec.Struct, gc=False):
    """Stop (and maybe delete) one replica; ``leader_epoch`` fences stale requests (-2: deleting)."""

    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class UpdateMetadataPartitionState(_PartitionState, gc=False):
    """One partition's metadata as every broker should serve it to clients."""

    offline_replicas: Replicas = ()


class UpdateMetadataEndpoint(msgspec.Struct, frozen=True, gc=False):
    """One listener of a live broker as carried in UpdateMetadata."""

    host: str | None
    port: int
    listener: str
    security_protocol: str = "PLAINTEXT"


class UpdateMetadataBroker(msgspec.Struct, frozen=True, gc=False):
    """A live-or-shutting-down broker as every broker should know it."""

    id: int
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = None


class PartitionError(msgspec.Struct, frozen=True, gc=False):
    """A per-partition result code in a response."""

    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class LeaderAndIsrRequest(msgspec.Struct, tag_field="kind", tag="LeaderAndIsr"):
    """Tell one broker which partitions it leads or follows (reference §6.3).

    ``controller_epoch`` is the sender's current epoch (brokers reject older ones); each partition
    state carries the epoch of the controller that *made* that decision.
    """

    kind: ClassVar[str] = "LeaderAndIsr"

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[LeaderAndIsrPartitionState]
    live_leaders: list[LiveLeader]
    topic_ids: dict[str, str] = {}


class StopReplicaRequest(msgspec.Struct, tag_field="kind", tag="StopReplica"):
    """Tell one broker to stop replicas, deleting their logs where ``delete_partition`` is set."""

    kind: ClassVar[str] = "StopReplica"

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: list[StopReplicaPartitionState]


class UpdateMetadataRequest(msgspec.Struct, tag_field="kind", tag="UpdateMetadata"):
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
    topic_ids: dict[str, str] = {}


class _PartitionErrorsResponse(msgspec.Struct, tag_field="kind"):
    error_code: ErrorCode = ErrorCode.NONE
    partition_errors: list[PartitionError] = []

    def errors_by_partition(self) -> dict[TopicPartition, ErrorCode]:
        return {TopicPartition(e.topic, e.partition): e.error_code for e in self.partition_errors}


class LeaderAndIsrResponse(_PartitionErrorsResponse, tag="LeaderAndIsr"):
    """Top-level error, else per-partition errors (KAFKA_STORAGE_ERROR marks an offline log dir)."""

    kind: ClassVar[str] = "LeaderAndIsr"


class StopReplicaResponse(_PartitionErrorsResponse, tag="StopReplica"):
    """Top-level error, else per-partition errors; topic deletion reads them (§10)."""

    kind: ClassVar[str] = "StopReplica"


class UpdateMetadataResponse(msgspec.Struct, tag_field="kind", tag="UpdateMetadata"):
    """Only a top-level error: the controller merely logs it."""

    kind: ClassVar[str] = "UpdateMetadata"

    error_code: ErrorCode = ErrorCode.NONE


ControlRequest: TypeAlias = LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
ControlResponse: TypeAlias = LeaderAndIsrResponse | StopReplicaResponse | UpdateMetadataResponse

#: Path of each control request, by its ``kind``.
CONTROL_REQUEST_PATHS: Final[Mapping[str, str]] = {
    LeaderAndIsrRequest.kind: LEADER_AND_ISR_PATH,
    StopReplicaRequest.kind: STOP_REPLICA_PATH,
    UpdateMetadataRequest.kind: UPDATE_METADATA_PATH,
}
_REQUEST_BY_PATH: Final[Mapping[str, type[ControlRequest]]] = {
    LEADER_AND_ISR_PATH: LeaderAndIsrRequest,
    STOP_REPLICA_PATH: StopReplicaRequest,
    UPDATE_METADATA_PATH: UpdateMetadataRequest,
}
_RESPONSE_BY_KIND: Final[Mapping[str, type[ControlResponse]]] = {
    LeaderAndIsrResponse.kind: LeaderAndIsrResponse,
    StopReplicaResponse.kind: StopReplicaResponse,
    UpdateMetadataResponse.kind: UpdateMetadataResponse,
}


def empty_response_for(request: ControlRequest, error_code: ErrorCode = ErrorCode.NONE) -> ControlResponse:
    """A response to ``request`` with ``error_code`` everywhere (brokers, fakes and error paths use it)."""
    if isinstance(request, LeaderAndIsrRequest):
        return LeaderAndIsrResponse(
            error_code, [PartitionError(s.topic, s.partition, error_code) for s in request.partition_states]
        )
    if isinstance(request, StopReplicaRequest):
        return StopReplicaResponse(
            error_code, [PartitionError(p.topic, p.partition, error_code) for p in request.partitions]
        )
    return UpdateMetadataResponse(error_code)


# ==================================================================================================
# Follower fetch (broker -> broker)
# ==================================================================================================
class FetchPartition(msgspec.Struct, frozen=True, gc=False):
    """One partition a follower asks for: records from ``fetch_offset`` (its log end offset).

    ``leader_epoch`` is the follower's current leader epoch (Kafka's ``current_leader_epoch``): the
    leader answers FENCED_LEADER_EPOCH when it is older than its own and UNKNOWN_LEADER_EPOCH when
    newer (the leader has not heard of that epoch yet); -1 skips the check. ``log_start_offset`` is
    the follower's own, for the leader's view of it. ``max_bytes`` bounds this partition's records
    (the follower's ``replica.fetch.max.bytes``; -1: the leader's default); at least one message is
    returned when any is available, as Kafka does, so a tiny limit cannot stall replication.
    """

    topic: str
    partition: int
    fetch_offset: int
    leader_epoch: int = -1
    log_start_offset: int = -1
    max_bytes: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class FetchRequest(msgspec.Struct, frozen=True):
    """A follower's fetch of every partition it follows from one leader broker.

    ``broker_epoch`` is informational (Kafka's 2.x follower fetch carries none); ``max_bytes``
    bounds the whole response, each partition being bounded by the leader's own per-partition limit.
    """

    replica_id: int
    max_bytes: Annotated[int, msgspec.Meta(gt=0)]
    partitions: tuple[FetchPartition, ...]
    broker_epoch: int = -1


class FetchedPartition(msgspec.Struct, frozen=True, gc=False):
    """The leader's answer for one partition.

    Records are synthetic: only their count (``record_count``, starting at the requested offset) and
    size travel, with ``epochs`` giving the leader epoch of each run of them as
    ``[[leader_epoch, first_offset], ...]`` so that the follower's leader-epoch cache matches the
    leader's. A ``log_end_offset`` below the requested offset tells the follower its log is longer
    than the leader's (an unclean election); it truncates to it, as Kafka does on OFFSET_OUT_OF_RANGE.
    """

    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    record_count: int = 0
    records_bytes: int = 0
    epochs: tuple[tuple[int, int], ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class FetchResponse(msgspec.Struct, frozen=True):
    """Top-level error (NONE unless the whole fetch was refused) and one entry per partition asked."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[FetchedPartition, ...] = ()


# ==================================================================================================
# AlterIsr, ControlledShutdown (broker -> controller) and AlterPartitionReassignments (operator)
# ==================================================================================================
class AlterIsrPartition(msgspec.Struct, frozen=True, gc=False):
    """A leader's proposal for one partition (reference §8.9); ``current_isr_version`` is the
    partition state znode version the leader knows (its ``zk_version``). An ISR is never empty."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: Annotated[Replicas, msgspec.Meta(min_length=1)]
    current_isr_version: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class AlterIsrRequest(msgspec.Struct, frozen=True):
    """ISR changes proposed by one leader broker, batched over its partitions."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[AlterIsrPartition, ...]


class AlterIsrPartitionResult(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """The controller's answer for one partition: on NONE the state it now holds (leader, leader
    epoch, ISR and the znode's new version); on an error only the code.

    The state fields are left out of the JSON while they hold their defaults (an error's answer);
    a NONE answer without them is refused as malformed.
    """

    topic: str
    partition: int
    error_code: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: Replicas = ()
    zk_version: int = -1

    def __post_init__(self) -> None:
        if self.error_code == ErrorCode.NONE and (self.leader_epoch < 0 or self.zk_version < 0 or not self.isr):
            raise ValueError("a result with error_code 0 needs leader, leader_epoch, isr and zk_version")

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class AlterIsrResponse(msgspec.Struct, frozen=True):
    """Top-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...) else one result per partition."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[AlterIsrPartitionResult, ...] = ()


class ControlledShutdownRequest(msgspec.Struct, frozen=True):
    """A broker asking the controller to move its leaderships away before it stops (§8.4)."""

    broker_id: int
    broker_epoch: int


class ControlledShutdownResponse(msgspec.Struct, frozen=True):
    """Success is ``error_code`` NONE *and* no remaining partitions; the broker retries otherwise."""

    error_code: ErrorCode = ErrorCode.NONE
    remaining_partitions: tuple[PartitionId, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.error_code == ErrorCode.NONE and not self.remaining_partitions


class ReassignmentTarget(msgspec.Struct, frozen=True, gc=False):
    """One partition of AlterPartitionReassignments: its target replicas, or null to cancel."""

    topic: str
    partition: int
    replicas: Replicas | None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class AlterPartitionReassignmentsRequest(msgspec.Struct, frozen=True):
    """KIP-455 AlterPartitionReassignments: per partition a target replica list, or None to cancel.

    Cancelling reverts a partition to its original replicas and stops its adding replicas; it is
    what ``/admin/reassign_partitions`` cannot express (reference §9.3, "API").
    """

    partitions: Annotated[tuple[ReassignmentTarget, ...], msgspec.Meta(min_length=1)]


class ReassignmentPartitionResult(msgspec.Struct, frozen=True, gc=False):
    """The controller's answer for one partition: NONE, or the code and a message saying why not."""

    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


class AlterPartitionReassignmentsResponse(msgspec.Struct, frozen=True):
    """Top-level ``error_code`` (NOT_CONTROLLER on a standby) and one result per partition."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[ReassignmentPartitionResult, ...] = ()


# ==================================================================================================
# Encoding and strict decoding
# ==================================================================================================
class MessageError(ValueError):
    """A body that is not the expected message; the text names the message and the field."""


M = TypeVar("M")

_encoder: Final = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
# msgspec builds a Struct type's decoding information when a decoder of it is first made, and not
# atomically: it runs Python code (reading the class's annotations) part-way, so another thread can
# build a decoder of the same types meanwhile and use half-built information. The process then dies
# of a segmentation fault in msgspec._core (seen: two handler threads of a controller's API decoding
# their first AlterIsr at once; reproduced by tests/unit/test_message_decoders_threads.py). Decoders
# are therefore made one at a time, under this lock; once made, decoding is safe from any thread.
_decoders_lock: Final = threading.Lock()


def encode(value: object) -> bytes:
    """Compact JSON of a message (or of any JSON-ready builtins: views, error bodies)."""
    return _encoder.encode(value)


def decode(body: bytes, message_type: type[M], what: str) -> M:
    """Decode ``body`` strictly as ``message_type``; ``MessageError`` naming ``what`` and the field."""
    decoder = _decoders.get(message_type)
    if decoder is None:
        with _decoders_lock:
            decoder = _decoders.get(message_type)
            if decoder is None:
                decoder = _decoders[message_type] = msgspec.json.Decoder(message_type)
    try:
        return cast(M, decoder.decode(body))
    except msgspec.ValidationError as exc:
        raise MessageError(f"{what}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise MessageError(f"{what}: body is not JSON ({exc})") from None


_T = TypeVar("_T")


class SharedList(list[_T]):
    """A partition-state list that several brokers' requests share (the batch gives every target broker
    the *same* UpdateMetadata ``partition_states``, and each replica of a replica list the same
    LeaderAndIsr part: ``PartedList``): its JSON is made once, by the first sender to encode it, and
    kept on the list itself, so it lives exactly as long as the requests that share it.

    Encoding it once instead of once per broker saves ~40 ms of held interpreter lock per extra broker
    at 100,000 partitions (``scripts/bench_messages.py``); keeping the JSON on the list, not in a cache
    keyed by its identity, drops it with the last request (a cache held a million-partition list and
    its 150 MB of JSON until four more large requests pushed them out). Do not mutate one once sent.
    """

    __slots__ = ("json",)

    json: bytes


_shared_lock: Final = threading.Lock()
_SHARED_LIST_MIN: Final = 1000
_HOLE: Final = msgspec.Raw(b"\x00")
"""Where a shared list goes in its request's JSON: a NUL byte, which encoded JSON never holds."""


def _shared_json(items: SharedList[Any]) -> bytes:
    # Encoding under the lock makes concurrent senders of the same list wait for one encoding.
    with _shared_lock:
        encoded = getattr(items, "json", None)
        if encoded is None:
            encoded = items.json = _encoder.encode(items)
        return encoded


def control_request_path(request: ControlRequest) -> str:
    """The broker path that serves ``request``."""
    return CONTROL_REQUEST_PATHS[request.kind]


class PartedList(list[_T]):
    """A broker's LeaderAndIsr ``partition_states`` that is, in order, the concatenation of ``parts``:
    shared lists that other brokers' requests hold too (the partitions of one replica list go to each
    of its replicas). Each part's JSON is made once (``SharedList``) and every body that holds the
    part sends it as it is: at a million partitions and replication factor 3 the LeaderAndIsr bodies
    of a failover are ~190 MB of JSON instead of ~560 MB, and the senders encode a third as much."""

    __slots__ = ("parts",)

    parts: list[SharedList[_T]]


def encode_control_request_parts(request: ControlRequest) -> list[bytes | memoryview]:
    """The JSON body of a control request in parts to be sent one after the other: one part, or, when
    a large ``partition_states`` is shared (an UpdateMetadata's ``SharedList``) or made of shared
    parts (a LeaderAndIsr's ``PartedList``), the request's JSON before the list, the list's JSON made
    once for every broker (in slices, not copied) and the rest. Joined, the parts are
    ``encode_control_request``'s bytes; sent as they are, no broker's body copies what it shares."""
    states = getattr(request, "partition_states", None)
    if states is None or len(states) < _SHARED_LIST_MIN:
        return [_encoder.encode(request)]
    middle: list[bytes | memoryview]
    if isinstance(request, UpdateMetadataRequest) and isinstance(states, SharedList):
        middle = [_shared_json(states)]
    elif isinstance(request, LeaderAndIsrRequest) and isinstance(states, PartedList):
        middle = [b"["]
        for part in states.parts:
            if part:
                if len(middle) > 1:
                    middle.append(b",")
                middle.append(memoryview(_shared_json(part))[1:-1])  # without its brackets
        middle.append(b"]")
    else:
        return [_encoder.encode(request)]
    outer = _encoder.encode(msgspec.structs.replace(request, partition_states=cast(Any, _HOLE)))
    head, _, tail = outer.partition(b"\x00")
    return [head, *middle, tail]


def encode_control_request(request: ControlRequest) -> bytes:
    """The JSON body of a control request (``encode_control_request_parts`` joined)."""
    parts = encode_control_request_parts(request)
    first = parts[0]
    return first if len(parts) == 1 and isinstance(first, bytes) else b"".join(parts)


def decode_control_request(path: str, body: bytes) -> ControlRequest:
    """Decode the body posted to a broker's control ``path``; its ``kind``, if present, must match."""
    message_type = _REQUEST_BY_PATH.get(path)
    if message_type is None:
        raise MessageError(f"{path} is not a control request path")
    return decode(body, message_type, f"{message_type.kind} request")


def decode_control_response(kind: str, body: bytes) -> ControlResponse:
    """Decode a broker's answer to a control request of ``kind``; its own ``kind`` must be the same."""
    return decode(body, _RESPONSE_BY_KIND[kind], f"{kind} response")
