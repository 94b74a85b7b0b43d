"""Bulk ZooKeeper reads: multi-read (OpCode 22, ZooKeeper >= 3.6) over kazoo, with a fallback.

kazoo has no call for ZooKeeper's multi-read, so this module adds a small request type that kazoo's
connection sends like any other (``KazooClient._call``, the one private kazoo entry point we use):

* request: for each op a ``MultiHeader(type, done=false, err=-1)`` followed by a ``GetDataRequest`` or
  ``GetChildrenRequest`` (path, watch=false), then a ``MultiHeader(-1, done=true, -1)``;
* response: for each op a ``MultiHeader`` then either a ``GetDataResponse`` (data, stat), a
  ``GetChildrenResponse`` (children) or, for a failed op (header type -1), an ``ErrorResponse`` (err
  code), then the done header.

Guarantees and failure behaviour:

* Results come back in input order, one per path. A missing znode (or one we may not read) is a
  per-path result carrying kazoo's ``NoNodeError`` (``NoAuthError``), never an exception for the batch.
* Each request, and each *expected* response, stays under ``max_batch_bytes`` (default 900 KB, below
  ZooKeeper's 1 MB default ``jute.maxbuffer``). Response sizes are estimated from a per-call size hint
  and from the sizes seen so far in the call, so a node much larger than both can push one response
  over the budget; kazoo itself has no response limit, so that costs nothing but the margin.
* Several requests are in flight at once (``max_in_flight``); a response is parsed on the caller's
  thread, never on kazoo's connection thread (which only keeps a reference to the raw packet).
* Multi-read support is detected once per reader with a one-op probe: ``UNIMPLEMENTED``, an empty
  reply, or the connection dropping twice in a row on the probe mean "not supported", and every call
  then uses pipelined single ``get_async``/``get_children_async`` requests instead (same results).
* Watches are never set (ZooKeeper ignores the watch flag inside a multi-read); arm watches with
  ``controller_core.zk.watchers``.
* Connection loss, session expiry and timeouts are raised to the caller (kazoo's exceptions); reads
  are idempotent, so the caller may simply retry.
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final, NamedTuple, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionClosedError,
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    UnimplementedError,
    ZookeeperError,
)
from kazoo.protocol.states import ZnodeStat

from controller_core.zk.jute import DONE, ERROR_OPCODE, INT, MULTI_HEADER, STAT, PreparedRequest
from controller_core.zk.paths import under_chroot

logger = logging.getLogger(__name__)

MULTI_READ_OPCODE: Final = 22
GET_DATA_OPCODE: Final = 4
GET_CHILDREN_OPCODE: Final = 8
# Not a ZooKeeper opcode: a getData whose reply is parsed to (data, version) without the full stat.
_GET_DATA_VERSION: Final = -4
# Not a ZooKeeper opcode either: the same, a whole reply parsed into columns (``VersionColumns``).
_GET_DATA_COLUMNS: Final = -5
DEFAULT_MAX_BATCH_BYTES: Final = 900_000

_STAT_VERSION_OFFSET: Final = 32  # in STAT: czxid, mzxid, ctime, mtime (8 bytes each), then version
_HEADER_DATA: Final = MULTI_HEADER.pack(GET_DATA_OPCODE, 0, -1)
_HEADER_CHILDREN: Final = MULTI_HEADER.pack(GET_CHILDREN_OPCODE, 0, -1)
# A reply op's header and the int after it (a getData's data length, a failed op's error code).
_HEADER_AND_INT: Final = struct.Struct(MULTI_HEADER.format + INT.format.lstrip("!"))
# Per-op response overhead: multi header + length prefix (+ stat for getData).
_DATA_OVERHEAD: Final = MULTI_HEADER.size + INT.size + STAT.size
_CHILDREN_OVERHEAD: Final = MULTI_HEADER.size + INT.size
# Errors that belong to one path rather than to the whole request.
_PER_PATH_ERRORS: Final = (NoNodeError, NoAuthError)


class _Outcome:
    """``ok`` and ``missing`` of a per-path read result (mixed into the result tuples)."""

    __slots__ = ()
    error: ZookeeperError | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def missing(self) -> bool:
        return isinstance(self.error, NoNodeError)


class VersionColumns(NamedTuple):
    """A run of ``get_data_versions`` results as columns (``MultiReader.iter_data_version_columns``):
    each path's data (None when the read failed) and data version (-1 when it failed), and the
    failures by index. Why columns: the caller decodes the datas as a list (a cold failover's million
    state znodes), and a ``VersionedData`` per znode, then a list of each field, was a third of
    parsing the replies."""

    datas: list[bytes | None]
    versions: list[int]
    errors: dict[int, ZookeeperError]


class EncodedPaths(Protocol):
    """Paths that encode a run of themselves, with the chroot, faster than a ``str`` each (a cold
    failover's million state paths: one cached prefix per topic). ``MultiReader`` uses ``encoded``
    when its ``paths`` have it."""

    def encoded(self, start: int, stop: int, full: Callable[[str], str]) -> list[bytes]:
        """``[full(path).encode() for path in self[start:stop]]``."""
        ...


class _DataFields(NamedTuple):
    data: bytes | None
    stat: Any  # kazoo ZnodeStat, or None when the read failed
    error: ZookeeperError | None = None


class DataResult(_DataFields, _Outcome):
    """One path's getData outcome: ``data`` and ``stat`` on success, else ``error`` (e.g. NoNodeError)."""

    __slots__ = ()


class VersionedData(NamedTuple):
    """One path's getData outcome reduced to ``data`` and the data ``version`` (the expected version of
    a conditional write); ``error`` (e.g. NoNodeError) when the read failed, with ``version`` -1.

    The bulk reads of partition state znodes need nothing else from the stat, and not building kazoo's
    11-field ``ZnodeStat`` for each of 100,000 znodes is a tenth of a failover's state read.
    """

    data: bytes | None
    version: int
    error: ZookeeperError | None = None


class _ChildrenFields(NamedTuple):
    children: list[str] | None
    error: ZookeeperError | None = None


class ChildrenResult(_ChildrenFields, _Outcome):
    """One path's getChildren outcome: ``children`` on success, else ``error`` (e.g. NoNodeError)."""

    __slots__ = ()


class LazyPaths(Sequence[str]):
    """The znode path of each item, made when read: the paths of a bulk read without a list of them.

    Why: a cold failover reads a million state znodes; a list of their paths (~100 bytes a ``str``)
    held ~100 MB for the whole read, while the reader only ever needs the paths of the requests it
    is about to send. Indexing makes one path, slicing a ``LazyPaths`` of the slice (items copied as
    references, no paths made)."""

    __slots__ = ("_items", "_path")

    def __init__(self, items: Sequence[Any], path: Callable[[Any], str]) -> None:
        self._items = items
        self._path = path

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: Any) -> Any:  # int -> str, slice -> LazyPaths (Sequence's overloads)
        if isinstance(index, slice):
            return LazyPaths(self._items[index], self._path)
        return self._path(self._items[index])

    def __iter__(self) -> Iterator[str]:
        return map(self._path, self._items)


