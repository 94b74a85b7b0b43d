"""Encoders and decoders for every JSON format Kafka keeps in ZooKeeper (reference §1.2).

Guarantees:

* What we write is what Kafka writes (same keys, same types: ``timestamp`` is a *string*,
  ``/controller_epoch`` a bare decimal), so Kafka's own brokers and tools read our znodes and we read
  theirs. Key order is not significant anywhere; we emit compact JSON.
* Decoders parse by key and ignore unknown keys, as Kafka's readers do; older and newer format
  versions decode per Kafka's rules (broker registrations v1..v5 and unknown future versions, topic
  assignments v1..v3).
* Every decoder raises ``ValueError`` with a message naming the format and the problem on bad input
  (not JSON, wrong type, missing key). Callers decide whether that is fatal (Kafka's controller logs
  and ignores an invalid ``/admin/reassign_partitions``, for instance).
* The partition-state codec is on the failover hot path (one call per partition): the decoder is
  msgspec's (types checked in C), and the encoder is a single format string.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import msgspec
import orjson

from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)

CONTROLLER_JSON_VERSION: Final = 1
BROKER_REGISTRATION_VERSION: Final = 5
TOPIC_ASSIGNMENT_VERSION: Final = 3
PARTITION_STATE_VERSION: Final = 1
LOG_DIR_FAILURE_EVENT: Final = 1
FEATURE_STATUS_DISABLED: Final = 0
FEATURE_STATUS_ENABLED: Final = 1


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)  # int keys as strings, as json.dumps does


def _loads(data: bytes | None, what: str) -> Any:
    if data is None or data == b"":
        raise ValueError(f"{what}: the znode holds no data")
    try:
        return orjson.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{what}: not valid JSON ({exc}): {data[:200]!r}") from None


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    # bool is an int subclass in Python but never a valid Kafka integer field.
    if type(value) is not int:
        raise ValueError(f"{what}: expected an integer, got {value!r}")
    return value


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(type(v) is not int for v in value):
        raise ValueError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(value)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected a string, got {value!r}")
    return value


def _timestamp(value: Any, what: str) -> int | None:
    """Kafka writes timestamps as strings of ms; accept an integer too, and absence."""
    if value is None:
        return None
    if type(value) is int:
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    raise ValueError(f"{what}: timestamp must be a decimal string of milliseconds, got {value!r}")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ==================================================================================================
# /controller and /controller_epoch (§1.2.1, §1.3)
# ==================================================================================================
@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """The content of ``/controller``: who the controller is, plus any extra keys it wrote.

    ``extra`` holds every key other than ``version``/``brokerid``/``timestamp`` (ours: ``endpoint``,
    the controller's API address; Kafka 3.4+: ``kraftControllerEpoch``).
    """

    broker_id: int
    timestamp_ms: int | None = None
    version: int = CONTROLLER_JSON_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)


_CONTROLLER_KEYS: Final = frozenset({"version", "brokerid", "timestamp"})


def encode_controller(broker_id: int, timestamp_ms: int | None = None, extra: Mapping[str, Any] | None = None) -> bytes:
    """``{"version":1,"brokerid":3,"timestamp":"1650000000000", ...extra}``.

    ``extra`` keys are added as they are (Kafka's readers ignore them); they may not shadow the three
    standard keys.
    """
    body: dict[str, Any] = {
        "version": CONTROLLER_JSON_VERSION,
        "brokerid": int(broker_id),
        "timestamp": str(_now_ms() if timestamp_ms is None else int(timestamp_ms)),
    }
    if extra:
        clash = _CONTROLLER_KEYS.intersection(extra)
        if clash:
            raise ValueError(f"/controller extra keys may not replace {sorted(clash)}")
        body.update(extra)
    return _dumps(body)


def decode_controller(data: bytes | None) -> ControllerInfo:
    """Parse ``/controller``; ``brokerid`` is required, everything else optional."""
    obj = _object(_loads(data, "/controller"), "/controller")
    if "brokerid" not in obj:
        raise ValueError("/controller: missing 'brokerid'")
    return ControllerInfo(
        broker_id=_int(obj["brokerid"], "/controller brokerid"),
        timestamp_ms=_timestamp(obj.get("timestamp"), "/controller"),
        version=_int(obj.get("version", CONTROLLER_JSON_VERSION), "/controller version"),
        extra={k: v for k, v in obj.items() if k not in _CONTROLLER_KEYS},
    )


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the epoch as a bare decimal string, e.g. ``5``."""
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    """Parse ``/controller_epoch`` (a decimal string)."""
    if not data:
        raise ValueError("/controller_epoch: the znode holds no data")
    text = data.decode("ascii", errors="replace").strip()
    if not text.lstrip("-").isdigit():
        raise ValueError(f"/controller_epoch: not a decimal integer: {data[:50]!r}")
    return int(text)


# ==================================================================================================
# /brokers/ids/<id> (§1.2.2)
# ==================================================================================================
def encode_broker_registration(registration: BrokerRegistration) -> bytes:
    """Version-5 registration JSON as a 2.7+ broker writes it.

    ``host``/``port`` are those of the first endpoint whose security protocol is PLAINTEXT (null/-1
    when there is none); ``timestamp`` is ``registration.timestamp_ms`` or now, as a string;
    ``rack`` only when set; ``features`` always (``{}`` when none).
    """
    if not registration.endpoints:
        raise ValueError(f"broker {registration.id}: a registration needs at least one endpoint")
    plaintext = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    body: dict[str, Any] = {
        "version": BROKER_REGISTRATION_VERSION,
        "host": plaintext.host if plaintext is not None else None,
        "port": plaintext.port if plaintext is not None else -1,
        "jmx_port": int(registration.jmx_port),
        "timestamp": str(_now_ms() if registration.timestamp_ms is None else int(registration.timestamp_ms)),
        "endpoints": [e.connection_string() for e in registration.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in registration.endpoints},
        "features": {
            name: {"min_version": int(lo), "max_version": int(hi)} for name, (lo, hi) in registration.features.items()
        },
    }
    if registration.rack is not None:
        body["rack"] = registration.rack
    return _dumps(body)


def decode_broker_registration(broker_id: int, data: bytes | None, epoch: int) -> BrokerRegistration:
    """Parse a broker registration of any version, with ``epoch`` = the znode's czxid.

    Rules (Kafka's ``BrokerIdZNode.decode``): version < 1 is an error; version 1 gives one PLAINTEXT
    endpoint from ``host``/``port``; version >= 2 (future versions included) parses ``endpoints``,
    looking each listener's security protocol up in ``listener_security_protocol_map`` when present,
    else in the default map (each security-protocol name maps to itself; another name is an error).
    """
    what = f"/brokers/ids/{broker_id}"
    obj = _object(_loads(data, what), what)
    version = _int(obj.get("version"), f"{what} version")
    if version < 1:
        raise ValueError(f"{what}: unsupported registration version {version}")
    if version == 1:
        host = obj.get("host")
        if host is not None and not isinstance(host, str):
            raise ValueError(f"{what}: host must be a string, got {host!r}")
        endpoints: tuple[EndPoint, ...] = (
            EndPoint("PLAINTEXT", host or None, _int(obj.get("port"), f"{what} port"), "PLAINTEXT"),
        )
    else:
        raw_endpoints = obj.get("endpoints")
        if not isinstance(raw_endpoints, list) or not all(isinstance(e, str) for e in raw_endpoints):
            raise ValueError(f"{what}: 'endpoints' must be a list of strings, got {raw_endpoints!r}")
        raw_map = obj.get("listener_security_protocol_map")
        if raw_map is None:
            protocol_map: dict[str, str] = {}  # Kafka's default: only security-protocol names resolve
        else:
            raw_map = _object(raw_map, f"{what} listener_security_protocol_map")
            protocol_map = {str(k).upper(): _str(v, f"{what} protocol of {k}").upper() for k, v in raw_map.items()}
        try:
            endpoints = tuple(EndPoint.parse(e, protocol_map) for e in raw_endpoints)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ValueError(f"{what}: rack must be a string or null, got {rack!r}")
    features: dict[str, tuple[int, int]] = {}
    raw_features = obj.get("features")
    if raw_features is not None:
        for name, raw_range in _object(raw_features, f"{what} features").items():
            rng = _object(raw_range, f"{what} feature {name}")
            features[name] = (
                _int(rng.get("min_version"), f"{what} feature {name} min_version"),
                _int(rng.get("max_version"), f"{what} feature {name} max_version"),
            )
    jmx_port = obj.get("jmx_port", -1)
    return BrokerRegistration(
        id=broker_id,
        endpoints=endpoints,
        epoch=epoch,
        rack=rack,
        timestamp_ms=_timestamp(obj.get("timestamp"), what),
        jmx_port=_int(jmx_port, f"{what} jmx_port") if jmx_port is not None else -1,
        features=features,
        version=version,
    )


# ==================================================================================================
# /brokers/topics/<topic> (§1.2.3)
# ==================================================================================================
class TopicAssignment(NamedTuple):
    """A topic znode: the topic id (None when the topic has none yet) and each partition's assignment."""

    topic_id: str | None
    partitions: dict[int, ReplicaAssignment]


def new_topic_id() -> str:
    """A fresh topic id as Kafka prints one: URL-safe base64 of a random UUID, no padding.

    Like Kafka's ``Uuid.randomUuid`` it never returns the all-zero id, and (as 3.x does) it avoids ids
    starting with ``-``, which command-line tools mistake for options.
    """
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if raw != bytes(16) and not text.startswith("-"):
            return text


def encode_topic_assignment(assignment: Mapping[int, ReplicaAssignment], topic_id: str | None = None) -> bytes:
    """Version-3 topic znode: ``partitions`` always; ``adding_replicas``/``removing_replicas`` always
    present but listing only partitions with a non-empty list; ``topic_id`` only when known."""
    partitions: dict[str, list[int]] = {}
    adding: dict[str, list[int]] = {}
    removing: dict[str, list[int]] = {}
    for partition in sorted(assignment):
        a = assignment[partition]
        key = str(int(partition))
        partitions[key] = list(a.replicas)
        if a.adding_replicas:
            adding[key] = list(a.adding_replicas)
        if a.removing_replicas:
            removing[key] = list(a.removing_replicas)
    body: dict[str, Any] = {
        "version": TOPIC_ASSIGNMENT_VERSION,
        "partitions": partitions,
        "adding_replicas": adding,
        "removing_replicas": removing,
    }
    if topic_id is not None:
        body["topic_id"] = topic_id
    return _dumps(body)


_INT_ONLY: Final = frozenset({int})


def _partition_lists(raw: Any, what: str) -> dict[int, tuple[int, ...]]:
    if raw is None:
        return {}
    out: dict[int, tuple[int, ...]] = {}
    for key, replicas in _object(raw, what).items():
        # The checks run for every partition of a failover (100,000): C-level calls only, and the
        # message is built only for a bad entry. (bool is an int subclass, hence the exact type set.)
        if type(replicas) is list and key.isdigit() and set(map(type, replicas)) <= _INT_ONLY:
            out[int(key)] = tuple(replicas)
            continue
        if not isinstance(key, str) or not key.isdigit():
            raise ValueError(f"{what}: partition ids must be decimal strings, got {key!r}")
        out[int(key)] = _int_list(replicas, f"{what}[{key}]")
    return out


def decode_topic_assignment(
    topic: str, data: bytes | None, shared: dict[tuple[int, ...], ReplicaAssignment] | None = None
) -> TopicAssignment:
    """Parse a topic znode of version 1, 2 or 3; missing ``adding_replicas``/``removing_replicas``/
    ``topic_id`` decode as empty / None, and a znode without data as no partitions.

    ``shared``: assignments (immutable) already built for the same replica list, reused rather than
    built again; a bulk read passes one dictionary for all its topics, so a failover holds one object
    per distinct replica list, not one per partition.
    """
    if not data:
        return TopicAssignment(None, {})
    try:
        znode = _TOPIC_DECODER.decode(data)
    except msgspec.DecodeError:
        return _decode_topic_assignment_checked(topic, data, shared)  # which explains what is wrong
    replicas = znode.partitions or {}
    adding = znode.adding_replicas or {}
    removing = znode.removing_replicas or {}
    if (replicas and min(replicas) < 0) or (adding and min(adding) < 0) or (removing and min(removing) < 0):
        return _decode_topic_assignment_checked(topic, data, shared)
    return _topic_assignment(znode.topic_id, replicas, adding, removing, shared)


class _TopicZnode(msgspec.Struct, frozen=True, gc=False):
    """A topic znode's fields as msgspec decodes them: partition keys must be canonical decimal
    strings (``"0"``; a negative one is caught after), replica lists lists of ``int`` (not ``true``,
    ``2.0`` or ``null``), unknown keys ignored. What it rejects goes to the checked decoder, which
    accepts what Kafka's reader does and otherwise says what is wrong."""

    partitions: dict[int, tuple[int, ...]] | None = None
    adding_replicas: dict[int, tuple[int, ...]] | None = None
    removing_replicas: dict[int, tuple[int, ...]] | None = None
    topic_id: str | None = None


_TOPIC_DECODER: Final = msgspec.json.Decoder(_TopicZnode)  # built at import: see _STATE_DECODER


def _decode_topic_assignment_checked(
    topic: str, data: bytes, shared: dict[tuple[int, ...], ReplicaAssignment] | None
) -> TopicAssignment:
    """``decode_topic_assignment`` with every check in Python and a message naming the bad entry."""
    what = f"/brokers/topics/{topic}"
    obj = _object(_loads(data, what), what)
    replicas = _partition_lists(obj.get("partitions"), f"{what} partitions")
    adding = _partition_lists(obj.get("adding_replicas"), f"{what} adding_replicas")
    removing = _partition_lists(obj.get("removing_replicas"), f"{what} removing_replicas")
    topic_id = obj.get("topic_id")
    if topic_id is not None and not isinstance(topic_id, str):
        raise ValueError(f"{what}: topic_id must be a string, got {topic_id!r}")
    return _topic_assignment(topic_id, replicas, adding, removing, shared)


def _topic_assignment(
    topic_id: str | None,
    replicas: dict[int, tuple[int, ...]],
    adding: dict[int, tuple[int, ...]],
    removing: dict[int, tuple[int, ...]],
    shared: dict[tuple[int, ...], ReplicaAssignment] | None,
) -> TopicAssignment:
    if adding or removing:
        return TopicAssignment(
            topic_id,
            {p: ReplicaAssignment(rs, adding.get(p, ()), removing.get(p, ())) for p, rs in replicas.items()},
        )
    cache = shared if shared is not None else {}
    partitions: dict[int, ReplicaAssignment] = {}
    for p, rs in replicas.items():
        assignment = cache.get(rs)
        if assignment is None:
            assignment = cache[rs] = ReplicaAssignment(rs)
        partitions[p] = assignment
    return TopicAssignment(topic_id, partitions)


# ==================================================================================================
# /brokers/topics/<topic>/partitions/<p>/state (§1.2.4) -- hot path
# ==================================================================================================
def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """``{"controller_epoch":50,"leader":5,"version":1,"leader_epoch":7,"isr":[5,6]}`` (no zk version:
    that is the znode's data version)."""
    return encode_leader_and_isr(state.leader_and_isr, state.controller_epoch)


def encode_leader_and_isr(lai: LeaderAndIsr, controller_epoch: int) -> bytes:
    """``encode_partition_state`` of ``LeaderIsrAndControllerEpoch(lai, controller_epoch)``, without
    building it (the controller's writes encode 10^5 of these in one event)."""
    # map(str) rather than a generator: this runs for every partition of a 100,000-partition write.
    return b'{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%s]}' % (
        controller_epoch,
        lai.leader,
        lai.leader_epoch,
        ",".join(map(str, lai.isr)).encode(),
    )


def encode_leader_and_isr_many(states: Iterable[LeaderAndIsr], controller_epoch: int) -> list[bytes]:
    """``encode_leader_and_isr`` of each of ``states``, the same bytes, about half the CPU: the
    controller epoch goes into the format once and each distinct ISR is joined once (an election's
    10^4 writes share a few hundred ISRs)."""
    form = b'{"controller_epoch":%d,"leader":%%d,"version":1,"leader_epoch":%%d,"isr":[%%b]}' % controller_epoch
    joined: dict[tuple[int, ...], bytes] = {}
    out: list[bytes] = []
    append = out.append
    for lai in states:
        isr = lai.isr
        members = joined.get(isr)
        if members is None:
            members = joined[isr] = b",".join([b"%d" % r for r in isr])
        append(form % (lai.leader, lai.leader_epoch, members))
    return out


class _StateZnode(msgspec.Struct, frozen=True, gc=False):
    """A partition state znode's fields as msgspec decodes them (strictly: an ``int`` field rejects
    ``true``, ``4.9`` and ``"4"``; unknown keys such as ``version`` and 3.2+'s
    ``leader_recovery_state`` are ignored)."""

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


# Built at import (one thread): msgspec fills a Struct's type information in lazily, and two threads
# doing that at once crashed the process (controller_core.protocol.messages keeps a lock for it).
_STATE_DECODER: Final = msgspec.json.Decoder(_StateZnode)


def decode_partition_state(
    data: bytes | None, zk_version: int, isrs: dict[tuple[int, ...], tuple[int, ...]] | None = None
) -> LeaderIsrAndControllerEpoch:
    """Parse a partition state znode; ``zk_version`` (the znode's data version) goes into the result.

    Unknown keys (3.2+ ``leader_recovery_state``) are ignored. msgspec decodes and checks the types in
    one C call, about half the CPU of ``orjson.loads`` and the checks in Python: a failover decodes
    one of these per partition. ``isrs``: as ``decode_partition_states``' (a warm standby's view
    passes its own, kept as long as the view: its states are read one by one).
    """
    try:
        s = _STATE_DECODER.decode(data)  # type: ignore[arg-type]  # None and b"" raise, explained below
    except (msgspec.DecodeError, TypeError) as exc:
        raise ValueError(_state_error(data, exc)) from None
    isr = s.isr if isrs is None else isrs.setdefault(s.isr, s.isr)
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(s.leader, s.leader_epoch, isr, zk_version), s.controller_epoch)


def decode_partition_states(
    datas: Sequence[bytes | None],
    zk_versions: Sequence[int],
    isrs: dict[tuple[int, ...], tuple[int, ...]] | None = None,
) -> tuple[list[LeaderIsrAndControllerEpoch | None], dict[int, ValueError]]:
    """``decode_partition_state`` of each ``(datas[i], zk_versions[i])``: the states in order (None
    where unreadable) and, by index, the ``ValueError`` naming each unreadable one's problem (the
    caller names the znode). The loop is inlined: a million-partition failover runs it per partition.

    ``isrs``: ISR tuples already decoded, reused for an equal one (a bulk read passes one dictionary
    for all its batches): a cluster has few distinct ISRs, and a tuple per partition was ~64 MB of a
    million-partition context."""
    shared = isrs if isrs is not None else {}
    intern = shared.setdefault
    decode = _STATE_DECODER.decode
    state, lai = LeaderIsrAndControllerEpoch, LeaderAndIsr
    out: list[LeaderIsrAndControllerEpoch | None] = []
    append = out.append
    failed: dict[int, ValueError] = {}
    for data, zk_version in zip(datas, zk_versions, strict=True):
        try:
            s = decode(data)  # type: ignore[arg-type]
        except (msgspec.DecodeError, TypeError) as exc:
            failed[len(out)] = ValueError(_state_error(data, exc))
            append(None)
            continue
        isr = s.isr
        append(state(lai(s.leader, s.leader_epoch, intern(isr, isr), zk_version), s.controller_epoch))
    return out, failed


def _state_error(data: bytes | None, exc: Exception) -> str:
    """What is wrong with a partition state znode, from msgspec's error (which names the field)."""
    if not data:
        return "partition state: the znode holds no data"
    if not isinstance(exc, msgspec.ValidationError):
        return f"partition state: not valid JSON ({exc}): {data[:200]!r}"
    text = str(exc)
    if "missing required field" in text:
        problem = f"missing or malformed key ({text})"
    elif "$.isr[" in text:
        problem = f"isr must be a list of integers ({text})"
    elif " - at `" not in text:  # the top level (no path)
        problem = f"malformed: not a JSON object ({text})"
    else:
        problem = f"wrong field types ({text})"
    return f"partition state: {problem}: {data[:200]!r}"


# ==================================================================================================
# /admin/reassign_partitions, /admin/preferred_replica_election, notifications (§1.2.5 - §1.2.8)
# ==================================================================================================
def _partition_entry(entry: Any, what: str) -> TopicPartition:
    obj = _object(entry, what)
    return TopicPartition(_str(obj.get("topic"), f"{what} topic"), _int(obj.get("partition"), f"{what} partition"))


def _partition_entries(data: bytes | None, what: str) -> list[dict[str, Any]]:
    obj = _object(_loads(data, what), what)
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise ValueError(f"{what}: 'partitions' must be a list, got {entries!r}")
    return entries


def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """``{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}`` (exactly as
    Kafka's ``ReassignPartitionsZNode`` encodes it)."""
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": int(tp.partition), "replicas": [int(r) for r in replicas]}
                for tp, replicas in reassignment.items()
            ],
        }
    )


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    """Parse ``/admin/reassign_partitions`` into partition -> target replicas (later entries win)."""
    what = "/admin/reassign_partitions"
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for i, entry in enumerate(_partition_entries(data, what)):
        tp = _partition_entry(entry, f"{what} entry {i}")
        out[tp] = _int_list(entry.get("replicas"), f"{what} entry {i} replicas")
    return out


