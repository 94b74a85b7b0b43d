"""Buffered socket reads for one kazoo connection: many ZooKeeper packets per ``recv``.

Why: kazoo's connection thread reads every packet with two ``_read`` calls (length, then body), each
a ``select`` (kazoo's builds and closes an epoll object per call) and a ``recv``, and goes through its
main loop's ``select`` again between packets: about 45 us of Python and six system calls per packet.
A standby follows every change below ``/brokers`` (a broker failure at 100,000 partitions sends it
~60,000 watch events in one or two seconds), and that thread holds the GIL the follower's own reads
and decoding need. Measured with ``StandbyFollower`` on 60,000 state changes: the connection thread
spent 2.7 CPU-s, most of it in those ``select`` calls.

How: ``install()`` wraps the connection's ``_read`` and ``_read_socket`` (kazoo 2.x private
methods, like ``persistent_watch``'s tap). While kazoo's main loop reads a packet, ``_read`` takes
what the socket holds (up to ``CHUNK`` bytes) into a buffer and serves the packet from it; after the
packet, ``_read_socket`` handles every further *complete* packet already buffered before it returns
to the main loop (whose ``select`` would not fire for bytes already taken off the socket). A partial
packet stays buffered; its remaining bytes make the socket readable again. Order is unchanged: the
buffer is the byte stream, read front to back.

Watch events at the front of the buffer skip kazoo's packet reading altogether: each goes straight to
the connection's ``_read_watch_event`` with its body, as kazoo's ``_read_socket`` hands it over after
its two ``_read`` calls (each entering a context manager) and a ``ReplyHeader``. That was most of the
~7 us a followed change cost this thread (a standby's 30,000 events in a broker failure: 0.2 to
0.3 CPU-s, holding the GIL the follower needs; 0.06 to 0.1 s this way). Any other packet (a reply, a
ping) stops the run and goes through kazoo, so events and replies keep their order.

``uninstall()`` only stops buffering: kazoo's own methods come back on its connection thread once the
buffer is empty, so no byte taken off the socket is lost. Unchanged: kazoo's own ``_read`` for the
connection handshake (``_invoke``, before the main loop) and
for TLS sockets (their own buffering); a new socket (reconnect) starts with an empty buffer; socket
errors still become ``ConnectionDropped``, a read timeout kazoo's timeout exception. The main loop
checks for requests to send after each call, so a call handles at most what one ``recv`` returned.
"""

from __future__ import annotations

import select
import struct
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionDropped
from kazoo.protocol.connection import CLOSE_RESPONSE, WATCH_XID

CHUNK: Final = 256 * 1024
_LENGTH: Final = struct.Struct("!i")
_LENGTH_AND_XID: Final = struct.Struct("!ii")
_REPLY_HEADER_SIZE: Final = 16  # xid (int), zxid (long), err (int): where a watch event's body starts