@dataclass(slots=True)
class MultiReadCounters:
    """What a reader has sent, for benchmarks and metrics."""

    requests: int = 0  # multi-read requests (including the probe)
    ops: int = 0  # paths read through multi-read
    single_reads: int = 0  # paths read one request each (fallback)
    bytes_sent: int = 0
    bytes_received: int = 0
    largest_request: int = 0
    largest_response: int = 0


class SubmittedRead:
    """``submit_data``'s reads, sent: call it to wait for their results; ``ready`` and ``when_ready``
    say when that call would not wait (a standby sending more reads while earlier ones are out).
    ZooKeeper answers a session's requests in order, so the last request answered means all are."""

    __slots__ = ("_last", "_receive")

    def __init__(self, receive: Callable[[], list[DataResult]], last: Any = None) -> None:
        self._receive = receive
        self._last = last  # the last request's kazoo AsyncResult (None: nothing left to wait for)

    def __call__(self) -> list[DataResult]:
        return self._receive()

    def ready(self) -> bool:
        return self._last is None or bool(self._last.ready())

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once ``ready`` (on kazoo's completion thread, or now; possibly twice)."""
        last = self._last
        if last is not None:
            last.rawlink(lambda _result: callback())
        if self.ready():  # answered before the link: rawlink calls back only on a later set
            callback()


class _ReadKind(NamedTuple):
    """One kind of bulk read: the multi-read op, the reply bytes per op besides the data, the
    ``KazooClient`` method of the single-read fallback, and how a failure or a value becomes a result."""

    opcode: int
    overhead: int
    single: str
    failed: Callable[[ZookeeperError], Any]
    convert: Callable[[Any], Any]


class _RawReply(NamedTuple):
    buffer: bytes
    offset: int


class _MultiReadRequest(PreparedRequest):
    """A pre-serialized multi-read; the reply is parsed later, by ``_parse_reply`` on the caller's thread."""

    type = MULTI_READ_OPCODE
    label = "MultiRead"
    __slots__ = ()

    def deserialize(self, buffer: bytes, offset: int) -> _RawReply:
        return _RawReply(buffer, offset)


def _parse_reply(reply: _RawReply, kind: int, count: int) -> Any:
    buf, offset = reply.buffer, reply.offset
    if len(buf) <= offset:
        raise UnimplementedError("empty multi-read reply (server does not support OpCode 22)")
    if kind == _GET_DATA_COLUMNS:
        return _parse_version_columns(buf, offset, count)
    unpack_header = MULTI_HEADER.unpack_from
    unpack_int = INT.unpack_from
    unpack_stat = STAT.unpack_from
    make_stat = ZnodeStat._make
    new_tuple = tuple.__new__
    versioned = kind == _GET_DATA_VERSION
    out: list[Any] = []
    append = out.append
    for _ in range(count):
        op_type, done, _ = unpack_header(buf, offset)
        offset += 9
        if done:
            raise ValueError(f"multi-read reply ended after {len(out)} of {count} results")
        if op_type == GET_DATA_OPCODE:
            (length,) = unpack_int(buf, offset)
            offset += 4
            if length < 0:
                data = None
            else:
                data = buf[offset : offset + length]
                offset += length
            if versioned:
                append(new_tuple(VersionedData, (data, unpack_int(buf, offset + _STAT_VERSION_OFFSET)[0], None)))
            else:
                append(DataResult(data, make_stat(unpack_stat(buf, offset))))
            offset += 68
        elif op_type == GET_CHILDREN_OPCODE:
            (n,) = unpack_int(buf, offset)
            offset += 4
            children: list[str] = []
            for _ in range(max(n, 0)):
                (length,) = unpack_int(buf, offset)
                offset += 4
                children.append(buf[offset : offset + length].decode())
                offset += length
            append(ChildrenResult(children))
        elif op_type == ERROR_OPCODE:
            (code,) = unpack_int(buf, offset)
            offset += 4
            error = EXCEPTIONS[code]()
            if kind == GET_CHILDREN_OPCODE:
                append(ChildrenResult(None, error))
            else:
                append(VersionedData(None, -1, error) if versioned else DataResult(None, None, error))
        else:
            raise ValueError(f"unexpected op type {op_type} in a multi-read reply")
    return out


def _parse_version_columns(buf: bytes, offset: int, count: int) -> VersionColumns:
    """``_parse_reply`` of a versioned getData reply into columns: one ``unpack`` for each op's header
    and data length (or error code), one for the version, no object per op but its data."""
    unpack_header = _HEADER_AND_INT.unpack_from
    unpack_int = INT.unpack_from
    datas: list[bytes | None] = []
    versions: list[int] = []
    errors: dict[int, ZookeeperError] = {}
    add_data, add_version = datas.append, versions.append
    for i in range(count):
        try:
            op_type, done, _, length = unpack_header(buf, offset)
        except struct.error:  # the done header (9 bytes) last in the buffer
            raise ValueError(f"multi-read reply ended after {i} of {count} results") from None
        if done:
            raise ValueError(f"multi-read reply ended after {i} of {count} results")
        offset += 13
        if op_type == GET_DATA_OPCODE:
            if length < 0:
                add_data(None)
            else:
                end = offset + length
                add_data(buf[offset:end])
                offset = end
            add_version(unpack_int(buf, offset + _STAT_VERSION_OFFSET)[0])
            offset += 68
        elif op_type == ERROR_OPCODE:
            errors[i] = EXCEPTIONS[length]()
            add_data(None)
            add_version(-1)
        else:
            raise ValueError(f"unexpected op type {op_type} in a multi-read reply")
    return VersionColumns(datas, versions, errors)


class MultiReader:
    """Reads many znodes (data + stat, or children) with few round trips.

    Usage::

        reader = MultiReader(client)
        results = reader.get_data(["/brokers/ids/1", "/brokers/ids/2"])
        for path, r in zip(paths, results):
            if r.ok: ...          # r.data, r.stat
            elif r.missing: ...   # NONODE for this path only

    ``use_multi_read=False`` forces the pipelined single-request path (what a pre-3.6 server gets);
    ``None`` detects support on first use. Not thread-safe for concurrent calls on one instance
    beyond its counters being approximate; the controller calls it from its event thread.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = 8,
        single_window: int = 1000,
        timeout: float = 60.0,
        use_multi_read: bool | None = None,
    ) -> None:
        if max_batch_bytes < 1024:
            raise ValueError(f"max_batch_bytes={max_batch_bytes} is too small to hold one op")
        self._client = client
        self.max_batch_bytes = max_batch_bytes
        self.max_in_flight = max(1, max_in_flight)
        self.single_window = max(1, single_window)
        self.timeout = timeout
        self._supported: bool | None = use_multi_read
        self._probe_drops = 0
        self.counters = MultiReadCounters()

    @property
    def supported(self) -> bool | None:
        """Whether the server answers multi-reads (None until the first bulk read has probed)."""
        return self._supported

    # -- public API ----------------------------------------------------------------------------------
    def get_data(self, paths: Sequence[str], *, size_hint: int = 256) -> list[DataResult]:
        """Read data and stat of every path; ``size_hint`` is the expected data size per node in bytes."""
        return self._read(_DATA, paths, size_hint)

    def iter_data(self, paths: Sequence[str], *, size_hint: int = 256) -> Iterator[list[DataResult]]:
        """``get_data`` handed over one multi-read at a time, in order, so the caller applies each
        while ZooKeeper answers the next (a standby applying 60,000 changed state znodes)."""
        yield from self._read_chunks(_DATA, paths, size_hint)

    def submit_data(self, paths: Sequence[str], *, size_hint: int = 256) -> SubmittedRead:
        """Send the multi-reads of ``paths`` now (split to stay under ``max_batch_bytes``) and return a
        call that waits for their results, ``get_data``'s (``SubmittedRead``: it also says when they
        are in). For a caller that keeps several reads of its own in flight, each sent as soon as it
        knows what to read (a standby streaming the paths it is told changed). Without multi-read
        the call does ``get_data`` itself."""
        if not paths:
            return SubmittedRead(list)
        if not self._multi_read_available():
            return SubmittedRead(lambda: self.get_data(paths, size_hint=size_hint))
        full = under_chroot(self._client.chroot)
        budget = self.max_batch_bytes - 64
        estimate = _DATA_OVERHEAD + max(0, size_hint)
        sent: list[tuple[_MultiReadRequest, Any]] = []
        parts: list[bytes] = []
        start = request_bytes = response_bytes = 0
        for i, path in enumerate(paths):
            encoded = full(path).encode()
            op_bytes = 9 + 4 + len(encoded) + 1
            if i > start and (request_bytes + op_bytes > budget or response_bytes + estimate > budget):
                parts.append(DONE)
                request = _MultiReadRequest(b"".join(parts), i - start)
                sent.append((request, self._submit(request)))
                parts, start, request_bytes, response_bytes = [], i, 0, 0
            parts += (_HEADER_DATA, INT.pack(len(encoded)), encoded, b"\x00")
            request_bytes += op_bytes
            response_bytes += estimate
        parts.append(DONE)
        request = _MultiReadRequest(b"".join(parts), len(paths) - start)
        sent.append((request, self._submit(request)))

        def receive() -> list[DataResult]:
            out: list[DataResult] = []
            for request, pending in sent:
                try:
                    out.extend(self._receive(pending, request, GET_DATA_OPCODE)[0])
                except UnimplementedError:
                    self._mark_unsupported("UNIMPLEMENTED on a bulk read")
                    return out + self.get_data(paths[len(out) :], size_hint=size_hint)
            return out

        return SubmittedRead(receive, sent[-1][1])

    def get_data_versions(self, paths: Sequence[str], *, size_hint: int = 256) -> list[VersionedData]:
        """``get_data`` with each stat reduced to its data version (what bulk state reads need)."""
        return self._read(_DATA_VERSIONS, paths, size_hint)

    def iter_data_versions(self, paths: Sequence[str], *, size_hint: int = 256) -> Iterator[VersionedData]:
        """``get_data_versions`` handed over as each multi-read comes back, in order, so the caller
        decodes one batch while ZooKeeper answers the next (a failover's 100,000 state reads)."""
        for chunk in self._read_chunks(_DATA_VERSIONS, paths, size_hint):
            yield from chunk

    def iter_data_version_columns(self, paths: Sequence[str], *, size_hint: int = 256) -> Iterator[VersionColumns]:
        """``iter_data_versions`` as columns, one ``VersionColumns`` per multi-read as it comes back (the
        next ones in flight); without multi-read, one for all the paths not yet answered."""
        if not paths:
            return
        done = 0
        if self._multi_read_available():
            try:
                for chunk in self._run_iter(_GET_DATA_COLUMNS, paths, _DATA_OVERHEAD + max(0, size_hint)):
                    done += len(chunk.datas)
                    yield chunk
                return
            except UnimplementedError:
                self._mark_unsupported("UNIMPLEMENTED on a bulk read")
        results = self._singles(paths[done:], self._client.get_async, _versioned_error, _versioned)
        yield VersionColumns(
            [r.data for r in results],
            [r.version for r in results],
            {i: r.error for i, r in enumerate(results) if r.error is not None},
        )

    def get_children(self, paths: Sequence[str], *, size_hint: int = 256) -> list[ChildrenResult]:
        """List the children of every path; ``size_hint`` is the expected serialized size of one list."""
        return self._read(_CHILDREN, paths, size_hint)

    def _read(self, kind: _ReadKind, paths: Sequence[str], size_hint: int) -> list[Any]:
        results: list[Any] = []
        for chunk in self._read_chunks(kind, paths, size_hint):
            results.extend(chunk)
        return results

    def _read_chunks(self, kind: _ReadKind, paths: Sequence[str], size_hint: int) -> Iterator[list[Any]]:
        """Multi-read results request by request when the server has it; otherwise, or from the first
        path not yet answered on UNIMPLEMENTED, pipelined single reads (one last chunk)."""
        if not paths:
            return
        done = 0
        if self._multi_read_available():
            try:
                for chunk in self._run_iter(kind.opcode, paths, kind.overhead + max(0, size_hint)):
                    done += len(chunk)
                    yield chunk
                return
            except UnimplementedError:
                self._mark_unsupported("UNIMPLEMENTED on a bulk read")
        yield self._singles(paths[done:], getattr(self._client, kind.single), kind.failed, kind.convert)

    # -- multi-read ----------------------------------------------------------------------------------
    def _submit(self, request: _MultiReadRequest) -> Any:
        result = self._client.handler.async_result()
        self._client._call(request, result)  # kazoo has no public call for a custom request type
        c = self.counters
        c.requests += 1
        c.ops += request.count
        c.bytes_sent += len(request.payload) + 12  # + length prefix, xid, opcode
        c.largest_request = max(c.largest_request, len(request.payload) + 12)
        return result

    def _receive(self, pending: Any, request: _MultiReadRequest, kind: int) -> tuple[Any, int]:
        reply: _RawReply = pending.get(timeout=self.timeout)
        size = len(reply.buffer)
        self.counters.bytes_received += size
        self.counters.largest_response = max(self.counters.largest_response, size)
        return _parse_reply(reply, kind, request.count), size

    def _run_iter(self, kind: int, paths: Sequence[str], per_op_estimate: int) -> Iterator[Any]:
        """Pipelined multi-reads of ``paths``; yields each request's results in order, as it comes back
        (with the next requests already in flight, so the server works while the caller does)."""
        n = len(paths)
        full = under_chroot(self._client.chroot)
        header = _HEADER_CHILDREN if kind == GET_CHILDREN_OPCODE else _HEADER_DATA
        overhead = _CHILDREN_OVERHEAD if kind == GET_CHILDREN_OPCODE else _DATA_OVERHEAD
        budget = self.max_batch_bytes - 64  # reply header, length prefix, done header
        estimate = per_op_estimate
        in_flight: deque[tuple[_MultiReadRequest, Any]] = deque()
        pos = 0

        prefixes: dict[int, bytes] = {}  # path length -> op header + length prefix (a few distinct lengths)
        encode_run: Callable[[int, int, Callable[[str], str]], list[bytes]] | None = getattr(paths, "encoded", None)

        def fill() -> None:
            # A request's ops are encoded in bulk (a failover reads a million paths): as many ops as
            # the reply estimate allows, cut where the request's own bytes would pass the budget.
            nonlocal pos
            while pos < n and len(in_flight) < self.max_in_flight:
                count = min(n - pos, max(1, budget // estimate))
                if encode_run is not None:
                    encoded = encode_run(pos, pos + count, full)
                else:
                    encoded = [full(path).encode() for path in paths[pos : pos + count]]
                sizes = [len(e) for e in encoded]
                if sum(sizes) + 14 * count > budget:  # long paths: op bytes = 9 + 4 + path + 1
                    fits = bisect_right(list(accumulate(size + 14 for size in sizes)), budget)
                    count = max(1, fits)
                    del encoded[count:], sizes[count:]
                for size in set(sizes) - prefixes.keys():
                    prefixes[size] = header + INT.pack(size)
                # Each op: header, length, path, then watch = false (ignored by the server anyway).
                ops = b"\x00".join([prefixes[size] + e for size, e in zip(sizes, encoded, strict=True)])
                request = _MultiReadRequest(ops + b"\x00" + DONE, count)
                in_flight.append((request, self._submit(request)))
                pos += count

        fill()
        while in_flight:
            request, pending = in_flight.popleft()
            chunk, reply_size = self._receive(pending, request, kind)
            # Learn the real per-op size so later chunks of this call stay under the budget.
            estimate = max(estimate, reply_size // request.count + 1, overhead)
            fill()
            yield chunk

    def _multi_read_available(self) -> bool:
        if self._supported is None:
            self._probe()
        return bool(self._supported)

    def _probe(self) -> None:
        root = under_chroot(self._client.chroot)("/").encode()
        request = _MultiReadRequest(_HEADER_DATA + INT.pack(len(root)) + root + b"\x00" + DONE, 1)
        try:
            self._receive(self._submit(request), request, GET_DATA_OPCODE)
        except UnimplementedError:
            self._mark_unsupported("the server answered UNIMPLEMENTED")
        except (ConnectionLoss, ConnectionClosedError):
            # An old server may drop the connection on an unknown opcode; a flaky network may too.
            self._probe_drops += 1
            if self._probe_drops >= 2:
                self._mark_unsupported("the connection dropped on two probes in a row")
            else:
                logger.info("multi-read probe lost its connection; using single reads for this call")
        except ValueError as exc:
            self._mark_unsupported(f"unreadable probe reply ({exc})")
        else:
            self._supported = True
            logger.debug("ZooKeeper supports multi-read")

    def _mark_unsupported(self, why: str) -> None:
        if self._supported is not False:
            logger.warning("ZooKeeper multi-read (OpCode 22) unavailable: %s; using pipelined single reads", why)
        self._supported = False

    # -- fallback: pipelined single requests -------------------------------------------------------
    def _singles(
        self,
        paths: Sequence[str],
        call: Callable[[str], Any],
        failed: Callable[[ZookeeperError], Any],
        convert: Callable[[Any], Any],
    ) -> list[Any]:
        n = len(paths)
        results: list[Any] = [None] * n
        window: deque[tuple[int, Any]] = deque()
        pos = 0
        while pos < n or window:
            while pos < n and len(window) < self.single_window:
                window.append((pos, call(paths[pos])))
                pos += 1
            index, pending = window.popleft()
            try:
                results[index] = convert(pending.get(timeout=self.timeout))
            except _PER_PATH_ERRORS as exc:
                results[index] = failed(exc)
        self.counters.single_reads += n
        return results


def _versioned(value: Any) -> VersionedData:
    data, stat = value
    return VersionedData(data, stat.version)


def _versioned_error(error: ZookeeperError) -> VersionedData:
    return VersionedData(None, -1, error)


_DATA: Final = _ReadKind(
    GET_DATA_OPCODE, _DATA_OVERHEAD, "get_async", lambda error: DataResult(None, None, error), lambda v: DataResult(*v)
)
_DATA_VERSIONS: Final = _ReadKind(_GET_DATA_VERSION, _DATA_OVERHEAD, "get_async", _versioned_error, _versioned)
_CHILDREN: Final = _ReadKind(
    GET_CHILDREN_OPCODE,
    _CHILDREN_OVERHEAD,
    "get_children_async",
    lambda error: ChildrenResult(None, error),
    lambda v: ChildrenResult(list(v)),
)
