"""An asyncio TCP fault proxy: one listener per (candidate, ZooKeeper server), faults without root.

Why its own proxy: toxiproxy's server is not installable here and ``iptables``/``tc`` need root. Each
controller candidate reaches ZooKeeper only through its own proxies, so one candidate can be cut off
alone while the others, the brokers and the test keep talking to ZooKeeper directly.

Modes (``FaultProxy.set_mode``), applied at once to open connections and to new ones:

* ``pass``: forward both ways.
* ``blackhole``: keep the sockets open but move no bytes, as a partition does to TCP: nothing is
  read (so nothing is lost: TCP would retransmit), the client sees silence, kazoo goes SUSPENDED
  and, if it lasts past the session timeout, the server expires the session. New connections are
  accepted and left hanging. Back to ``pass``, held bytes flow again.
* ``drop_s2c`` / ``drop_c2s``: the same, one way only (requests arrive, replies do not, or back).
* ``reset``: every open connection is reset (RST, ``SO_LINGER`` 0) and new ones are reset on accept.
  No held byte moves while the mode is ``reset``: a reply held by ``drop_s2c`` is lost with its
  connection, never delivered in the moment between the mode switch and the reset.
* ``delay``: every chunk is held ``delay_ms`` before it is forwarded, order kept per direction.

The control API is in-process (``set_mode``), thread-safe; ``ProxyGroup`` manages several proxies
for one candidate. The proxy runs its own event loop on a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass

MODES = ("pass", "blackhole", "drop_s2c", "drop_c2s", "reset", "delay")
_POLL_S = 0.01


@dataclass
class ProxyStats:
    accepted: int = 0
    resets: int = 0
    bytes_c2s: int = 0
    bytes_s2c: int = 0


class FaultProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port`` with switchable faults.

    Example::

        proxy = FaultProxy("127.0.0.1", 2181)
        proxy.start()                      # proxy.port is the port to connect to
        proxy.set_mode("blackhole")
        proxy.set_mode("delay", delay_ms=200)
        proxy.set_mode("pass")
        proxy.stop()
    """

    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = port
        self.mode = "pass"
        self.delay_ms = 0
        self.stats = ProxyStats()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"faultproxy-{target_port}", daemon=True)
        self._server: asyncio.Server | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()

    # -- control (any thread) -----------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        return self

    def set_mode(self, mode: str, *, delay_ms: int = 0) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown fault proxy mode {mode!r}; expected one of {', '.join(MODES)}")
        if mode == "delay" and delay_ms <= 0:
            raise ValueError("delay mode needs delay_ms > 0")
        self.delay_ms = delay_ms if mode == "delay" else 0
        self.mode = mode
        if mode == "reset":
            asyncio.run_coroutine_threadsafe(self._reset_all(), self._loop).result(timeout=10)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self._loop.close()

    # -- the loop ------------------------------------------------------------------------------
    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.listen_host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._reset_all()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _reset_all(self) -> None:
        for client, upstream in list(self._conns):
            _rst(client)
            if upstream is not None:
                _rst(upstream)
            self.stats.resets += 1
        self._conns.clear()

    def _stalled(self, direction: str) -> bool:
        # ``reset`` stalls too: set_mode sets the mode before the loop runs _reset_all, and a pipe
        # polling its gate in between would otherwise forward the bytes a drop mode was holding.
        mode = self.mode
        return mode in ("blackhole", "reset", f"drop_{direction}")

    async def _gate(self, direction: str) -> None:
        while self._stalled(direction):
            await asyncio.sleep(_POLL_S)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # cancelled on stop(): end quietly
            await self._serve(reader, writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.accepted += 1
        if self.mode == "reset":
            _rst(writer)
            self.stats.resets += 1
            return
        entry: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (writer, None)
        self._conns.add(entry)
        try:
            while self.mode == "blackhole":  # a partition: the connection hangs, nothing reaches ZooKeeper
                await asyncio.sleep(_POLL_S)
            if entry not in self._conns:
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _rst(writer)
                return
            self._conns.discard(entry)
            entry = (writer, up_writer)
            self._conns.add(entry)
            await asyncio.gather(
                self._pipe(reader, up_writer, "c2s"), self._pipe(up_reader, writer, "s2c"), return_exceptions=True
            )
        finally:
            self._conns.discard(entry)
            for w in entry:
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
        try:
            while True:
                await self._gate(direction)
                data = await reader.read(65536)
                if not data:
                    break
                await self._gate(direction)
                if self.delay_ms:
                    await asyncio.sleep(self.delay_ms / 1000)
                writer.write(data)
                await writer.drain()
                if direction == "c2s":
                    self.stats.bytes_c2s += len(data)
                else:
                    self.stats.bytes_s2c += len(data)
        finally:
            with contextlib.suppress(Exception):
                if writer.can_write_eof():
                    writer.write_eof()


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset rather than a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport = writer.transport
    with contextlib.suppress(Exception):
        transport.abort()


class ProxyGroup:
    """One proxy per ZooKeeper server for one candidate, switched together."""

    def __init__(self, targets: Iterable[tuple[str, int]]) -> None:
        self.proxies = [FaultProxy(host, port).start() for host, port in targets]

    @property
    def hosts(self) -> str:
        """The connect string's host list (``127.0.0.1:p1,127.0.0.1:p2``)."""
        return ",".join(f"127.0.0.1:{p.port}" for p in self.proxies)

    def set_mode(self, mode: str, *, delay_ms: int = 0) -> None:
        for proxy in self.proxies:
            proxy.set_mode(mode, delay_ms=delay_ms)

    def stop(self) -> None:
        for proxy in self.proxies:
            proxy.stop()