class BufferedReads:
    """Installed on one client's connection (``install``/``uninstall``); at most one per client."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._connection: Any = None
        self._original_read: Any = None
        self._original_read_socket: Any = None
        self._socket: Any = None
        self._poll: Any = None
        self._buffer = bytearray()
        self._pos = 0
        self._in_main_loop = False
        self._retired = False
        self.packets_from_buffer = 0  # packets handled without going back to kazoo's main loop
        self.watch_events_direct = 0  # ... of which watch events handed over without kazoo's reading

    def install(self) -> None:
        connection = self._client._connection
        installed = getattr(connection, "_buffered_reads", None)
        if installed is self:  # uninstalled, but not yet handed back (bytes were still buffered)
            self._retired = False
            return
        if installed is not None:
            raise RuntimeError("buffered reads are already installed on this client")
        self._connection = connection
        self._retired = False
        self._original_read = connection._read
        self._original_read_socket = connection._read_socket
        connection._buffered_reads = self
        connection._read = self._read
        connection._read_socket = self._read_socket

    def uninstall(self) -> None:
        """Stop buffering. kazoo's own reads come back on its connection thread, between two packets,
        once nothing is left buffered: bytes already taken off the socket are never dropped."""
        self._retired = True

    @property
    def installed(self) -> bool:
        connection = self._connection
        return connection is not None and getattr(connection, "_buffered_reads", None) is self

    # -- kazoo's connection thread ---------------------------------------------------------------
    def _read_socket(self, read_timeout: float) -> Any:
        self._in_main_loop = True
        try:
            response = self._original_read_socket(read_timeout)
            while response != CLOSE_RESPONSE:
                self._watch_events_from_buffer()
                if not self._complete_packet_buffered():
                    break
                self.packets_from_buffer += 1
                response = self._original_read_socket(read_timeout)
            return response
        finally:
            self._in_main_loop = False
            if self._retired and not self._buffered_bytes():
                self._hand_back()

    def _watch_events_from_buffer(self) -> None:
        """Hand every complete watch event at the front of the buffer to the connection's
        ``_read_watch_event`` (body and offset as kazoo's ``_read_socket`` passes them); stops at the
        first packet that is not one, or not complete."""
        connection = self._connection
        if self._retired or self._socket is not connection._socket:
            return
        buffer = self._buffer
        pos, end = self._pos, len(buffer)
        read_event = connection._read_watch_event
        unpack = _LENGTH_AND_XID.unpack_from
        while end - pos >= 8:
            length, xid = unpack(buffer, pos)
            stop = pos + 4 + length
            if xid != WATCH_XID or stop > end:
                break
            body = bytes(buffer[pos + 4 : stop])
            self._pos = pos = stop  # first: if the event's handling raises, the buffer is still whole
            self.packets_from_buffer += 1
            self.watch_events_direct += 1
            read_event(body, _REPLY_HEADER_SIZE)
        if self._pos == len(buffer) and self._pos:
            buffer.clear()
            self._pos = 0

    def _hand_back(self) -> None:
        connection = self._connection
        if connection is not None and getattr(connection, "_buffered_reads", None) is self:
            connection._read = self._original_read
            connection._read_socket = self._original_read_socket
            connection._buffered_reads = None
        self._connection = None
        self._socket = None
        self._buffer = bytearray()
        self._pos = 0

    def _buffered_bytes(self) -> int:
        if self._connection is None or self._socket is not self._connection._socket:
            return 0  # a new connection: what was buffered belonged to the old one
        return len(self._buffer) - self._pos

    def _complete_packet_buffered(self) -> bool:
        if self._socket is not self._connection._socket:
            return False
        available = len(self._buffer) - self._pos
        if available < 4:
            return False
        length: int = _LENGTH.unpack_from(self._buffer, self._pos)[0]
        return available >= 4 + length

    def _read(self, length: int, timeout: float) -> bytes:
        connection = self._connection
        sock = connection._socket
        if not self._in_main_loop or hasattr(sock, "pending") or (self._retired and not self._buffered_bytes()):
            return self._original_read(length, timeout)  # type: ignore[no-any-return]  # handshake, TLS
        if sock is not self._socket:  # a new connection: nothing buffered belongs to it
            self._socket = sock
            self._buffer = bytearray()
            self._pos = 0
            self._poll = select.poll()
            self._poll.register(sock, select.POLLIN)
        buffer = self._buffer
        with connection._socket_error_handling():
            while len(buffer) - self._pos < length:
                if not self._poll.poll(max(0.0, timeout) * 1000):
                    raise connection.handler.timeout_exception("socket time-out during read")
                # Retired: only the rest of this packet, so the buffer empties at its end.
                chunk = sock.recv(length - (len(buffer) - self._pos) if self._retired else max(CHUNK, length))
                if not chunk:
                    raise ConnectionDropped("socket connection broken")
                if self._pos:
                    del buffer[: self._pos]
                    self._pos = 0
                buffer += chunk
        start = self._pos
        self._pos = start + length
        out = bytes(buffer[start : self._pos])
        if self._pos == len(buffer):
            buffer.clear()
            self._pos = 0
        return out
