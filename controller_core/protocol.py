"""The wire protocol between the controller and the broker agents: HTTP/1.1 + JSON (docs/protocol.md).

Why HTTP/JSON: it is plain, debuggable with ``curl``, needs only the standard library, and keeps
connections alive, so one controller-to-broker channel is one TCP connection. Kafka-level errors
travel *inside* the JSON (``error_code``, Kafka's numbers from ``requests.ErrorCode``) with HTTP 200;
HTTP statuses other than 200 mean the message itself could not be handled:

* 400 -- the body is not a valid message (a bug on the sending side; retrying cannot help);
* 404 / 405 -- no such path / method;
* 503 -- the receiver is not ready yet (a broker that has not registered); retry later;
* 500 -- the receiver failed while handling the message.

This module owns every path, every message of the broker endpoint (the three control requests of
``controller_core.requests`` plus follower fetch) and of the controller endpoint (AlterIsr and
ControlledShutdown), their JSON encoders/decoders (``ValueError`` with a message naming the field
on bad input), the keep-alive client (``JsonConnection``) and a small routed server
(``JsonHttpServer``) used by the broker agent and by test doubles.

Large messages: a LeaderAndIsr or UpdateMetadata for 100,000 partitions is about 20 MB of JSON.
``encode_control_request`` serialises the ``partition_states`` list of an UpdateMetadata request
once even when the same list goes to every broker (the request batch shares it), and both
directions pause the cyclic garbage collector while building or parsing such bodies, which roughly
halves the time (``gc_paused``).
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import json
import logging
import socket
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import orjson

from controller_core.model import TopicPartition
from controller_core.requests import (
    ControlRequest,
    ControlResponse,
    ErrorCode,
    JsonDict,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    request_from_dict,
    response_from_dict,
)

logger = logging.getLogger(__name__)

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

#: Path of each control request, by its ``kind``.
CONTROL_REQUEST_PATHS: Final[Mapping[str, str]] = {
    LeaderAndIsrRequest.kind: LEADER_AND_ISR_PATH,
    StopReplicaRequest.kind: STOP_REPLICA_PATH,
    UpdateMetadataRequest.kind: UPDATE_METADATA_PATH,
}
_KIND_BY_PATH: Final[Mapping[str, str]] = {path: kind for kind, path in CONTROL_REQUEST_PATHS.items()}

#: The listener a broker registers for controller traffic (``CONTROL://host:port``).
CONTROL_LISTENER: Final = "CONTROL"
#: The inter-broker listener: followers fetch from leaders here (``PLAINTEXT://host:port``).
REPLICATION_LISTENER: Final = "PLAINTEXT"
#: The extra key of ``/controller`` holding the active controller's base URL (``http://host:port``).
CONTROLLER_ENDPOINT_KEY: Final = "endpoint"

CONTENT_TYPE: Final = "application/json"
#: Bodies above this are refused (a 100,000-partition request is ~20 MB).
MAX_BODY_BYTES: Final = 256 * 1024 * 1024
#: Bodies above this are built and parsed with the garbage collector paused.
_LARGE_BODY_BYTES: Final = 1024 * 1024


# ==================================================================================================
# JSON helpers
# ==================================================================================================
class _GcPause:
    """Counts the threads inside ``gc_paused``: the collector is process-wide, so it comes back on
    only when the last of them leaves (and only if it was on when the first entered)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False


