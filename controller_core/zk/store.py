"""``ZkStore``: the controller's reads and writes of Kafka's ZooKeeper layout, fenced and batched.

Guarantees and failure behaviour:

* **Fencing.** Every controller write (every method taking ``expected_controller_epoch_zk_version``)
  runs in ZooKeeper multis that begin with ``check(/controller_epoch, version=expected)``, as Kafka's
  ``wrapRequestWithControllerEpochCheck`` does. When that check fails with BADVERSION the call raises
  ``ControllerMovedError`` and the failed multi has changed nothing. Multis of the same call that
  ZooKeeper ran *before* the epoch moved stay applied (they were legitimate when they ran); none runs
  after it. A missing ``/controller_epoch`` raises ``ZkOperationError(NONODE)``.
* **Batching.** Many ops share one multi and one epoch check. A multi stays under
  ``max_multi_bytes`` (128 KB by default) by its exact serialized size plus ZooKeeper's own per-op
  transaction overhead, far below ZooKeeper's 1 MB ``jute.maxbuffer``, and up to ``max_in_flight``
  multis are pipelined. Why not ~900 KB: ZooKeeper keeps its last 500 committed transactions in
  memory (``zookeeper.commitLogCount``), so 900 KB multis can pin ~450 MB of a server's heap (a
  512 MB server ran out of memory in our benchmark); 128 KB multis (about 900 partition-state
  writes each) bound that to ~64 MB, and pipelined (16 in flight) they were as fast or faster in our
  measurements, since ZooKeeper's request stages overlap across several smaller multis. Bulk reads,
  which the server does not retain, use ``max_read_bytes`` (900 KB). Multis are serialized on the
  caller's thread and handed to kazoo's connection with ``KazooClient._call``, the same private entry
  point multi-read needs (kazoo's ``TransactionRequest`` costs more client CPU per op than ZooKeeper
  spends applying it).
* **Per-op results.** A multi is all-or-nothing, so when one op fails (a stale partition version, say)
  ZooKeeper names that op; the store records its result code and resubmits the rest of the chunk (in
  halves, so k failures cost about 2k multis, not k passes over the chunk). Neighbours are never failed
  by a stale sibling. The ops of one batch must therefore be independent (distinct paths, no
  parent/child pairs); methods that need ordering run their batches in phases.
* **Conditional writes.** Partition-state writes carry the version that was read
  (``LeaderAndIsr.zk_version``); BADVERSION comes back as "needs retry", as in Kafka.
* **Connection loss.** A multi whose connection dropped is resubmitted once (kazoo queues it until it
  reconnects). If the first attempt had in fact been applied, the resubmission conflicts with our own
  write (BADVERSION / NODEEXISTS); the store then reads those znodes and reports an op as OK when the
  znode holds exactly what it wrote (at the version a set would have produced), so a lost reply never
  makes the controller redo a write. A multi lost twice is reported per op as CONNECTIONLOSS (outcome
  unknown: re-read). Session expiry is reported per op (SESSIONEXPIRED); the controller resigns.
* **Bulk reads** use ZooKeeper multi-read (``controller_core.zk.multiread``) with a fallback to
  pipelined single reads; a missing znode is a per-item result, never an exception for the batch.
* **Admin writes** (``create_topic``, ``mark_topic_for_deletion``, the ``create_*_request`` methods)
  are unfenced, as Kafka's own tools are, and raise ``ZkOperationError`` with a clear message on
  conflicts.

Thread-safety: one controller event thread drives a store; the counters are not synchronised.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.security import OPEN_ACL_UNSAFE

from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.model import (
    BrokerRegistration,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.pause_points import pause_point, pause_points_enabled
from controller_core.ports import LeaderAndIsrWrite, PartitionStateRead, UpdateLeaderAndIsrResult, ZkCode
from controller_core.zk import codecs, paths
from controller_core.zk.codecs import ControllerInfo, FeatureZNode, TopicAssignment
from controller_core.zk.history import HistoryRecorder, process_recorder
from controller_core.zk.multiread import (
    DEFAULT_MAX_BATCH_BYTES,
    DataResult,
    MultiReadCounters,
    MultiReader,
    VersionedData,
)

logger = logging.getLogger(__name__)

# Op kinds: ZooKeeper's own opcodes.
_CREATE: Final = 1
_DELETE: Final = 2
_SET: Final = 5
_CHECK: Final = 13
_MULTI: Final = 14

_INT: Final = struct.Struct("!i")
_MULTI_HEADER: Final = struct.Struct("!iBi")
_STAT: Final = struct.Struct("!qqqqiiiqiiq")
_PATH_HEADERS: Final = {kind: _MULTI_HEADER.pack(kind, 0, -1) for kind in (_CREATE, _DELETE, _SET, _CHECK)}
_DONE: Final = _MULTI_HEADER.pack(-1, 1, -1)
# What ZooKeeper's transaction log and quorum proposals add per op over the request bytes, so that a
# batch that fits here also fits a follower's jute.maxbuffer.
_TXN_SLACK: Final = 24
DEFAULT_MAX_MULTI_BYTES: Final = 128_000
# Reply bytes per op (multi header + result); a create also echoes its path.
_REPLY_BYTES: Final = {_CREATE: 13, _DELETE: 9, _SET: 9 + 68, _CHECK: 9}


class _PreparedMulti:
    """A ZooKeeper multi (OpCode 14) serialized on the caller's thread, which kazoo sends as it is.

    kazoo's own ``TransactionRequest`` normalises every path and serializes on its connection
    thread, which costs more than ZooKeeper's work for big batches; the wire format is the same.
    The reply is parsed into kazoo's ``Transaction`` result shapes: a created path (kazoo removes the
    chroot), a ``ZnodeStat`` for a set, True for a delete or check, an exception instance for an op
    of a failed multi (``RolledBackError`` for ops before the failed one, ``RuntimeInconsistency``
    after it).
    """

    type = _MULTI
    __slots__ = ("count", "payload")

    def __init__(self, payload: bytes, count: int) -> None:
        self.payload = payload
        self.count = count

    def serialize(self) -> bytes:
        return self.payload

    def deserialize(self, buffer: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        append = results.append
        while True:
            op_type, done, _ = _MULTI_HEADER.unpack_from(buffer, offset)
            offset += 9
            if done:
                return results
            if op_type == _SET:
                append(ZnodeStat._make(_STAT.unpack_from(buffer, offset)))
                offset += 68
            elif op_type == _CREATE:
                (length,) = _INT.unpack_from(buffer, offset)
                offset += 4
                append(buffer[offset : offset + length].decode())
                offset += length
            elif op_type in (_DELETE, _CHECK):
                append(True)
            elif op_type == -1:
                (code,) = _INT.unpack_from(buffer, offset)
                offset += 4
                append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"unexpected op type {op_type} in a multi reply")

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG: keep it one short line
        return f"Multi({self.count} ops, {len(self.payload)} bytes)"


_CODES: Final[Mapping[type[BaseException], ZkCode]] = {
    NoNodeError: ZkCode.NO_NODE,
    NodeExistsError: ZkCode.NODE_EXISTS,
    BadVersionError: ZkCode.BAD_VERSION,
    NotEmptyError: ZkCode.NOT_EMPTY,
    ConnectionLoss: ZkCode.CONNECTION_LOSS,
    ConnectionClosedError: ZkCode.CONNECTION_LOSS,
    SessionExpiredError: ZkCode.SESSION_EXPIRED,
    RuntimeInconsistency: ZkCode.RUNTIME_INCONSISTENCY,
}


def zk_code(error: BaseException) -> ZkCode:
    """The ``ZkCode`` of a kazoo exception (``OTHER`` for codes the controller does not distinguish)."""
    return _CODES.get(type(error), ZkCode.OTHER)


class ControllerEpoch(NamedTuple):
    """The controller epoch and the data version of ``/controller_epoch`` (the fencing token)."""

    epoch: int
    epoch_zk_version: int


class WriteOutcome(NamedTuple):
    """The result of one op of a batch: ``code``; on OK the op's result (a ZnodeStat for set, the
    created path for create, True for delete); otherwise the kazoo exception."""

    code: ZkCode
    result: Any = None
    error: BaseException | None = None


class _Op(NamedTuple):
    kind: int
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    sequence: bool = False


@dataclass(slots=True)
class StoreCounters:
    """Work done by a store, for benchmarks and metrics (``ZkStore.counters()`` merges in the reads)."""

    multis: int = 0  # fenced multis sent (retries included)
    write_ops: int = 0  # ops sent inside them (the epoch checks excluded)
    failed_ops: int = 0  # ops ZooKeeper rejected (BADVERSION, NODEEXISTS, ...)
    split_retries: int = 0  # multis resubmitted without a failed op
    connection_retries: int = 0  # multis resubmitted after a connection loss
    bytes_sent: int = 0  # request bytes of the multis (and multi-reads, in a snapshot)
    largest_multi_bytes: int = 0
    read_requests: int = 0
    read_ops: int = 0
    read_bytes_received: int = 0


def _string(text: str) -> bytes:
    raw = text.encode()
    return _INT.pack(len(raw)) + raw


class ZkStore:
    """Kafka's ZooKeeper data for the controller: implements ``ports.PartitionStateStore`` and more.

    Usage::

        store = ZkStore(client)
        store.ensure_persistent_paths()
        epoch, epoch_zk_version = store.register_controller_and_increment_epoch(1, {"endpoint": url})
        reads = store.get_partition_states(partitions)
        result = store.update_leader_and_isr(new_states, epoch, epoch_zk_version)
        # result.finished[tp] -> new LeaderAndIsr (new zk_version) or exception; result.needs_retry

    ``max_multi_bytes`` bounds every multi, ``max_read_bytes`` every multi-read request and response;
    ``max_in_flight`` is the number of multis pipelined; ``max_ops_per_multi`` (0: no limit) caps the
    writes per multi; ``timeout`` bounds each wait for a reply; ``max_znode_bytes`` is the largest
    admin request znode written in one piece (set it to the server's ``jute.maxbuffer`` less ~1 KB).
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        max_multi_bytes: int = DEFAULT_MAX_MULTI_BYTES,
        max_read_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = 16,
        max_ops_per_multi: int = 0,
        timeout: float = 30.0,
        max_znode_bytes: int = paths.MAX_ZNODE_BYTES,
        reader: MultiReader | None = None,
        recorder: HistoryRecorder | None = None,
    ) -> None:
        if max_multi_bytes < 4096:
            raise ValueError(f"max_multi_bytes={max_multi_bytes} is too small")
        self._client = client
        self.max_multi_bytes = max_multi_bytes
        self.max_in_flight = max(1, max_in_flight)
        # 0: as many ops per multi as fit. 1: one fenced write per znode, as Kafka 1.1 wrote (the
        # benchmark's "unbatched" baseline, ControllerConfig.batched_writes=False).
        self.max_ops_per_multi = max(0, max_ops_per_multi)
        self.timeout = timeout
        self.max_znode_bytes = max_znode_bytes
        self.reader = reader or MultiReader(client, max_batch_bytes=max_read_bytes, timeout=timeout)
        self._counters = StoreCounters()
        self._server_path = paths.under_chroot(client.chroot)
        acl = client.default_acl or OPEN_ACL_UNSAFE
        self._acl = _INT.pack(len(acl)) + b"".join(
            _INT.pack(a.perms) + _string(a.id.scheme) + _string(a.id.id) for a in acl
        )
        # Sessions this store has registered ephemerals from: a leftover ephemeral of one of them
        # (ZOOKEEPER-2985) may be replaced; one of anybody else's may not.
        self._own_sessions: set[int] = set()
        # Reliability history (controller_core.zk.history): None unless RELIABILITY_HISTORY_DIR is set.
        self._recorder = recorder if recorder is not None else process_recorder()

    @property
    def client(self) -> KazooClient:
        return self._client

    # ==============================================================================================
    # counters
    # ==============================================================================================
    def counters(self) -> StoreCounters:
        """A snapshot of the work done so far (writes, plus the reader's multi-read traffic)."""
        c = self._counters
        r = self.reader.counters
        return StoreCounters(
            multis=c.multis,
            write_ops=c.write_ops,
            failed_ops=c.failed_ops,
            split_retries=c.split_retries,
            connection_retries=c.connection_retries,
            bytes_sent=c.bytes_sent + r.bytes_sent,
            largest_multi_bytes=c.largest_multi_bytes,
            read_requests=r.requests,
            read_ops=r.ops + r.single_reads,
            read_bytes_received=r.bytes_received,
        )

    def reset_counters(self) -> None:
        """Zero the write and read counters."""
        self._counters = StoreCounters()
        self.reader.counters = MultiReadCounters()

    # ==============================================================================================
    # setup
    # ==============================================================================================
    def ensure_persistent_paths(self) -> None:
        """Create Kafka's persistent paths (``paths.PERSISTENT_PATHS``, with parents) where missing."""
        for path in paths.PERSISTENT_PATHS:
            self._client.ensure_path(path)

    # ==============================================================================================
    # controller election (reference §1.3)
    # ==============================================================================================
    def get_controller(self) -> ControllerInfo | None:
        """``/controller`` decoded, or None when no controller is registered.

        Raises ``ValueError`` when the znode holds something other than Kafka's JSON.
        """
        try:
            data, _ = self._client.get(paths.CONTROLLER_PATH)
        except NoNodeError:
            return None
        return codecs.decode_controller(data)

    def get_controller_id(self) -> int | None:
        """The registered controller's broker id, or None (an unreadable ``/controller`` counts as none,
        with a warning, as Kafka's ``getControllerId`` does)."""
        try:
            info = self.get_controller()
        except ValueError as exc:
            logger.warning("ignoring unreadable /controller: %s", exc)
            return None
        return None if info is None else info.broker_id

    def get_controller_epoch(self) -> ControllerEpoch | None:
        """``(epoch, zk version)`` of ``/controller_epoch``, or None when it does not exist yet."""
        try:
            data, stat = self._client.get(paths.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return ControllerEpoch(codecs.decode_controller_epoch(data), stat.version)

    def register_controller_and_increment_epoch(
        self, controller_id: int, extra: Mapping[str, Any] | None = None
    ) -> ControllerEpoch:
        """Become the controller: create ephemeral ``/controller`` and bump ``/controller_epoch`` in one multi.

        Steps (Kafka's ``registerControllerAndIncrementControllerEpoch``):

        1. Read ``/controller_epoch``; create it with ``0`` when absent (so the first controller of a
           cluster gets epoch 1 at zk version 1).
        2. One multi: create ``/controller`` (ephemeral, ``extra`` keys added to Kafka's JSON) and set
           ``/controller_epoch`` to epoch+1 on condition of the version read.
        3. On NODEEXISTS or BADVERSION (or a connection loss that hides the outcome), verify: we won
           only if ``/controller`` names ``controller_id``, is owned by *this* session, and the epoch is
           now epoch+1.

        Returns the new ``(epoch, epoch_zk_version)``. Raises ``ControllerMovedError`` when another
        candidate holds ``/controller`` or won the race, ``ZkOperationError`` on other ZooKeeper errors.
        """
        current = self._read_or_create_controller_epoch()
        new_epoch = current.epoch + 1
        payload = codecs.encode_controller(controller_id, extra=extra)

        def attempt() -> list[Any]:
            tx = self._client.transaction()
            tx.create(paths.CONTROLLER_PATH, payload, ephemeral=True)
            tx.set_data(
                paths.CONTROLLER_EPOCH_PATH, codecs.encode_controller_epoch(new_epoch), current.epoch_zk_version
            )
            results: list[Any] = tx.commit_async().get(timeout=self.timeout)
            return results

        try:
            results = attempt()
        except (ConnectionLoss, ConnectionClosedError):
            # The outcome is unknown: run it again; if the first one was applied, this one fails with
            # NODEEXISTS and the verification below recognises our own registration.
            logger.info("connection lost during the controller election multi; retrying")
            results = attempt()
        if not any(isinstance(r, Exception) for r in results):
            logger.info("controller %d registered; controller epoch %d -> %d", controller_id, current.epoch, new_epoch)
            if self._recorder is not None:
                self._record_election(controller_id, new_epoch, results[1].version, results[1].mzxid)
            return ControllerEpoch(new_epoch, results[1].version)
        failure = next(r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError))
        if isinstance(failure, NodeExistsError | BadVersionError):
            verified = self._verify_controller_registration(controller_id, new_epoch)
            if self._recorder is not None:
                stat = self._client.exists(paths.CONTROLLER_EPOCH_PATH)
                self._record_election(controller_id, verified.epoch, verified.epoch_zk_version, stat and stat.mzxid)
            return verified
        raise ZkOperationError(zk_code(failure), paths.CONTROLLER_PATH, f"controller election failed: {failure!r}")

    def _read_or_create_controller_epoch(self) -> ControllerEpoch:
        found = self.get_controller_epoch()
        if found is not None:
            return found
        try:
            self._client.create(paths.CONTROLLER_EPOCH_PATH, codecs.encode_controller_epoch(0), makepath=True)
            return ControllerEpoch(0, 0)
        except NodeExistsError:
            found = self.get_controller_epoch()
            if found is None:
                raise ZkOperationError(
                    ZkCode.NO_NODE, paths.CONTROLLER_EPOCH_PATH, "created concurrently, then deleted"
                ) from None
            return found

    def _verify_controller_registration(self, controller_id: int, new_epoch: int) -> ControllerEpoch:
        try:
            data, stat = self._client.get(paths.CONTROLLER_PATH)
        except NoNodeError:
            raise ControllerMovedError(
                f"controller election for broker {controller_id} failed and /controller is absent"
            ) from None
        holder = codecs.decode_controller(data).broker_id
        session = self._session_id()
        epoch = self.get_controller_epoch()
        if (
            holder == controller_id
            and stat.ephemeralOwner == session
            and epoch is not None
            and epoch.epoch == new_epoch
        ):
            logger.info("controller %d registration confirmed after a retried election", controller_id)
            return epoch
        raise ControllerMovedError(
            f"broker {controller_id} lost the controller election: /controller names broker {holder}"
            + ("" if epoch is None else f", controller epoch is {epoch.epoch}")
        )

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/controller`` (resigning, Kafka's ``triggerControllerMove``); fenced.

        Returns False when it was already gone. Raises ``ControllerMovedError`` when the epoch moved.
        """
        (outcome,) = self._fenced_write([_Op(_DELETE, paths.CONTROLLER_PATH)], expected_controller_epoch_zk_version)
        return self._deleted(outcome, paths.CONTROLLER_PATH)

    # ==============================================================================================
    # brokers (reference §1.2.2)
    # ==============================================================================================
    def register_broker(self, registration: BrokerRegistration) -> int:
        """Register ``/brokers/ids/<id>`` (ephemeral) and return the broker epoch (its czxid).

        One multi ``[create(ephemeral), setData(json, version 0)]``. If the znode exists: owned by this
        session -> success with its czxid (data not updated); owned by an earlier session of this store
        (ZOOKEEPER-2985 leftover) -> delete and re-create; owned by anyone else -> ``ZkOperationError``
        (NODEEXISTS).
        """
        path = paths.broker_id_path(registration.id)
        payload = codecs.encode_broker_registration(registration)
        for _ in range(5):
            tx = self._client.transaction()
            tx.create(path, b"", ephemeral=True)
            tx.set_data(path, payload, 0)
            try:
                results = tx.commit_async().get(timeout=self.timeout)
            except (ConnectionLoss, ConnectionClosedError):
                logger.info("connection lost while registering broker %d; retrying", registration.id)
                continue
            session = self._session_id() or 0
            if not any(isinstance(r, Exception) for r in results):
                self._own_sessions.add(session)
                logger.info("registered broker %d at %s (broker epoch %d)", registration.id, path, results[1].czxid)
                return int(results[1].czxid)
            if not isinstance(results[0], NodeExistsError):
                failure = next(r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError))
                raise ZkOperationError(zk_code(failure), path, f"broker registration failed: {failure!r}")
            stat = self._client.exists(path)
            if stat is None:
                continue  # it went away between the create and the read: try again
            if stat.ephemeralOwner == session:
                self._own_sessions.add(session)
                return int(stat.czxid)
            if stat.ephemeralOwner in self._own_sessions:
                logger.warning(
                    "broker %d: replacing the registration left by our earlier session 0x%x",
                    registration.id,
                    stat.ephemeralOwner,
                )
                with contextlib.suppress(NoNodeError, BadVersionError):
                    self._client.delete(path, version=stat.version)
                continue
            raise ZkOperationError(
                ZkCode.NODE_EXISTS,
                path,
                f"broker id {registration.id} is already registered by another session "
                f"(0x{stat.ephemeralOwner:x}); is another broker running with this id?",
            )
        raise ZkOperationError(ZkCode.OTHER, path, "broker registration did not settle after 5 attempts")

    def update_broker_registration(self, registration: BrokerRegistration) -> None:
        """Rewrite this broker's own registration data (endpoints/features changed); unconditional."""
        self._client.set(paths.broker_id_path(registration.id), codecs.encode_broker_registration(registration))

    def get_broker_ids(self) -> list[int]:
        """Ids of the registered brokers, sorted."""
        return sorted(int(c) for c in self._children(paths.BROKER_IDS_PATH) if c.isdigit())

    def get_broker_registration(self, broker_id: int) -> BrokerRegistration | None:
        """One broker's registration (epoch = czxid), or None when it is not registered."""
        try:
            data, stat = self._client.get(paths.broker_id_path(broker_id))
        except NoNodeError:
            return None
        return codecs.decode_broker_registration(broker_id, data, stat.czxid)

    def get_all_broker_registrations(self) -> dict[int, BrokerRegistration]:
        """Every registered broker with its epoch (czxid), read in bulk.

        A broker that vanishes between the listing and the read is left out; an unreadable
        registration is left out with an error log (it cannot be used to reach the broker).
        """
        ids = self.get_broker_ids()
        results = self._read_data([paths.broker_id_path(i) for i in ids], size_hint=512)
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, r in zip(ids, results, strict=True):
            if r.error is not None:
                continue
            try:
                brokers[broker_id] = codecs.decode_broker_registration(broker_id, r.data, r.stat.czxid)
            except ValueError as exc:
                logger.error("ignoring broker %d: %s", broker_id, exc)
        return brokers

    # ==============================================================================================
    # topics (reference §1.2.3, §8.7, §10)
    # ==============================================================================================
    def get_all_topics(self) -> set[str]:
        """Names of all topics (children of ``/brokers/topics``; empty when the path is missing)."""
        return set(self._children(paths.TOPICS_PATH))

    def get_replica_assignments(self, topics: Collection[str]) -> dict[str, TopicAssignment]:
        """Each existing topic's ``(topic_id, {partition: ReplicaAssignment})``, read in bulk.

        Topics without a znode are left out. A topic znode that is not Kafka's JSON is logged as an
        error and returned as an empty assignment (no partitions), rather than failing a failover.
        """
        names = list(dict.fromkeys(topics))
        results = self._read_data([paths.topic_path(t) for t in names], size_hint=2048)
        out: dict[str, TopicAssignment] = {}
        shared: dict[tuple[int, ...], ReplicaAssignment] = {}  # one object per distinct replica list
        for topic, r in zip(names, results, strict=True):
            if r.error is not None:
                continue
            try:
                out[topic] = codecs.decode_topic_assignment(topic, r.data, shared)
            except ValueError as exc:
                logger.error("unreadable assignment of topic %s: %s", topic, exc)
                out[topic] = TopicAssignment(None, {})
        return out

    def get_partition_znode_ids(self, topics: Collection[str]) -> dict[str, set[int]]:
        """For each topic, the partitions that have a ``/partitions/<p>`` znode (empty when none)."""
        names = list(dict.fromkeys(topics))
        results = self.reader.get_children([paths.partitions_path(t) for t in names], size_hint=1024)
        return {t: {int(c) for c in (r.children or ()) if c.isdigit()} for t, r in zip(names, results, strict=True)}

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int] | ReplicaAssignment],
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None:
        """Create a topic as ``kafka-topics`` does (unfenced admin write).

        Validates the name and the assignment (partitions 0..n-1, non-empty distinct replica lists of
        one size), writes ``/config/topics/<t>`` first, then creates ``/brokers/topics/<t>``. Raises
        ``ValueError`` on invalid input and ``ZkOperationError`` (NODEEXISTS) when the topic exists.
        """
        paths.validate_topic_name(topic)
        replicas = {
            int(p): (a if isinstance(a, ReplicaAssignment) else ReplicaAssignment.of(a)) for p, a in assignment.items()
        }
        _validate_assignment(topic, replicas)
        if self._client.exists(paths.topic_path(topic)) is not None:
            raise ZkOperationError(ZkCode.NODE_EXISTS, paths.topic_path(topic), f"topic '{topic}' already exists")
        self._set_or_create(paths.topic_config_path(topic), codecs.encode_entity_config(config or {}))
        try:
            self._client.create(
                paths.topic_path(topic), codecs.encode_topic_assignment(replicas, topic_id), makepath=True
            )
        except NodeExistsError:
            raise ZkOperationError(
                ZkCode.NODE_EXISTS, paths.topic_path(topic), f"topic '{topic}' already exists"
            ) from None

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment],
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Rewrite ``/brokers/topics/<t>`` (reassignment steps, topic ids, restoring partitions); fenced.

        Raises ``ZkOperationError`` (NONODE) when the topic znode does not exist.
        """
        codes = self.set_topic_assignments(
            {topic: TopicAssignment(topic_id, dict(assignment))}, expected_controller_epoch_zk_version
        )
        if codes[topic] != ZkCode.OK:
            raise ZkOperationError(codes[topic], paths.topic_path(topic), "setting the topic assignment failed")

    def set_topic_assignments(
        self, assignments: Mapping[str, TopicAssignment], expected_controller_epoch_zk_version: int
    ) -> dict[str, ZkCode]:
        """Rewrite many topic znodes in batched fenced multis; per-topic result code."""
        topics = list(assignments)
        ops = [
            _Op(
                _SET,
                paths.topic_path(t),
                codecs.encode_topic_assignment(assignments[t].partitions, assignments[t].topic_id),
            )
            for t in topics
        ]
        outcomes = self._fenced_write(ops, expected_controller_epoch_zk_version)
        return {t: o.code for t, o in zip(topics, outcomes, strict=True)}

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/brokers/topics/<t>`` and everything under it, children first; each delete fenced."""
        self.delete_topics_recursively([topic], expected_controller_epoch_zk_version)

    def delete_topics_recursively(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete the topic znodes of ``topics`` with their subtrees (see ``_delete_recursively``)."""
        self._delete_recursively([paths.topic_path(t) for t in topics], expected_controller_epoch_zk_version)

    # ==============================================================================================
    # partition states (ports.PartitionStateStore, reference §1.2.4)
    # ==============================================================================================
    def get_partition_states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionStateRead]:
        """Read state znodes in bulk (multi-read). Per partition: OK with the decoded state (its
        ``zk_version`` = the znode's data version), NONODE, or OTHER (unreadable JSON, logged)."""
        ok = ZkCode.OK
        out: dict[TopicPartition, PartitionStateRead] = {}
        for tp, state, code in self._read_partition_states(partitions):
            out[tp] = PartitionStateRead(ok, state) if state is not None else PartitionStateRead(code)
        return out

    def get_partition_leadership(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The decoded state of every partition whose state znode exists and is readable (the others,
        missing or unreadable, are left out; unreadable ones are logged).

        What a failover loads into its leadership cache: ``get_partition_states`` without a
        ``PartitionStateRead`` per partition (at 100,000 partitions those objects alone were about a
        tenth of the read).
        """
        return {tp: state for tp, state, _ in self._read_partition_states(partitions) if state is not None}

    def _read_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> Iterator[tuple[TopicPartition, LeaderIsrAndControllerEpoch | None, ZkCode]]:
        """(partition, decoded state or None, code) for each distinct partition, in input order."""
        unique = list(dict.fromkeys(partitions))
        state_path = paths.partition_state_path
        # Streamed: each batch is decoded while ZooKeeper answers the next ones.
        results = self._iter_data_versions([state_path(tp) for tp in unique], size_hint=96)
        decode = codecs.decode_partition_state
        ok, other = ZkCode.OK, ZkCode.OTHER
        for tp, (data, version, error) in zip(unique, results, strict=True):
            if error is None:
                try:
                    yield tp, decode(data, version), ok
                except ValueError as exc:
                    logger.error("unreadable state of partition %s: %s", tp, exc)
                    yield tp, None, other
            else:
                yield tp, None, zk_code(error)

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, ZkCode]:
        """Create the state znodes of new partitions; fenced; per-partition code of the state create.

        Phases (each a batch of fenced multis, so a parent always exists before its child):
        1. list ``/brokers/topics/<t>/partitions`` of each topic (one multi-read);
        2. create the missing ``.../partitions`` znodes, then the missing ``.../partitions/<p>`` znodes
           (NODEEXISTS from a race is fine);
        3. create the ``state`` znodes. NONODE there means the topic znode is gone.
        """
        if not states:
            return {}
        tps = list(states)
        topics = list(dict.fromkeys(tp.topic for tp in tps))
        existing = self.reader.get_children([paths.partitions_path(t) for t in topics], size_hint=1024)
        have_dir = {t: r.children is not None for t, r in zip(topics, existing, strict=True)}
        have_partition = {t: set(r.children or ()) for t, r in zip(topics, existing, strict=True)}
        expected = expected_controller_epoch_zk_version
        missing_dirs = [_Op(_CREATE, paths.partitions_path(t)) for t in topics if not have_dir[t]]
        if missing_dirs:
            self._fenced_write(missing_dirs, expected)
        missing_partitions = [
            _Op(_CREATE, paths.partition_path(tp)) for tp in tps if str(tp.partition) not in have_partition[tp.topic]
        ]
        if missing_partitions:
            self._fenced_write(missing_partitions, expected)
        ops = [_Op(_CREATE, paths.partition_state_path(tp), codecs.encode_partition_state(states[tp])) for tp in tps]
        outcomes = self._fenced_write(ops, expected)
        return {tp: o.code for tp, o in zip(tps, outcomes, strict=True)}

    def update_leader_and_isr(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Conditionally write each state znode (expected version = ``LeaderAndIsr.zk_version``) with
        ``controller_epoch`` in the JSON; fenced; batched.

        OK -> ``finished[tp]`` = the state with the new zk version; BADVERSION -> ``needs_retry``;
        anything else -> ``finished[tp]`` = ``ZkOperationError``. Raises ``ControllerMovedError``.
        """
        result = UpdateLeaderAndIsrResult()
        outcomes = self.update_leader_and_isr_iter(states, controller_epoch, expected_controller_epoch_zk_version)
        for tp, outcome in outcomes:
            if outcome is None:
                result.needs_retry.append(tp)
            else:
                result.finished[tp] = outcome
        return result

    def update_leader_and_isr_iter(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> Iterator[LeaderAndIsrWrite]:
        """``update_leader_and_isr`` as the multis come back: ``(tp, outcome)`` per partition in the
        order of ``states``, outcome as in ``ports.LeaderAndIsrWrite`` (None: BADVERSION, retry)."""
        items = list(states.items())
        encode = codecs.encode_leader_and_isr
        state_path = paths.partition_state_path
        ops = [_Op(_SET, state_path(tp), encode(lai, controller_epoch), lai.zk_version) for tp, lai in items]
        ok, bad_version = ZkCode.OK, ZkCode.BAD_VERSION
        for i, outcome in self._fenced_write_iter(ops, expected_controller_epoch_zk_version):
            tp, lai = items[i]
            if outcome.code is ok:
                yield tp, lai.with_zk_version(outcome.result.version)
            elif outcome.code is bad_version:
                yield tp, None
            else:
                yield tp, ZkOperationError(outcome.code, ops[i].path, repr(outcome.error))

    # ==============================================================================================
    # configs (reference §1.2.9)
    # ==============================================================================================
    def get_topic_configs(self, topics: Collection[str]) -> dict[str, Mapping[str, str]]:
        """Each topic's overrides from ``/config/topics/<t>`` (empty when absent or unreadable)."""
        return self.get_entity_configs(paths.CONFIG_TYPE_TOPIC, topics)

    def get_entity_configs(self, entity_type: str, entities: Collection[str]) -> dict[str, Mapping[str, str]]:
        """Config overrides of ``/config/<type>/<entity>`` for each entity, in bulk (empty when absent;
        unreadable JSON is logged and read as empty, so a bad override falls back to the defaults)."""
        names = list(dict.fromkeys(entities))
        results = self._read_data([paths.entity_config_path(entity_type, n) for n in names], size_hint=256)
        out: dict[str, Mapping[str, str]] = {}
        for name, r in zip(names, results, strict=True):
            config: Mapping[str, str] = {}
            if r.error is None:
                try:
                    config = codecs.decode_entity_config(r.data, f"/config/{entity_type}/{name}")
                except ValueError as exc:
                    logger.error("ignoring unreadable config: %s", exc)
            out[name] = config
        return out

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's overrides and announce the change, as ``kafka-configs`` does (unfenced
        admin write): set-or-create ``/config/topics/<t>``, then a ``/config/changes`` notification."""
        self._set_or_create(paths.topic_config_path(topic), codecs.encode_entity_config(config))
        self._client.create(
            f"{paths.CONFIG_CHANGES_PATH}/{paths.CONFIG_CHANGE_PREFIX}",
            codecs.encode_config_change_notification(f"{paths.CONFIG_TYPE_TOPIC}/{topic}"),
            sequence=True,
            makepath=True,
        )

    def delete_topic_configs(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/config/topics/<t>`` of each topic (topic deletion); fenced; absent ones are fine."""
        self._delete_all([paths.topic_config_path(t) for t in topics], expected_controller_epoch_zk_version)

    # ==============================================================================================
    # admin requests (reference §1.2.5, §1.2.6, §10)
    # ==============================================================================================
    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        """``/admin/reassign_partitions`` as partition -> target replicas; None when absent.

        Invalid JSON is logged and read as an empty request, as Kafka's controller does.
        """
        data = self._get_or_none(paths.REASSIGN_PARTITIONS_PATH)
        if data is None:
            return None
        try:
            return codecs.decode_reassignment(data)
        except ValueError as exc:
            logger.warning("ignoring invalid partition reassignment request: %s", exc)
            return {}

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        """Rewrite (or create) ``/admin/reassign_partitions`` with the remaining entries; fenced."""
        payload = codecs.encode_reassignment(reassignment)
        (outcome,) = self._fenced_write(
            [_Op(_SET, paths.REASSIGN_PARTITIONS_PATH, payload)], expected_controller_epoch_zk_version
        )
        if outcome.code is ZkCode.NO_NODE:
            (outcome,) = self._fenced_write(
                [_Op(_CREATE, paths.REASSIGN_PARTITIONS_PATH, payload)], expected_controller_epoch_zk_version
            )
        if outcome.code is not ZkCode.OK:
            raise ZkOperationError(outcome.code, paths.REASSIGN_PARTITIONS_PATH, repr(outcome.error))

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/admin/reassign_partitions``; fenced; False when it was already gone."""
        (outcome,) = self._fenced_write(
            [_Op(_DELETE, paths.REASSIGN_PARTITIONS_PATH)], expected_controller_epoch_zk_version
        )
        return self._deleted(outcome, paths.REASSIGN_PARTITIONS_PATH)

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
        data = self._get_or_none(paths.PREFERRED_REPLICA_ELECTION_PATH)
        if data is None:
            return None
        try:
            return codecs.decode_preferred_replica_election(data)
        except ValueError as exc:
            logger.warning("ignoring invalid preferred replica election request: %s", exc)
            return set()

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/admin/preferred_replica_election``; fenced; False when it was already gone."""
        (outcome,) = self._fenced_write(
            [_Op(_DELETE, paths.PREFERRED_REPLICA_ELECTION_PATH)], expected_controller_epoch_zk_version
        )
        return self._deleted(outcome, paths.PREFERRED_REPLICA_ELECTION_PATH)

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

    # ==============================================================================================
    # notifications (reference §1.2.7, §1.2.8, §8.8, §8.10)
    # ==============================================================================================
    def get_isr_change_notification_names(self) -> list[str]:
        """Child names of ``/isr_change_notification``, in sequence order."""
        return self._sequential_children(paths.ISR_CHANGE_NOTIFICATION_PATH, paths.ISR_CHANGE_NOTIFICATION_PREFIX)

    def get_isr_change_notifications(self, names: Sequence[str]) -> dict[str, set[TopicPartition]]:
        """The partitions of each named notification, in bulk; vanished or unreadable ones are left out."""
        results = self._read_data([paths.isr_change_notification_path(n) for n in names], size_hint=512)
        out: dict[str, set[TopicPartition]] = {}
        for name, r in zip(names, results, strict=True):
            if r.error is None:
                try:
                    out[name] = codecs.decode_isr_change_notification(r.data)
                except ValueError as exc:
                    logger.warning("ignoring ISR change notification %s: %s", name, exc)
        return out

    def delete_isr_change_notifications(
        self, names: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete the named ISR-change notifications; fenced; absent ones are fine."""
        self._delete_all([paths.isr_change_notification_path(n) for n in names], expected_controller_epoch_zk_version)

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """Publish an ISR-change notification as a pre-AlterIsr partition leader does; returns its name."""
        created: str = self._client.create(
            f"{paths.ISR_CHANGE_NOTIFICATION_PATH}/{paths.ISR_CHANGE_NOTIFICATION_PREFIX}",
            codecs.encode_isr_change_notification(partitions),
            sequence=True,
            makepath=True,
        )
        return created.rsplit("/", 1)[1]

    def get_log_dir_event_notification_names(self) -> list[str]:
        """Child names of ``/log_dir_event_notification``, in sequence order."""
        return self._sequential_children(paths.LOG_DIR_EVENT_NOTIFICATION_PATH, paths.LOG_DIR_EVENT_NOTIFICATION_PREFIX)

    def get_log_dir_event_broker_ids(self, names: Sequence[str]) -> dict[str, int]:
        """The broker id of each named log-dir event notification; vanished/unreadable ones left out."""
        results = self._read_data([paths.log_dir_event_notification_path(n) for n in names], size_hint=64)
        out: dict[str, int] = {}
        for name, r in zip(names, results, strict=True):
            if r.error is None:
                try:
                    out[name] = codecs.decode_log_dir_event(r.data)
                except ValueError as exc:
                    logger.warning("ignoring log dir event notification %s: %s", name, exc)
        return out

    def delete_log_dir_event_notifications(
        self, names: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete the named log-dir event notifications; fenced; absent ones are fine."""
        self._delete_all(
            [paths.log_dir_event_notification_path(n) for n in names], expected_controller_epoch_zk_version
        )

    def create_log_dir_event_notification(self, broker_id: int) -> str:
        """Publish a log-dir failure event for ``broker_id`` (broker side); returns the node name."""
        created: str = self._client.create(
            f"{paths.LOG_DIR_EVENT_NOTIFICATION_PATH}/{paths.LOG_DIR_EVENT_NOTIFICATION_PREFIX}",
            codecs.encode_log_dir_event(broker_id),
            sequence=True,
            makepath=True,
        )
        return created.rsplit("/", 1)[1]

    # ==============================================================================================
    # /feature and /cluster/id
    # ==============================================================================================
    def get_feature_znode(self) -> FeatureZNode | None:
        """``/feature`` decoded, or None when absent."""
        data = self._get_or_none(paths.FEATURE_PATH)
        return None if data is None else codecs.decode_feature_znode(data)

    def set_feature_znode(self, node: FeatureZNode, expected_controller_epoch_zk_version: int) -> None:
        """Create or overwrite ``/feature`` (controller failover step 1); fenced."""
        payload = codecs.encode_feature_znode(node)
        (outcome,) = self._fenced_write([_Op(_SET, paths.FEATURE_PATH, payload)], expected_controller_epoch_zk_version)
        if outcome.code is ZkCode.NO_NODE:
            (outcome,) = self._fenced_write(
                [_Op(_CREATE, paths.FEATURE_PATH, payload)], expected_controller_epoch_zk_version
            )
        if outcome.code is not ZkCode.OK:
            raise ZkOperationError(outcome.code, paths.FEATURE_PATH, repr(outcome.error))

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id from ``/cluster/id``, creating it (``proposed`` or a fresh id) when absent."""
        data = self._get_or_none(paths.CLUSTER_ID_PATH)
        if data is not None:
            return codecs.decode_cluster_id(data)
        cluster_id = proposed or codecs.new_topic_id()
        try:
            self._client.create(paths.CLUSTER_ID_PATH, codecs.encode_cluster_id(cluster_id), makepath=True)
        except NodeExistsError:
            data, _ = self._client.get(paths.CLUSTER_ID_PATH)
            return codecs.decode_cluster_id(data)
        return cluster_id

    # ==============================================================================================
    # internals: reads
    # ==============================================================================================
    def _session_id(self) -> int | None:
        client_id = self._client.client_id
        return None if client_id is None else int(client_id[0])

    def _read_data(self, znode_paths: Sequence[str], *, size_hint: int) -> list[DataResult]:
        return list(_resumed_once(self.reader.get_data, znode_paths, size_hint))

    def _iter_data_versions(self, znode_paths: Sequence[str], *, size_hint: int) -> Iterator[VersionedData]:
        return _resumed_once(self.reader.iter_data_versions, znode_paths, size_hint)

    def _children(self, path: str) -> list[str]:
        try:
            children: list[str] = self._client.get_children(path)
        except NoNodeError:
            return []
        return children

    def _sequential_children(self, path: str, prefix: str) -> list[str]:
        names = [c for c in self._children(path) if c.startswith(prefix) and c[len(prefix) :].isdigit()]
        return sorted(names, key=lambda n: paths.sequence_number(n, prefix))

    def _get_or_none(self, path: str) -> bytes | None:
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return None
        return bytes(data or b"")

    def _set_or_create(self, path: str, payload: bytes) -> None:
        try:
            self._client.set(path, payload)
        except NoNodeError:
            try:
                self._client.create(path, payload, makepath=True)
            except NodeExistsError:
                self._client.set(path, payload)

    # ==============================================================================================
    # internals: fenced batched writes
    # ==============================================================================================
    def _deleted(self, outcome: WriteOutcome, path: str) -> bool:
        if outcome.code is ZkCode.OK:
            return True
        if outcome.code is ZkCode.NO_NODE:
            return False
        raise ZkOperationError(outcome.code, path, repr(outcome.error))

    def _delete_all(self, znode_paths: Sequence[str], expected: int) -> None:
        ops = [_Op(_DELETE, p) for p in dict.fromkeys(znode_paths)]
        for op, outcome in zip(ops, self._fenced_write(ops, expected), strict=True):
            if outcome.code not in (ZkCode.OK, ZkCode.NO_NODE):
                raise ZkOperationError(outcome.code, op.path, repr(outcome.error))

    def _delete_recursively(self, roots: Sequence[str], expected: int, attempts: int = 5) -> None:
        """Delete ``roots`` with their subtrees: list level by level (multi-read), then delete the
        deepest level first, one batch of fenced multis per level. A NOTEMPTY (a child created
        meanwhile) restarts from the listing; absent nodes count as deleted."""
        for _ in range(attempts):
            levels: list[list[str]] = []
            level = list(dict.fromkeys(roots))
            while level:
                levels.append(level)
                listed = self.reader.get_children(level, size_hint=1024)
                level = [
                    f"{parent}/{child}" for parent, r in zip(level, listed, strict=True) for child in (r.children or ())
                ]
            retry = False
            for level in reversed(levels):
                ops = [_Op(_DELETE, p) for p in level]
                for op, outcome in zip(ops, self._fenced_write(ops, expected), strict=True):
                    if outcome.code is ZkCode.NOT_EMPTY:
                        retry = True
                    elif outcome.code not in (ZkCode.OK, ZkCode.NO_NODE):
                        raise ZkOperationError(outcome.code, op.path, repr(outcome.error))
                if retry:
                    break
            if not retry:
                return
        raise ZkOperationError(ZkCode.NOT_EMPTY, ", ".join(roots), f"children kept appearing after {attempts} attempts")

    def _encode(self, op: _Op) -> bytes:
        """One op of a multi as ZooKeeper's wire format (multi header + request)."""
        path = self._server_path(op.path).encode()
        head = _PATH_HEADERS[op.kind] + _INT.pack(len(path)) + path
        if op.kind == _SET:
            return head + _INT.pack(len(op.data)) + op.data + _INT.pack(op.version)
        if op.kind == _CREATE:
            flags = (1 if op.ephemeral else 0) | (2 if op.sequence else 0)
            return head + _INT.pack(len(op.data)) + op.data + self._acl + _INT.pack(flags)
        return head + _INT.pack(op.version)

    def _multi_budget(self) -> int:
        """Bytes a multi's ops may take: ``max_multi_bytes`` less the epoch check and the framing."""
        return self.max_multi_bytes - 256 - len(self._check_prefix(0))

    def _check_sizes(self, ops: Sequence[_Op]) -> None:
        """Raise ``ValueError`` for an op too big for one multi; exact sizes only for the doubtful ones."""
        budget = self._multi_budget()
        # An upper bound of the encoded size: 4 UTF-8 bytes per character of the (chrooted) path.
        fixed = 64 + len(self._acl) + 4 * len(self._server_path("/")) + _TXN_SLACK
        for op in ops:
            if len(op.data) + 4 * len(op.path) + fixed > budget and len(self._encode(op)) + _TXN_SLACK > budget:
                raise ValueError(f"a write to {op.path} of {len(op.data)} bytes cannot fit in one ZooKeeper request")

    def _encoded_chunks(self, ops: Sequence[_Op], encoded: list[bytes]) -> Iterator[list[int]]:
        """Encode ``ops`` into ``encoded`` (by index) and yield multis' op indices as each one fills,
        so the first multi is on the wire while the later ops are still being encoded."""
        budget = self._multi_budget()
        current: list[int] = []
        request = reply = 0
        for i, op in enumerate(ops):
            data = self._encode(op)
            encoded.append(data)
            req = len(data) + _TXN_SLACK
            rep = _REPLY_BYTES[op.kind] + (len(data) if op.kind == _CREATE else 0)
            full = self.max_ops_per_multi and len(current) >= self.max_ops_per_multi
            if current and (full or request + req > budget or reply + rep > budget):
                yield current
                current, request, reply = [], 0, 0
            current.append(i)
            request += req
            reply += rep
        if current:
            yield current

    def _check_prefix(self, expected: int) -> bytes:
        return self._encode(_Op(_CHECK, paths.CONTROLLER_EPOCH_PATH, version=expected))

    def _commit(self, encoded: Sequence[bytes], indices: Sequence[int], expected: int) -> Any:
        payload = b"".join([self._check_prefix(expected), *(encoded[i] for i in indices), _DONE])
        c = self._counters
        c.multis += 1
        c.write_ops += len(indices)
        c.bytes_sent += len(payload)
        c.largest_multi_bytes = max(c.largest_multi_bytes, len(payload))
        pending = self._client.handler.async_result()
        self._client._call(_PreparedMulti(payload, len(indices) + 1), pending)
        return pending

    def _fenced_write(self, ops: Sequence[_Op], expected: int) -> list[WriteOutcome]:
        """Run independent ops in pipelined fenced multis; one outcome per op, in order.

        Raises ``ControllerMovedError`` when the epoch check fails (BADVERSION), ``ZkOperationError``
        when it fails otherwise (``/controller_epoch`` missing).
        """
        return [outcome for _, outcome in self._fenced_write_iter(ops, expected)]

    def _fenced_write_iter(self, ops: Sequence[_Op], expected: int) -> Iterator[tuple[int, WriteOutcome]]:
        """``_fenced_write`` as it happens: ``(index, outcome)`` for every op, in index order, each as
        soon as its multi has come back, so the caller's work on the first results overlaps
        ZooKeeper's on the rest (a 30,000-partition controlled shutdown spends ~0.25 s waiting).

        An op whose multi was replayed after a connection loss and conflicted is held back to the end
        (its conflict may be our own first attempt, ``_confirm_replayed_writes``). When the epoch check
        fails the iterator raises ``ControllerMovedError`` after the outcomes already yielded: those
        multis ran while this controller still held the epoch, so they stay true. With test pause
        points or the reliability history enabled every outcome is held until the batch is complete
        (``after_write`` then means "before any result is used").
        """
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
            raise ValueError(f"expected controller epoch zk version must be >= 0, got {expected!r}")
        if not ops:
            return
        pause_point("before_write", ops[0].path)  # test-only; a no-op unless CONTROLLER_PAUSE_DIR
        count = len(ops)
        outcomes: list[WriteOutcome | None] = [None] * count
        replay_conflicts: list[int] = []  # conflicts seen by a multi resubmitted after a connection loss
        held: set[int] = set()  # replay conflicts: not final until confirmed at the end
        # Fault-injection runs keep the whole-batch order: pause points mean "before any result is
        # used", and the reliability history records every op once the batch is complete.
        stream = not pause_points_enabled() and self._recorder is None
        next_out = 0  # outcomes[:next_out] have been yielded
        self._check_sizes(ops)  # before the first multi leaves: an op that cannot fit changes nothing
        encoded: list[bytes] = []
        fresh = self._encoded_chunks(ops, encoded)
        retries: deque[tuple[list[int], int]] = deque()  # split or resubmitted multis go first
        in_flight: deque[tuple[list[int], int, Any]] = deque()
        timeout_error = self._client.handler.timeout_exception
        while True:
            while len(in_flight) < self.max_in_flight:
                if retries:
                    indices, drops = retries.popleft()
                else:
                    chunk = next(fresh, None)
                    if chunk is None:
                        break
                    indices, drops = chunk, 0
                in_flight.append((indices, drops, self._commit(encoded, indices, expected)))
            if not in_flight:
                break
            while stream and next_out < count and next_out not in held:
                outcome = outcomes[next_out]
                if outcome is None:
                    break
                yield next_out, outcome  # the caller works while ZooKeeper has multis in flight
                next_out += 1
            indices, drops, pending = in_flight.popleft()
            try:
                results = pending.get(timeout=self.timeout)
            except (ConnectionLoss, ConnectionClosedError) as exc:
                if drops == 0 and isinstance(exc, ConnectionLoss):
                    self._counters.connection_retries += 1
                    retries.appendleft((indices, 1))
                else:
                    for i in indices:
                        outcomes[i] = WriteOutcome(ZkCode.CONNECTION_LOSS, None, exc)
                continue
            except (SessionExpiredError, timeout_error) as exc:
                code = ZkCode.SESSION_EXPIRED if isinstance(exc, SessionExpiredError) else ZkCode.CONNECTION_LOSS
                for i in indices:
                    outcomes[i] = WriteOutcome(code, None, exc)
                continue
            check = results[0]
            if not isinstance(check, Exception):
                for k, i in enumerate(indices, start=1):
                    outcomes[i] = WriteOutcome(ZkCode.OK, results[k])
                continue
            if isinstance(check, BadVersionError):
                if self._recorder is not None:
                    self._record_writes(ops, outcomes, expected, fenced=indices)
                raise ControllerMovedError(
                    f"controller epoch zkVersion check failed (expected version {expected} of "
                    f"{paths.CONTROLLER_EPOCH_PATH}): another controller has been elected"
                )
            if not isinstance(check, RolledBackError):
                raise ZkOperationError(zk_code(check), paths.CONTROLLER_EPOCH_PATH, "controller epoch check failed")
            # The check passed; exactly one op failed and the rest were rolled back or not evaluated.
            position = next(
                (
                    k
                    for k in range(1, len(results))
                    if isinstance(results[k], Exception)
                    and not isinstance(results[k], RolledBackError | RuntimeInconsistency)
                ),
                None,
            )
            if position is None:
                raise ZkOperationError(ZkCode.OTHER, paths.CONTROLLER_EPOCH_PATH, f"unexpected multi reply {results!r}")
            failed = indices[position - 1]
            error = results[position]
            outcomes[failed] = WriteOutcome(zk_code(error), None, error)
            self._counters.failed_ops += 1
            if drops and isinstance(error, BadVersionError | NodeExistsError):
                replay_conflicts.append(failed)
                held.add(failed)
            rest = indices[: position - 1] + indices[position:]
            if rest:
                self._counters.split_retries += 1
                half = (len(rest) + 1) // 2
                # Halves: the ops before the failure are known to pass, so the first half usually
                # succeeds whole; further failures are isolated in logarithmically many rounds.
                if half < len(rest):
                    retries.appendleft((rest[half:], drops))
                retries.appendleft((rest[:half], drops))
        if replay_conflicts:
            self._confirm_replayed_writes(ops, outcomes, replay_conflicts)
        if self._recorder is not None:
            self._record_writes(ops, outcomes, expected)
        pause_point("after_write", ops[0].path)
        for i in range(next_out, count):
            yield i, outcomes[i] or WriteOutcome(ZkCode.OTHER)

    # -- reliability history (off unless RELIABILITY_HISTORY_DIR is set) ---------------------------

    def _record_election(self, controller_id: int, epoch: int, epoch_zk_version: int, mzxid: int | None) -> None:
        assert self._recorder is not None
        self._recorder.record(
            op="elect",
            controller_id=controller_id,
            controller_epoch=epoch,
            epoch_zk_version=epoch_zk_version,
            session=self._session_id(),
            mzxid=mzxid,
            result="OK",
        )

    def _record_writes(
        self,
        ops: Sequence[_Op],
        outcomes: Sequence[WriteOutcome | None],
        expected: int,
        fenced: Sequence[int] = (),
    ) -> None:
        """One history line per op that got an answer (and per op of a multi the epoch check fenced)."""
        assert self._recorder is not None
        names = {_CREATE: "create", _DELETE: "delete", _SET: "set"}
        fenced_set = set(fenced)
        for i, op in enumerate(ops):
            outcome = outcomes[i]
            if outcome is None and i not in fenced_set:
                continue
            stat = outcome.result if outcome is not None and isinstance(outcome.result, ZnodeStat) else None
            data: str | None = None
            if op.kind != _DELETE and op.path.endswith("/state") and len(op.data) < 4096:
                data = op.data.decode(errors="replace")
            self._recorder.record(
                op=names.get(op.kind, str(op.kind)),
                path=op.path,
                epoch_zk_version=expected,
                version=op.version,
                result="FENCED" if outcome is None else outcome.code.name,
                mzxid=None if stat is None else stat.mzxid,
                new_version=None if stat is None else stat.version,
                data=data,
            )

    def _confirm_replayed_writes(
        self, ops: Sequence[_Op], outcomes: list[WriteOutcome | None], conflicts: Sequence[int]
    ) -> None:
        """Turn the conflicts of replayed multis that our own first attempt caused into successes.

        A multi resubmitted after a connection loss may have been applied the first time; its set then
        fails with BADVERSION (its create with NODEEXISTS) against our own write. When the znode holds
        exactly our bytes (at the version our set would have produced), that write did happen: report
        it as OK with the znode's stat, so the caller does not redo (and re-bump) it. Anything else
        stays a conflict. Reads are best effort: on a failure the conflicts are reported as they are.
        """
        try:
            reads = self.reader.get_data([ops[i].path for i in conflicts], size_hint=256)
        except Exception:
            logger.info("could not check %d replayed writes; reporting them as conflicts", len(conflicts))
            return
        for i, read in zip(conflicts, reads, strict=True):
            op = ops[i]
            if read.error is not None or read.data != op.data:
                continue
            if op.kind == _SET and read.stat.version == op.version + 1:
                outcomes[i] = WriteOutcome(ZkCode.OK, read.stat)
            elif op.kind == _CREATE and not op.sequence:
                outcomes[i] = WriteOutcome(ZkCode.OK, op.path)
            else:
                continue
            self._counters.failed_ops -= 1


def _validate_assignment(topic: str, assignment: Mapping[int, ReplicaAssignment]) -> None:
    if not assignment:
        raise ValueError(f"topic '{topic}': an assignment needs at least one partition")
    if sorted(assignment) != list(range(len(assignment))):
        raise ValueError(
            f"topic '{topic}': partitions must be numbered 0..{len(assignment) - 1}, got {sorted(assignment)}"
        )
    sizes = set()
    for partition, a in assignment.items():
        if not a.replicas:
            raise ValueError(f"topic '{topic}' partition {partition}: the replica list is empty")
        if len(set(a.replicas)) != len(a.replicas):
            raise ValueError(f"topic '{topic}' partition {partition}: duplicate replicas {list(a.replicas)}")
        if any(r < 0 for r in a.replicas):
            raise ValueError(f"topic '{topic}' partition {partition}: negative broker id in {list(a.replicas)}")
        sizes.add(len(a.replicas))
    if len(sizes) > 1:
        raise ValueError(f"topic '{topic}': all partitions must have the same number of replicas, got {sorted(sizes)}")


_T = TypeVar("_T")


def _resumed_once(read: Callable[..., Iterable[_T]], znode_paths: Sequence[str], size_hint: int) -> Iterator[_T]:
    """A bulk read, resumed once after a connection loss from the first path not yet handed over (all
    of them for a reader that answers as a list): reads are idempotent, and kazoo queues the retry
    until it has reconnected."""
    done = 0
    try:
        for result in read(znode_paths, size_hint=size_hint):
            done += 1
            yield result
    except (ConnectionLoss, ConnectionClosedError):
        logger.info("connection lost during a bulk read of %d znodes; retrying once", len(znode_paths) - done)
        yield from read(znode_paths[done:], size_hint=size_hint)
