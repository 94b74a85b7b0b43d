"""ZooKeeper's multi (OpCode 14) on the wire: op kinds, the prepared multi, per-op outcomes, counters.

Why a module of its own: the fenced-multi engine (``engine``) serializes multis on the caller's
thread and hands them to kazoo as they are (kazoo's ``TransactionRequest`` costs more client CPU
per op than ZooKeeper spends applying it), and every concern module builds ``Op`` values for it.
These are the shapes both sides share; nothing here talks to ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

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

from controller_core.ports import ZkCode
from controller_core.zk.jute import ERROR_OPCODE, INT, MULTI_HEADER, STAT, STAT_BYTES, PreparedRequest

# Op kinds: ZooKeeper's own opcodes.
CREATE: Final = 1
DELETE: Final = 2
SET: Final = 5
CHECK: Final = 13
MULTI: Final = 14

PATH_HEADERS: Final = {kind: MULTI_HEADER.pack(kind, 0, -1) for kind in (CREATE, DELETE, SET, CHECK)}
# What ZooKeeper's transaction log and quorum proposals add per op over the request bytes, so that a
# batch that fits here also fits a follower's jute.maxbuffer.
TXN_SLACK: Final = 24
DEFAULT_MAX_MULTI_BYTES: Final = 128_000
# Reply bytes per op (multi header + result); a create also echoes its path.
REPLY_BYTES: Final = {CREATE: 13, DELETE: 9, SET: 9 + STAT_BYTES, CHECK: 9}


class PreparedMulti(PreparedRequest):
    """A ZooKeeper multi (OpCode 14) serialized on the caller's thread, which kazoo sends as it is.

    kazoo's own ``TransactionRequest`` normalises every path and serializes on its connection
    thread, which costs more than ZooKeeper's work for big batches; the wire format is the same.
    The reply is parsed into kazoo's ``Transaction`` result shapes: a created path (kazoo removes the
    chroot), a ``ZnodeStat`` for a set, True for a delete or check, an exception instance for an op
    of a failed multi (``RolledBackError`` for ops before the failed one, ``RuntimeInconsistency``
    after it).
    """

    type = MULTI
    label = "Multi"
    __slots__ = ()

    def deserialize(self, buffer: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        append = results.append
        while True:
            op_type, done, _ = MULTI_HEADER.unpack_from(buffer, offset)
            offset += 9
            if done:
                return results
            if op_type == SET:
                append(ZnodeStat._make(STAT.unpack_from(buffer, offset)))
                offset += 68
            elif op_type == CREATE:
                (length,) = INT.unpack_from(buffer, offset)
                offset += 4
                append(buffer[offset : offset + length].decode())
                offset += length
            elif op_type in (DELETE, CHECK):
                append(True)
            elif op_type == ERROR_OPCODE:
                (code,) = INT.unpack_from(buffer, offset)
                offset += 4
                append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"unexpected op type {op_type} in a multi reply")


CODES: Final[Mapping[type[BaseException], ZkCode]] = {
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
    return CODES.get(type(error), ZkCode.OTHER)


CONNECTION_DROPPED: Final = (ConnectionLoss, ConnectionClosedError)
"""What kazoo raises when the connection drops under a request: its outcome is unknown, so the
caller retries (an idempotent read) or re-checks (a write)."""


def multi_failure(results: Sequence[Any]) -> BaseException:
    """The op that failed a multi: its first error that is not the roll-back of an op before it.
    Only for results that hold an error (ZooKeeper applies all of a multi or none)."""
    return next(r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError))


class WriteOutcome(NamedTuple):
    """The result of one op of a batch: ``code``; on OK the op's result (a ZnodeStat for set, the
    created path for create, True for delete); otherwise the kazoo exception."""

    code: ZkCode
    result: Any = None
    error: BaseException | None = None


class Op(NamedTuple):
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


def encode_string(text: str) -> bytes:
    raw = text.encode()
    return INT.pack(len(raw)) + raw