_gc_pause = _GcPause()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk build or parse of many small objects.

    Creating ~10^6 dicts and tuples triggers many collections that scan every young object again
    and again; none of them can find garbage, since everything built is still referenced. Nests and
    may be entered by several threads at once.
    """
    with _gc_pause.lock:
        if _gc_pause.depth == 0:
            _gc_pause.was_enabled = gc.isenabled()
            gc.disable()
        _gc_pause.depth += 1
    try:
        yield
    finally:
        with _gc_pause.lock:
            _gc_pause.depth -= 1
            if _gc_pause.depth == 0 and _gc_pause.was_enabled:
                gc.enable()


def dumps(value: Any) -> bytes:
    """Compact JSON bytes (the only encoding used on the wire).

    orjson writes the same compact JSON as ``json.dumps(separators=(",", ":"))`` (UTF-8 instead of
    ``\\u`` escapes, both valid JSON) several times faster, and serializes the request dataclasses
    directly (fields in order, tuples as arrays), which is what ``to_dict`` produces.
    """
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def loads_object(body: bytes, what: str) -> dict[str, Any]:
    """Parse a JSON object, raising ``ValueError`` naming ``what`` on anything else."""
    try:
        if len(body) > _LARGE_BODY_BYTES:
            with gc_paused():
                value = orjson.loads(body)
        else:
            value = orjson.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{what}: body is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what}: body must be a JSON object, got {type(value).__name__}")
    return value


def _int(d: Mapping[str, Any], key: str, what: str, default: int | None = None) -> int:
    value = d.get(key, default)
    # bool is an int subclass in Python but never a valid integer field.
    if type(value) is not int:
        if key not in d and default is None:
            raise ValueError(f"{what}: missing {key!r}")
        raise ValueError(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def _str(d: Mapping[str, Any], key: str, what: str) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{what}: {key!r} must be a string, got {value!r}")
    return value


def _int_list(d: Mapping[str, Any], key: str, what: str, default: Sequence[int] | None = None) -> tuple[int, ...]:
    value = d.get(key, default)
    if not isinstance(value, list | tuple) or any(type(v) is not int for v in value):
        raise ValueError(f"{what}: {key!r} must be a list of integers, got {value!r}")
    return tuple(value)


def _objects(d: Mapping[str, Any], key: str, what: str) -> list[dict[str, Any]]:
    value = d.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{what}: {key!r} must be a list of objects")
    return value


def _error_code(d: Mapping[str, Any], what: str) -> ErrorCode:
    return ErrorCode.parse(_int(d, "error_code", what, 0))


# ==================================================================================================
# Control requests (controller -> broker): LeaderAndIsr, StopReplica, UpdateMetadata
# ==================================================================================================
class _SharedListCache:
    """Remember the JSON of recently encoded lists, keyed by the identity of the list object.

    The request batch gives every target broker the *same* ``partition_states`` list of an
    UpdateMetadata request; encoding it once instead of once per broker is the difference between
    0.3 s and 1.5 s of CPU for 100,000 partitions and five brokers. The cache holds a reference to
    each list it remembers, so an id cannot be reused by another list while its entry lives.
    """

    def __init__(self, capacity: int = 4) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[int, tuple[list[Any], bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, items: list[Any]) -> bytes:
        # Encoding under the lock makes concurrent senders of the same list wait for one encoding.
        with self._lock:
            entry = self._entries.get(id(items))
            if entry is not None and entry[0] is items:
                self._entries.move_to_end(id(items))
                return entry[1]
            with gc_paused():
                # The dataclasses themselves: orjson writes exactly what their to_dict() holds.
                encoded = dumps(items)
            self._entries[id(items)] = (items, encoded)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
            return encoded


_shared_lists = _SharedListCache()
_EMPTY_STATES: Final = b'"partition_states":[]'


def control_request_path(request: ControlRequest) -> str:
    """The broker path that serves ``request``."""
    return CONTROL_REQUEST_PATHS[request.kind]


def encode_control_request(request: ControlRequest) -> bytes:
    """The JSON body of a control request (``request.to_dict()``), built once per request.

    UpdateMetadata's ``partition_states`` list is encoded through a shared cache (see
    ``_SharedListCache``) and spliced into the rest of the request.
    """
    if isinstance(request, UpdateMetadataRequest) and len(request.partition_states) > 1000:
        head = dumps(replace(request, partition_states=[]).to_dict())
        states = _shared_lists.encode(request.partition_states)
        # The key is written by to_dict() exactly once, before any value that could contain it.
        return head.replace(_EMPTY_STATES, b'"partition_states":' + states, 1)
    if isinstance(request, LeaderAndIsrRequest) and len(request.partition_states) > 1000:
        head = dumps(replace(request, partition_states=[]).to_dict())
        with gc_paused():
            states = dumps(request.partition_states)
        return head.replace(_EMPTY_STATES, b'"partition_states":' + states, 1)
    return dumps(request.to_dict())


def decode_control_request(path: str, body: bytes) -> ControlRequest:
    """Decode the body posted to a broker's control ``path``; its ``kind`` must match the path."""
    kind = _KIND_BY_PATH.get(path)
    if kind is None:
        raise ValueError(f"{path} is not a control request path")
    what = f"{kind} request"
    obj = loads_object(body, what)
    obj.setdefault("kind", kind)
    if obj["kind"] != kind:
        raise ValueError(f"{what}: posted to {path} but its kind is {obj['kind']!r}")
    try:
        with gc_paused():
            if kind == LeaderAndIsrRequest.kind:
                return _leader_and_isr_from_dict(obj)
            return request_from_dict(obj)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{what}: malformed ({type(exc).__name__}: {exc})") from None


