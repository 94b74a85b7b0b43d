"""Deliver group messages to Channels from the mirror's (synchronous) thread.

Why a loop thread of our own rather than ``async_to_sync(group_send)`` per flush: ``async_to_sync``
from a plain thread runs each call on a fresh event loop, and channels_redis keeps its connection
pool per loop, so every flush would reconnect to Redis. One long-lived loop keeps the pool warm;
the call is the same ``channel_layer.group_send``. Delivery is best effort by design (channel layers
drop over capacity): the browser detects gaps from sequence numbers and resyncs.

A gap shows only when a later delta of the same scope arrives, so a lost *last* delta would leave
a page wrong until the scope changes again, possibly forever (F19 found it). ``ScopeSeqs`` closes
that: every heartbeat status carries, per scope, the ``seq`` of the last delta sent to it, and a
page holding less knows it missed something and asks for a snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from dashboard.live import protocol

logger = logging.getLogger(__name__)

Message = tuple[str, dict[str, Any]]


class ScopeSeqs:
    """The ``seq`` of the last delta sent to each scope (current generation), stamped on statuses.

    Example::

        seqs = ScopeSeqs()
        messages = seqs.stamp([("kcp.demo.t.x", {"type": "live.delta", "scope": "topic:x", "gen": "g", "seq": 7, ...}),
                               ("kcp.demo.status", {"type": "live.status", "status": {"gen": "g", ...}})])
        # the status now has "scope_seqs": {"topic:x": 7}

    Bounded (``max_scopes``, least recently sent first out): a scope nobody watches gets no deltas.
    """

    def __init__(self, max_scopes: int = 2_000) -> None:
        self._last: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._max = max_scopes

    def stamp(self, messages: Sequence[Message]) -> list[Message]:
        out: list[Message] = []
        for group, original in messages:
            message = original
            kind = message.get("type")
            if kind == protocol.DELTA and isinstance(message.get("seq"), int):
                scope = str(message.get("scope"))
                self._last[scope] = (str(message.get("gen")), int(message["seq"]))
                self._last.move_to_end(scope)
                while len(self._last) > self._max:
                    self._last.popitem(last=False)
            elif kind == protocol.STATUS and isinstance(message.get("status"), dict):
                gen = message["status"].get("gen")
                seqs = {scope: seq for scope, (g, seq) in self._last.items() if g == gen}
                message = {**message, "status": {**message["status"], "scope_seqs": seqs}}
            out.append((group, message))
        return out


class Publisher(Protocol):
    def publish(self, messages: Sequence[Message]) -> None: ...

    def close(self) -> None: ...


class ChannelLayerPublisher:
    """Send messages with ``channel_layer.group_send`` from one background event loop.

    Example::

        publisher = ChannelLayerPublisher(get_channel_layer())
        publisher.publish([("kcp.demo.c", {"type": "live.delta", ...})])
        publisher.close()
    """

    def __init__(self, layer: Any, timeout: float = 5.0) -> None:
        if layer is None:
            raise ValueError("no channel layer configured (settings.CHANNEL_LAYERS)")
        self._layer = layer
        self._timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mirror-publisher", daemon=True)
        self._thread.start()
        self.failures = 0
        self._seqs = ScopeSeqs()

    async def _send_all(self, messages: Sequence[Message]) -> None:
        for group, message in messages:
            await self._layer.group_send(group, message)

    def publish(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        future = asyncio.run_coroutine_threadsafe(self._send_all(self._seqs.stamp(messages)), self._loop)
        try:
            future.result(self._timeout)
        except FutureTimeout:
            future.cancel()
            self.failures += 1
            logger.warning("group_send of %d messages timed out; viewers will resync on the gap", len(messages))
        except Exception as exc:
            self.failures += 1
            logger.warning("group_send failed (%s); viewers will resync on the gap", exc)

    def close(self) -> None:
        async def _flush_layer() -> None:
            closer = getattr(self._layer, "close_pools", None)
            if closer is not None:
                await closer()

        try:
            asyncio.run_coroutine_threadsafe(_flush_layer(), self._loop).result(2.0)
        except Exception:
            logger.debug("closing channel layer pools failed", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=2.0)


class RecordingPublisher:
    """Keeps every message (tests, dry runs)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def publish(self, messages: Sequence[Message]) -> None:
        self.messages.extend(messages)

    def close(self) -> None:
        return None