def encode_partition_set(partitions: Iterable[TopicPartition]) -> bytes:
    """``{"version":1,"partitions":[{"topic":"t","partition":0}, ...]}``: the body of
    ``/admin/preferred_replica_election`` and of ISR-change notifications (duplicates dropped)."""
    return _dumps(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": int(tp.partition)} for tp in dict.fromkeys(partitions)],
        }
    )


class _PartitionSetEntry(msgspec.Struct, gc=False):
    topic: str
    partition: int


class _PartitionSet(msgspec.Struct, gc=False):
    """``{"version":1,"partitions":[{"topic":"t","partition":0}, ...]}`` as msgspec decodes it: the
    checks of ``_decode_partition_set`` (an object, a list of entries, a string topic and an integer
    partition that is not ``true`` or ``4.0``), in C; other keys are ignored, as there."""

    partitions: list[_PartitionSetEntry]


_PARTITION_SET_DECODER: Final = msgspec.json.Decoder(_PartitionSet)  # at import: see _STATE_DECODER
_new_tuple: Final = tuple.__new__


def _decode_partition_list(data: bytes | None, what: str) -> list[TopicPartition]:
    """The partitions a partition-set znode names, in its order, duplicates kept. msgspec first (a
    preferred election of every partition of a 100,000-partition cluster decodes in a fifth of the
    checked decoder's time); what it refuses goes to the checked decoder, which says what is wrong."""
    if data:
        try:
            entries = _PARTITION_SET_DECODER.decode(data).partitions
        except msgspec.MsgspecError:
            pass
        else:
            new = _new_tuple  # the NamedTuple's own constructor is a Python call: 1.5 x the time at 100,000
            return [new(TopicPartition, (e.topic, e.partition)) for e in entries]
    return [_partition_entry(e, f"{what} entry {i}") for i, e in enumerate(_partition_entries(data, what))]


