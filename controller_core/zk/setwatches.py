"""Arm many ZooKeeper watches in one request: SetWatches (OpCode 101) over kazoo.

A failover arms two node watches per topic (its assignment and its config): 8,000 at 4,000 topics.
One ``exists`` per path costs a round trip and kazoo's per-request Python on both ends, 0.7 to 1 s for
4,000 on a 2-core machine. ZooKeeper's own client restores its watches after a reconnect with one
SetWatches request instead, and that request is what this module sends:

* request: ``relativeZxid`` (long), then three string vectors (data watches, exist watches, child
  watches), split so that no request exceeds ``MAX_REQUEST_BYTES`` (128 KB, the Java client's own
  limit for the same request);
* the server arms each watch and fires it **at once** when the path changed after ``relativeZxid``:
  a data watch whose node is gone (NodeDeleted) or was modified later (NodeDataChanged), an exist
  watch whose node now exists (NodeCreated), a child watch whose children changed later;
* reply: a bare header (no body).

So the caller reads first, then arms with a ``relativeZxid`` the session had already seen *before*
that read began: a change the read missed has a later zxid and fires, a change the read saw may fire
once more (handlers re-read; duplicates are allowed by the registry's contract).

kazoo routes a fired watch to the callbacks in ``client._data_watchers[path]`` (data and exist
watches) or ``client._child_watchers[path]``, keyed by the full (chrooted) path, and normally fills
them when a read with a watch is answered. A SetWatches request fills them itself, in ``serialize()``:
kazoo calls that on its connection thread just before the bytes go out, so the callbacks are in place
before the server can fire, no other thread touches kazoo's dictionaries, and a connection lost after
that point hands every callback kazoo's ``NONE`` event like any other watch (the registry then re-arms
and compares). A request still queued when the connection drops is sent, and registers, again on the
next connection of the same session.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from kazoo.client import KazooClient

from controller_core.zk.paths import under_chroot

SET_WATCHES_OPCODE: Final = 101
MAX_REQUEST_BYTES: Final = 128 * 1024

_INT: Final = struct.Struct("!i")
_LONG: Final = struct.Struct("!q")
_EMPTY_VECTOR: Final = _INT.pack(0)

Watcher = Callable[[Any], None]


class _SetWatchesRequest:
    """One pre-encoded SetWatches request; registers its callbacks with kazoo as it is sent."""

    type = SET_WATCHES_OPCODE
    __slots__ = ("_client", "_data", "_exist", "count", "payload")

    def __init__(
        self,
        client: KazooClient,
        payload: bytes,
        data: Sequence[tuple[str, Watcher]],
        exist: Sequence[tuple[str, Watcher]],
    ) -> None:
        self._client = client
        self.payload = payload
        self._data = data
        self._exist = exist
        self.count = len(data) + len(exist)

    def serialize(self) -> bytes:
        # kazoo's connection thread, right before the write: see the module docstring.
        watchers = self._client._data_watchers
        for path, callback in self._data:
            watchers[path].add(callback)
        for path, callback in self._exist:
            watchers[path].add(callback)
        return self.payload

    def deserialize(self, buffer: bytes, offset: int) -> None:
        return None

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG: keep it one short line
        return f"SetWatches({self.count} paths, {len(self.payload)} bytes)"


def _vector(encoded: Sequence[bytes]) -> bytes:
    parts = [_INT.pack(len(encoded))]
    for path in encoded:
        parts.append(_INT.pack(len(path)))
        parts.append(path)
    return b"".join(parts)


def set_node_watches(
    client: KazooClient,
    since_zxid: int,
    existing: Sequence[tuple[str, Watcher]],
    absent: Sequence[tuple[str, Watcher]],
    *,
    max_request_bytes: int = MAX_REQUEST_BYTES,
) -> list[Any]:
    """Send SetWatches requests arming node watches, and return kazoo's pending results (one per request).

    ``existing`` get data watches (modification and deletion), ``absent`` exist watches (creation);
    paths are relative to the client's chroot, as everywhere else. Any change after ``since_zxid``
    fires at once. Call ``.get()`` on each result: the requests are in flight together.
    """
    if max_request_bytes < 1024:
        raise ValueError(f"max_request_bytes={max_request_bytes} is too small to hold one path")
    full = under_chroot(client.chroot)
    budget = max_request_bytes - _LONG.size - 3 * _INT.size
    pending: list[Any] = []
    queue = [(full(p), cb, True) for p, cb in existing] + [(full(p), cb, False) for p, cb in absent]
    pos = 0
    while pos < len(queue):
        data: list[tuple[str, Watcher]] = []
        exist: list[tuple[str, Watcher]] = []
        data_paths: list[bytes] = []
        exist_paths: list[bytes] = []
        size = 0
        while pos < len(queue):
            path, callback, is_data = queue[pos]
            encoded = path.encode()
            if size and size + _INT.size + len(encoded) > budget:
                break
            size += _INT.size + len(encoded)
            (data if is_data else exist).append((path, callback))
            (data_paths if is_data else exist_paths).append(encoded)
            pos += 1
        payload = b"".join((_LONG.pack(since_zxid), _vector(data_paths), _vector(exist_paths), _EMPTY_VECTOR))
        request = _SetWatchesRequest(client, payload, data, exist)
        result = client.handler.async_result()
        client._call(request, result)  # kazoo has no public call for a custom request type
        pending.append(result)
    return pending
