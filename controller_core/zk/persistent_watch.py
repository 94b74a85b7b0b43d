"""Persistent recursive watches (ZooKeeper 3.6+ AddWatch, OpCode 106) over kazoo.

A standby controller follows every change below ``/brokers`` and ``/admin`` while it waits. One-shot
watches would have to be re-armed per znode after every event (100,000 state znodes at 100,000
partitions); a persistent recursive watch is armed once per subtree and fires for every later
creation, deletion and data change below it until it is removed or the connection is lost.

kazoo 2.11 has no call for it, so this module encodes the requests the way ``setwatches`` encodes
SetWatches and sends them with ``KazooClient._call``:

* AddWatch (106): ``path`` (string), ``mode`` (int: 0 PERSISTENT, 1 PERSISTENT_RECURSIVE); the reply
  is a bare header (an error code on failure);
* RemoveWatches (18): ``path``, ``type`` (3: any watch of this connection on the path); a bare header,
  NOWATCHER when there was none.

Routing the events: kazoo hands a watch event only to the one-shot callbacks registered for its exact
path (and forgets them). A recursive watch's events name the changed znode, not the watched root, so
a ``PersistentWatchTap`` wraps the connection's ``_read_watch_event`` (kazoo's connection thread) and
passes every event under its roots to a sink *before* kazoo's own routing runs unchanged (ZooKeeper
sends one event per change to a connection even when a one-shot and a persistent watch both match, and
both must see it, as in ZooKeeper's Java client). kazoo's routing is skipped for an event when kazoo
holds no one-shot watcher for its path (it would find none: the common case, a partition state
change). The sink runs on kazoo's connection thread: it must only record and return.

Ordering (why a follower can prove it is current): ZooKeeper writes a session's watch events and its
replies to the connection in the order the server applied the changes, so every event of a change
applied before a request's reply has been read (and handed to the sink) before that reply is.

Connection loss: the server drops a connection's watches with it. kazoo restores only its own one-shot
watches on reconnect, so after a loss the caller must AddWatch again and re-read (events in between
are lost): the tap's owner learns of the loss from kazoo's state listener.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.protocol.serialization import Watch

from controller_core.zk.paths import under_chroot

ADD_WATCH_OPCODE: Final = 106
REMOVE_WATCHES_OPCODE: Final = 18
MODE_PERSISTENT: Final = 0
MODE_PERSISTENT_RECURSIVE: Final = 1
WATCHER_TYPE_ANY: Final = 3
# ZooKeeper's event types as they come on the wire (kazoo's EventType names in brackets).
NODE_CREATED: Final = 1  # CREATED
NODE_DELETED: Final = 2  # DELETED
NODE_DATA_CHANGED: Final = 3  # CHANGED

#: Event types kazoo routes to one-shot watchers by path alone (a child event, 4, never comes from a
#: recursive watch; anything else goes to kazoo, which logs it).
_ROUTED_TYPES: Final = frozenset((NODE_CREATED, NODE_DELETED, NODE_DATA_CHANGED))

logger = logging.getLogger(__name__)

_INT: Final = struct.Struct("!i")
_TYPE_STATE: Final = struct.Struct("!ii")

EventSink = Callable[[int, str], None]
"""Receives (wire event type, path relative to the chroot) on kazoo's connection thread."""


class _PathAndIntRequest:
    """A request whose body is a path and one int (AddWatch, RemoveWatches); the reply has no body."""

    __slots__ = ("_payload", "type")

    def __init__(self, opcode: int, full_path: str, value: int) -> None:
        self.type = opcode
        encoded = full_path.encode()
        self._payload = _INT.pack(len(encoded)) + encoded + _INT.pack(value)

    def serialize(self) -> bytes:
        return self._payload

    def deserialize(self, buffer: bytes, offset: int) -> None:
        return None

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG
        return f"Op{self.type}({len(self._payload)} bytes)"


def add_watch_async(client: KazooClient, path: str, mode: int = MODE_PERSISTENT_RECURSIVE) -> Any:
    """Send AddWatch for ``path`` (relative to the client's chroot; it need not exist); returns
    kazoo's pending result (``.get()`` raises kazoo's exception for the error code)."""
    if mode not in (MODE_PERSISTENT, MODE_PERSISTENT_RECURSIVE):
        raise ValueError(f"AddWatch mode must be 0 (persistent) or 1 (persistent recursive), not {mode}")
    result = client.handler.async_result()
    client._call(_PathAndIntRequest(ADD_WATCH_OPCODE, under_chroot(client.chroot)(path), mode), result)
    return result


def remove_watches_async(client: KazooClient, path: str) -> Any:
    """Send RemoveWatches(any) for ``path``: drops this connection's watches on it (NOWATCHER when none)."""
    result = client.handler.async_result()
    client._call(_PathAndIntRequest(REMOVE_WATCHES_OPCODE, under_chroot(client.chroot)(path), WATCHER_TYPE_ANY), result)
    return result


class PersistentWatchTap:
    """Passes the watch events under ``roots`` to ``sink``, then lets kazoo route them as before.

    Installed on one client's connection (``install``/``uninstall``); at most one tap per client.
    ``roots`` are relative to the chroot; an event on a root itself or below it is passed on.
    """

    def __init__(self, client: KazooClient, roots: Iterable[str], sink: EventSink) -> None:
        self._client = client
        full = under_chroot(client.chroot)
        self._chroot_len = len(client.chroot or "")
        self._prefixes = tuple(full(r).rstrip("/") + "/" for r in roots)
        self._roots = frozenset(full(r) for r in roots)
        self._sink = sink
        self._original: Callable[[bytes, int], Any] | None = None

    def install(self) -> None:
        connection = self._client._connection
        if getattr(connection, "_persistent_watch_tap", None) is not None:
            raise RuntimeError("a persistent watch tap is already installed on this client")
        self._original = connection._read_watch_event
        connection._persistent_watch_tap = self
        connection._read_watch_event = self._read_watch_event

    def uninstall(self) -> None:
        connection = self._client._connection
        if getattr(connection, "_persistent_watch_tap", None) is self:
            connection._read_watch_event = self._original
            connection._persistent_watch_tap = None

    def _read_watch_event(self, buffer: bytes, offset: int) -> Any:
        # kazoo's connection thread: decode only the path and type, hand them over, then let kazoo
        # route the event, unless kazoo holds no one-shot watcher for that path: its routing would
        # find none (it looks up exactly these two maps by the full path) after decoding the event
        # again, logging it and building a WatchedEvent. That is most of a followed change's cost on
        # this thread, which holds the GIL the follower's reads need (60,000 state changes in a
        # broker failure).
        client = self._client
        path = ""
        try:
            event_type, _state = _TYPE_STATE.unpack_from(buffer, offset)
            (length,) = _INT.unpack_from(buffer, offset + 8)
            path = bytes(buffer[offset + 12 : offset + 12 + length]).decode()
            if path in self._roots or path.startswith(self._prefixes):
                relative = path[self._chroot_len :] or "/"
                self._sink(event_type, relative)
                if (
                    event_type in _ROUTED_TYPES
                    and path not in client._data_watchers
                    and path not in client._child_watchers
                ):
                    return None
        except Exception:
            logger.exception("persistent watch tap: cannot read a watch event for %r", path)
        assert self._original is not None
        return self._original(buffer, offset)


def decode_watch_event(buffer: bytes, offset: int = 0) -> Watch:
    """kazoo's decoding of one watch event body (for tests and logs)."""
    return Watch.deserialize(buffer, offset)[0]