def encode_control_response(response: ControlResponse) -> bytes:
    """The JSON body of a control response (``response.to_dict()``)."""
    if isinstance(response, LeaderAndIsrResponse | StopReplicaResponse) and len(response.partition_errors) > 1000:
        with gc_paused():
            return dumps(response.to_dict())  # PartitionError.to_dict == its fields; ErrorCode is an int
    return dumps(response.to_dict())


def decode_control_response(body: bytes) -> ControlResponse:
    """Decode a broker's answer to a control request (dispatching on ``kind``)."""
    obj = loads_object(body, "control response")
    try:
        with gc_paused():
            kind = obj.get("kind")
            if kind == LeaderAndIsrResponse.kind:
                return LeaderAndIsrResponse(_error_code(obj, "LeaderAndIsr response"), _partition_errors(obj))
            if kind == StopReplicaResponse.kind:
                return StopReplicaResponse(_error_code(obj, "StopReplica response"), _partition_errors(obj))
            return response_from_dict(obj)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"control response: malformed ({type(exc).__name__}: {exc})") from None


# -- bulk decoders ---------------------------------------------------------------------------------
# A LeaderAndIsr request, and its response, may list 100,000 partitions. These build the same
# objects as ``requests.*.from_dict`` (a unit test holds them equal) with one pass of exact type
# checks instead of a conversion per field, which is what keeps such a request well under a second.

_CODES: Final[Mapping[int, ErrorCode]] = {int(code): code for code in ErrorCode}


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if type(value) is not list:
        raise ValueError(f"{what}: expected a list of integers, got {value!r}")
    for item in value:
        if type(item) is not int:
            raise ValueError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(value)


def _leader_and_isr_from_dict(d: Mapping[str, Any]) -> LeaderAndIsrRequest:
    what = "LeaderAndIsr request"
    raw = d.get("partition_states", [])
    if type(raw) is not list:
        raise ValueError(f"{what}: 'partition_states' must be a list")
    states: list[LeaderAndIsrPartitionState] = []
    append = states.append
    state_type = LeaderAndIsrPartitionState
    for i, s in enumerate(raw):
        try:
            topic, partition = s["topic"], s["partition"]
            controller_epoch, leader, leader_epoch, zk_version = (
                s["controller_epoch"],
                s["leader"],
                s["leader_epoch"],
                s["zk_version"],
            )
            isr, replicas = s["isr"], s["replicas"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{what}: partition state {i} lacks {exc}") from None
        if not (
            type(topic) is str
            and type(partition) is int
            and type(controller_epoch) is int
            and type(leader) is int
            and type(leader_epoch) is int
            and type(zk_version) is int
        ):
            raise ValueError(f"{what}: partition state {i} has a field of the wrong type: {s!r}")
        adding, removing = s.get("adding_replicas"), s.get("removing_replicas")
        append(
            state_type(
                topic,
                partition,
                controller_epoch,
                leader,
                leader_epoch,
                _int_tuple(isr, f"{what} state {i} isr"),
                zk_version,
                _int_tuple(replicas, f"{what} state {i} replicas"),
                _int_tuple(adding, f"{what} state {i} adding_replicas") if adding else (),
                _int_tuple(removing, f"{what} state {i} removing_replicas") if removing else (),
                s.get("is_new") is True,
            )
        )
    return LeaderAndIsrRequest(
        controller_id=_int(d, "controller_id", what),
        controller_epoch=_int(d, "controller_epoch", what),
        broker_epoch=_int(d, "broker_epoch", what),
        partition_states=states,
        live_leaders=[LiveLeader.from_dict(b) for b in _objects(d, "live_leaders", what)],
        topic_ids={str(k): str(v) for k, v in d.get("topic_ids", {}).items()},
    )


def _partition_errors(d: Mapping[str, Any]) -> list[PartitionError]:
    raw = d.get("partition_errors", [])
    if type(raw) is not list:
        raise ValueError("control response: 'partition_errors' must be a list")
    out: list[PartitionError] = []
    append = out.append
    codes = _CODES
    for e in raw:
        topic, partition, code = e["topic"], e["partition"], e.get("error_code", 0)
        if type(topic) is not str or type(partition) is not int or type(code) is not int:
            raise ValueError(f"control response: bad partition error {e!r}")
        append(PartitionError(topic, partition, codes.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)))
    return out