def _decode_partition_set(data: bytes | None, what: str) -> set[TopicPartition]:
    """The partitions a partition-set znode names."""
    return set(_decode_partition_list(data, what))


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    """The body of ``/admin/preferred_replica_election``."""
    return encode_partition_set(partitions)


def decode_preferred_replica_election(data: bytes | None) -> set[TopicPartition]:
    """Parse ``/admin/preferred_replica_election`` into the set of partitions."""
    return _decode_partition_set(data, "/admin/preferred_replica_election")


def decode_preferred_replica_election_entries(data: bytes | None) -> list[TopicPartition]:
    """``decode_preferred_replica_election`` in the request's order, duplicates kept: the controller
    puts the partitions in order itself, and a request written in order (``scripts/bench``'s 100,000
    partitions) then needs neither a set nor a sort (``controller.sorted_partitions``)."""
    return _decode_partition_list(data, "/admin/preferred_replica_election")


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    """The body of one ``/isr_change_notification/isr_change_<seq>`` node."""
    return encode_partition_set(partitions)


def decode_isr_change_notification(data: bytes | None) -> set[TopicPartition]:
    """Parse one ISR-change notification into the set of partitions it names."""
    return _decode_partition_set(data, "ISR change notification")


def encode_log_dir_event(broker_id: int) -> bytes:
    """``{"version":1,"broker":3,"event":1}`` (event 1 = LogDirFailure, the only event)."""
    return _dumps({"version": 1, "broker": int(broker_id), "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    """The broker id of a log-dir event notification (Kafka reads only ``broker``)."""
    what = "log dir event notification"
    return _int(_object(_loads(data, what), what).get("broker"), f"{what} broker")


# ==================================================================================================
# /config/<type>/<entity>, /config/changes, /cluster/id, /feature (§1.1, §1.2.9)
# ==================================================================================================
def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """``{"version":1,"config":{"unclean.leader.election.enable":"true"}}``; values must be strings."""
    for key, value in config.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"config entries must be string -> string, got {key!r}: {value!r}")
    return _dumps({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes | None, what: str = "config") -> dict[str, str]:
    """Parse a config znode into its string -> string overrides (no data means no overrides)."""
    if not data:
        return {}
    obj = _object(_loads(data, what), what)
    config = _object(obj.get("config", {}), f"{what} config")
    for key, value in config.items():
        if not isinstance(value, str):
            raise ValueError(f"{what}: value of {key!r} must be a string, got {value!r}")
    return config


def encode_config_change_notification(entity_path: str) -> bytes:
    """``{"version":2,"entity_path":"topics/<topic>"}``: the body of a ``/config/changes`` node."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change_notification(data: bytes | None) -> str:
    """The ``entity_path`` of a version-2 config-change notification."""
    what = "config change notification"
    return _str(_object(_loads(data, what), what).get("entity_path"), f"{what} entity_path")


def encode_cluster_id(cluster_id: str) -> bytes:
    """``{"version":"1","id":"<id>"}`` (``version`` is a string in this one znode)."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    """The cluster id stored in ``/cluster/id``."""
    what = "/cluster/id"
    return _str(_object(_loads(data, what), what).get("id"), f"{what} id")


@dataclass(frozen=True, slots=True)
class FeatureZNode:
    """``/feature``: whether feature versioning is enabled and the finalized feature version ranges."""

    enabled: bool
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)


def encode_feature_znode(node: FeatureZNode) -> bytes:
    """``{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":2}}}``."""
    return _dumps(
        {
            "version": 1,
            "status": FEATURE_STATUS_ENABLED if node.enabled else FEATURE_STATUS_DISABLED,
            "features": {
                name: {"min_version_level": int(lo), "max_version_level": int(hi)}
                for name, (lo, hi) in node.features.items()
            },
        }
    )


def decode_feature_znode(data: bytes | None) -> FeatureZNode:
    """Parse ``/feature``; an unknown status is an error, as in Kafka."""
    what = "/feature"
    obj = _object(_loads(data, what), what)
    status = _int(obj.get("status"), f"{what} status")
    if status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
        raise ValueError(f"{what}: unknown status {status}")
    features: dict[str, tuple[int, int]] = {}
    for name, raw_range in _object(obj.get("features", {}), f"{what} features").items():
        rng = _object(raw_range, f"{what} feature {name}")
        features[name] = (
            _int(rng.get("min_version_level"), f"{what} {name} min_version_level"),
            _int(rng.get("max_version_level"), f"{what} {name} max_version_level"),
        )
    return FeatureZNode(status == FEATURE_STATUS_ENABLED, features)
