"""The store's plumbing: the client, the bounds, the counters and the reads every concern shares.

``StoreBase`` holds what the fenced-multi engine and the concern modules (controller, brokers,
topics, admin, configs) all need: the kazoo client, the multi and read bounds, the multi-reader,
the reliability-history recorder, the counters, and the small read helpers. Bulk reads resume once
after a connection loss (``_resumed_once``): they are idempotent, and kazoo queues the retry until
it has reconnected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE

from controller_core.zk import paths
from controller_core.zk.history import HistoryRecorder, process_recorder
from controller_core.zk.jute import INT
from controller_core.zk.multiread import (
    DEFAULT_MAX_BATCH_BYTES,
    DataResult,
    MultiReadCounters,
    MultiReader,
    VersionColumns,
    VersionedData,
)
from controller_core.zk.store.wire import CONNECTION_DROPPED, DEFAULT_MAX_MULTI_BYTES, StoreCounters, encode_string

logger = logging.getLogger(__name__)


class StoreBase:
    """Shared state of a ``ZkStore`` (see ``controller_core.zk.store.ZkStore`` for the parameters)."""

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
        self._acl = INT.pack(len(acl)) + b"".join(
            INT.pack(a.perms) + encode_string(a.id.scheme) + encode_string(a.id.id) for a in acl
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
        """Create Kafka's persistent paths (``paths.PERSISTENT_PATHS``, with parents) where missing.

        Their existence is checked in one pipelined round (a failover's first step: ~13 round trips
        one after the other were 5 to 50 ms of a warm takeover); only the missing are created."""
        client = self._client
        checks = [(path, client.exists_async(path)) for path in paths.PERSISTENT_PATHS]
        for path, exists in checks:
            if exists.get() is None:
                client.ensure_path(path)

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

    def _iter_version_columns(self, znode_paths: Sequence[str], *, size_hint: int) -> Iterator[VersionColumns]:
        """``MultiReader.iter_data_version_columns``, resumed once after a connection loss."""
        return _chunks_resumed_once(self.reader.iter_data_version_columns, znode_paths, size_hint, _column_length)

    def _iter_data(self, znode_paths: Sequence[str], *, size_hint: int) -> Iterator[list[DataResult]]:
        """``MultiReader.iter_data`` (a multi-read's results at a time), resumed once after a connection loss."""
        return _chunks_resumed_once(self.reader.iter_data, znode_paths, size_hint, len)

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


_T = TypeVar("_T")
_C = TypeVar("_C")


def _column_length(chunk: VersionColumns) -> int:
    return len(chunk.datas)


def _chunks_resumed_once(
    read: Callable[..., Iterable[_C]], znode_paths: Sequence[str], size_hint: int, length: Callable[[_C], int]
) -> Iterator[_C]:
    """``_resumed_once`` for a read handed over a chunk at a time (``length``: the paths a chunk answers)."""
    done = 0
    try:
        for chunk in read(znode_paths, size_hint=size_hint):
            done += length(chunk)
            yield chunk
    except CONNECTION_DROPPED:
        logger.info("connection lost during a bulk read of %d znodes; retrying once", len(znode_paths) - done)
        yield from read(znode_paths[done:], size_hint=size_hint)


def _resumed_once(read: Callable[..., Iterable[_T]], znode_paths: Sequence[str], size_hint: int) -> Iterator[_T]:
    """A bulk read, resumed once after a connection loss from the first path not yet handed over (all
    of them for a reader that answers as a list): reads are idempotent, and kazoo queues the retry
    until it has reconnected."""
    done = 0
    try:
        for result in read(znode_paths, size_hint=size_hint):
            done += 1
            yield result
    except CONNECTION_DROPPED:
        logger.info("connection lost during a bulk read of %d znodes; retrying once", len(znode_paths) - done)
        yield from read(znode_paths[done:], size_hint=size_hint)