# ==================================================================================================
# Follower fetch (broker -> broker)
# ==================================================================================================
@dataclass(frozen=True, slots=True)
class FetchPartition:
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

    def to_dict(self) -> JsonDict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "fetch_offset": self.fetch_offset,
            "leader_epoch": self.leader_epoch,
            "log_start_offset": self.log_start_offset,
            "max_bytes": self.max_bytes,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FetchPartition:
        what = "fetch partition"
        return cls(
            _str(d, "topic", what),
            _int(d, "partition", what),
            _int(d, "fetch_offset", what),
            _int(d, "leader_epoch", what, -1),
            _int(d, "log_start_offset", what, -1),
            _int(d, "max_bytes", what, -1),
        )


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's fetch of every partition it follows from one leader broker.

    ``broker_epoch`` is informational (Kafka's 2.x follower fetch carries none); ``max_bytes``
    bounds the whole response, each partition being bounded by the leader's own per-partition limit.
    """

    replica_id: int
    max_bytes: int
    partitions: tuple[FetchPartition, ...]
    broker_epoch: int = -1

    def to_dict(self) -> JsonDict:
        return {
            "replica_id": self.replica_id,
            "broker_epoch": self.broker_epoch,
            "max_bytes": self.max_bytes,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FetchRequest:
        what = "fetch request"
        max_bytes = _int(d, "max_bytes", what)
        if max_bytes <= 0:
            raise ValueError(f"{what}: 'max_bytes' must be positive, got {max_bytes}")
        return cls(
            replica_id=_int(d, "replica_id", what),
            max_bytes=max_bytes,
            partitions=tuple(FetchPartition.from_dict(p) for p in _objects(d, "partitions", what)),
            broker_epoch=_int(d, "broker_epoch", what, -1),
        )


@dataclass(frozen=True, slots=True)
class FetchedPartition:
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

    def to_dict(self) -> JsonDict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "error_code": int(self.error_code),
            "high_watermark": self.high_watermark,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "record_count": self.record_count,
            "records_bytes": self.records_bytes,
            "epochs": [list(run) for run in self.epochs],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FetchedPartition:
        what = "fetched partition"
        raw_epochs = d.get("epochs", [])
        if not isinstance(raw_epochs, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(type(v) is int for v in r) for r in raw_epochs
        ):
            raise ValueError(f"{what}: 'epochs' must be a list of [leader_epoch, first_offset] pairs")
        return cls(
            topic=_str(d, "topic", what),
            partition=_int(d, "partition", what),
            error_code=_error_code(d, what),
            high_watermark=_int(d, "high_watermark", what, -1),
            log_start_offset=_int(d, "log_start_offset", what, -1),
            log_end_offset=_int(d, "log_end_offset", what, -1),
            record_count=_int(d, "record_count", what, 0),
            records_bytes=_int(d, "records_bytes", what, 0),
            epochs=tuple((r[0], r[1]) for r in raw_epochs),
        )


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Top-level error (NONE unless the whole fetch was refused) and one entry per partition asked."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[FetchedPartition, ...] = ()

    def to_dict(self) -> JsonDict:
        return {"error_code": int(self.error_code), "partitions": [p.to_dict() for p in self.partitions]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FetchResponse:
        what = "fetch response"
        return cls(
            _error_code(d, what),
            tuple(FetchedPartition.from_dict(p) for p in _objects(d, "partitions", what)),
        )


# ==================================================================================================
# AlterIsr and ControlledShutdown (broker -> controller)
# ==================================================================================================
@dataclass(frozen=True, slots=True)
class AlterIsrPartition:
    """A leader's proposal for one partition (reference §8.9); ``current_isr_version`` is the
    partition state znode version the leader knows (its ``zk_version``)."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    current_isr_version: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> JsonDict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader_epoch": self.leader_epoch,
            "new_isr": list(self.new_isr),
            "current_isr_version": self.current_isr_version,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterIsrPartition:
        what = "AlterIsr partition"
        new_isr = _int_list(d, "new_isr", what)
        if not new_isr:
            raise ValueError(f"{what}: 'new_isr' must not be empty")
        return cls(
            _str(d, "topic", what),
            _int(d, "partition", what),
            _int(d, "leader_epoch", what),
            new_isr,
            _int(d, "current_isr_version", what),
        )


@dataclass(frozen=True, slots=True)
class AlterIsrRequest:
    """ISR changes proposed by one leader broker, batched over its partitions."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[AlterIsrPartition, ...]

    def to_dict(self) -> JsonDict:
        return {
            "broker_id": self.broker_id,
            "broker_epoch": self.broker_epoch,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterIsrRequest:
        what = "AlterIsr request"
        return cls(
            _int(d, "broker_id", what),
            _int(d, "broker_epoch", what),
            tuple(AlterIsrPartition.from_dict(p) for p in _objects(d, "partitions", what)),
        )


@dataclass(frozen=True, slots=True)
class AlterIsrPartitionResult:
    """The controller's answer for one partition: on NONE the state it now holds (leader, leader
    epoch, ISR and the znode's new version); on an error only the code."""

    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    zk_version: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"topic": self.topic, "partition": self.partition, "error_code": int(self.error_code)}
        if self.error_code == ErrorCode.NONE:
            d.update(leader=self.leader, leader_epoch=self.leader_epoch, isr=list(self.isr), zk_version=self.zk_version)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterIsrPartitionResult:
        what = "AlterIsr result"
        error = _error_code(d, what)
        if error != ErrorCode.NONE:
            return cls(_str(d, "topic", what), _int(d, "partition", what), error)
        return cls(
            _str(d, "topic", what),
            _int(d, "partition", what),
            error,
            _int(d, "leader", what),
            _int(d, "leader_epoch", what),
            _int_list(d, "isr", what),
            _int(d, "zk_version", what),
        )


@dataclass(frozen=True, slots=True)
class AlterIsrResponse:
    """Top-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...) else one result per partition."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[AlterIsrPartitionResult, ...] = ()

    def to_dict(self) -> JsonDict:
        return {"error_code": int(self.error_code), "partitions": [p.to_dict() for p in self.partitions]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterIsrResponse:
        what = "AlterIsr response"
        return cls(
            _error_code(d, what),
            tuple(AlterIsrPartitionResult.from_dict(p) for p in _objects(d, "partitions", what)),
        )


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    """A broker asking the controller to move its leaderships away before it stops (§8.4)."""

    broker_id: int
    broker_epoch: int

    def to_dict(self) -> JsonDict:
        return {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ControlledShutdownRequest:
        what = "ControlledShutdown request"
        return cls(_int(d, "broker_id", what), _int(d, "broker_epoch", what))


@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    """Success is ``error_code`` NONE *and* no remaining partitions; the broker retries otherwise."""

    error_code: ErrorCode = ErrorCode.NONE
    remaining_partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)

    @property
    def succeeded(self) -> bool:
        return self.error_code == ErrorCode.NONE and not self.remaining_partitions

    def to_dict(self) -> JsonDict:
        return {
            "error_code": int(self.error_code),
            "remaining_partitions": [
                {"topic": tp.topic, "partition": tp.partition} for tp in self.remaining_partitions
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ControlledShutdownResponse:
        what = "ControlledShutdown response"
        return cls(
            _error_code(d, what),
            tuple(
                TopicPartition(_str(p, "topic", what), _int(p, "partition", what))
                for p in _objects(d, "remaining_partitions", what)
            ),
        )


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequest:
    """KIP-455 AlterPartitionReassignments: per partition a target replica list, or None to cancel.

    Cancelling reverts a partition to its original replicas and stops its adding replicas; it is
    what ``/admin/reassign_partitions`` cannot express (reference §9.3, "API").
    """

    partitions: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]

    def to_dict(self) -> JsonDict:
        return {
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": None if r is None else list(r)}
                for tp, r in self.partitions
            ]
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterPartitionReassignmentsRequest:
        what = "AlterPartitionReassignments request"
        out: list[tuple[TopicPartition, tuple[int, ...] | None]] = []
        for p in _objects(d, "partitions", what):
            tp = TopicPartition(_str(p, "topic", what), _int(p, "partition", what))
            if "replicas" not in p:
                raise ValueError(f"{what}: {tp} needs 'replicas' (a list, or null to cancel)")
            out.append((tp, None if p["replicas"] is None else _int_list(p, "replicas", what)))
        if not out:
            raise ValueError(f"{what}: no partitions")
        return cls(tuple(out))


@dataclass(frozen=True, slots=True)
class ReassignmentPartitionResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsResponse:
    """Top-level ``error_code`` (NOT_CONTROLLER on a standby) and one result per partition."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[ReassignmentPartitionResult, ...] = field(default_factory=tuple)

    def to_dict(self) -> JsonDict:
        return {
            "error_code": int(self.error_code),
            "partitions": [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "error_code": int(r.error_code),
                    "error_message": r.error_message,
                }
                for r in self.partitions
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterPartitionReassignmentsResponse:
        what = "AlterPartitionReassignments response"
        return cls(
            _error_code(d, what),
            tuple(
                ReassignmentPartitionResult(
                    _str(p, "topic", what),
                    _int(p, "partition", what),
                    _error_code(p, what),
                    str(p.get("error_message") or ""),
                )
                for p in _objects(d, "partitions", what)
            ),
        )


def controller_endpoint(extra: Mapping[str, Any]) -> str | None:
    """The controller API URL from the extra keys of ``/controller`` (None when absent or invalid)."""
    value = extra.get(CONTROLLER_ENDPOINT_KEY)
    if not isinstance(value, str):
        return None
    try:
        split_url(value)
    except ValueError:
        return None
    return value


def split_url(url: str) -> tuple[str, int]:
    """``http://host:port`` -> ``(host, port)``; only plain HTTP is spoken."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"not an http://host:port URL: {url!r}")
    return parts.hostname, parts.port


# ==================================================================================================
# Transport: a keep-alive client and a routed server
# ==================================================================================================
class HttpStatusError(Exception):
    """The peer answered with an HTTP status other than 200."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message

    @property
    def retriable(self) -> bool:
        """Only "not ready yet" is worth resending unchanged."""
        return self.status == HTTPStatus.SERVICE_UNAVAILABLE


class JsonConnection:
    """One keep-alive HTTP connection to one peer; not thread-safe (one owner thread).

    Any failure (refused, reset, timeout, malformed answer) closes the connection and raises; the
    next ``post`` reconnects. One exception, as HTTP clients do: a kept-alive connection that the
    peer closed while idle (it restarted, or timed the connection out) fails at once on reuse, and
    the request is then sent again once on a fresh connection. ``abort()`` may be called from
    another thread to break a blocked call.

    Example::

        conn = JsonConnection("127.0.0.1", 9092, timeout=30.0)
        body = conn.post(LEADER_AND_ISR_PATH, encode_control_request(request))
    """

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._reused = False
        self._stale = False
        self._aborted = False

    def _request(self, method: str, path: str, body: bytes | None) -> bytes:
        if self._aborted:
            raise ConnectionAbortedError(f"connection to {self.host}:{self.port} was aborted")
        try:
            return self._attempt(method, path, body)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            if not self._stale or self._aborted:
                raise
            return self._attempt(method, path, body)

    def _attempt(self, method: str, path: str, body: bytes | None) -> bytes:
        self._stale = False
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._reused = False
        conn = self._conn
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except BaseException:
            self._stale = self._reused  # a reused connection that broke: probably closed while idle
            self.close()
            raise
        self._reused = True
        if response.will_close:
            self.close()
        if response.status != HTTPStatus.OK:
            raise HttpStatusError(response.status, _error_message(data))
        return data

    def post(self, path: str, body: bytes) -> bytes:
        """POST a JSON body; return the 200 answer's body (``HttpStatusError`` otherwise)."""
        return self._request("POST", path, body)

    def get(self, path: str) -> bytes:
        """GET a path; return the 200 answer's body."""
        return self._request("GET", path, None)

    def abort(self) -> None:
        """Break an in-flight call from another thread (its owner sees an ``OSError``); final: every
        later call fails too (the owner is stopping)."""
        self._aborted = True
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _error_message(data: bytes) -> str:
    try:
        value = json.loads(data)
    except ValueError:
        return data[:200].decode(errors="replace")
    if isinstance(value, dict) and isinstance(value.get("error"), str):
        return str(value["error"])
    return data[:200].decode(errors="replace")


class HttpError(Exception):
    """Raised by a route handler to answer with a non-200 status and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


PostHandler = Callable[[bytes], bytes]
"""Handle a POST body; return the JSON answer. ``ValueError`` becomes HTTP 400, ``HttpError`` its status."""

GetHandler = Callable[[Mapping[str, str]], bytes]
"""Handle a GET with its query parameters; return the JSON answer."""


class JsonHttpServer:
    """A threaded HTTP/1.1 server routing exact paths to handlers that take and return JSON bytes.

    Each connection gets a thread and may carry many requests (keep-alive). ``close()`` also cuts
    the established connections, so a stopped server looks dead to its peers, as a crashed one would.

    Example::

        server = JsonHttpServer("127.0.0.1", 0, post={"/v1/alter_isr": handle}, get={"/healthz": health})
        server.start()
        ...
        server.close()
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        post: Mapping[str, PostHandler] | None = None,
        get: Mapping[str, GetHandler] | None = None,
        name: str = "json-http",
    ) -> None:
        self._post = dict(post or {})
        self._get = dict(get or {})
        self._name = name
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._server = _TrackingServer((host, port), _make_handler(self), self)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def route_post(self, path: str, handler: PostHandler) -> None:
        self._post[path] = handler

    def route_get(self, path: str, handler: GetHandler) -> None:
        self._get[path] = handler

    def start(self) -> None:
        """Serve on a daemon thread (the socket is already bound, so the port is known before)."""
        self._thread = threading.Thread(target=self._server.serve_forever, name=self._name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, cut every open connection and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5.0)
            self._thread = None
        self._server.server_close()
        with self._open_lock:
            sockets = list(self._open)
            self._open.clear()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _track(self, sock: socket.socket, open_: bool) -> None:
        with self._open_lock:
            if open_:
                self._open.add(sock)
            else:
                self._open.discard(sock)


class _TrackingServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: JsonHttpServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        self.owner._track(request, True)
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.owner._track(request, False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer that gave up (timeout, shutdown) breaks the pipe under our answer: routine, not a bug.
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            logger.debug("%s: connection from %s ended: %s", self.owner._name, client_address, error)
            return
        logger.exception("%s: error serving %s", self.owner._name, client_address)


def _make_handler(server: JsonHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kcp/1"

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s: " + format, server._name, *args)

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _fail(self, status: int, message: str) -> None:
            self._reply(status, dumps({"error": message}))

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            handler = server._get.get(parts.path)
            if handler is None:
                status = HTTPStatus.METHOD_NOT_ALLOWED if parts.path in server._post else HTTPStatus.NOT_FOUND
                self._fail(status, f"no GET {parts.path}")
                return
            self._run(lambda: handler(dict(parse_qsl(parts.query))))

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._fail(HTTPStatus.BAD_REQUEST, f"Content-Length must be 0..{MAX_BODY_BYTES}")
                return
            body = self.rfile.read(length)
            handler = server._post.get(path)
            if handler is None:
                status = HTTPStatus.METHOD_NOT_ALLOWED if path in server._get else HTTPStatus.NOT_FOUND
                self._fail(status, f"no POST {path}")
                return
            self._run(lambda: handler(body))

        def _run(self, call: Callable[[], bytes]) -> None:
            try:
                answer = call()
            except HttpError as exc:
                self._fail(exc.status, exc.message)
            except ValueError as exc:
                self._fail(HTTPStatus.BAD_REQUEST, str(exc))
            except Exception as exc:
                logger.exception("%s: handler for %s failed", server._name, self.path)
                self._fail(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            else:
                self._reply(HTTPStatus.OK, answer)

    return Handler
