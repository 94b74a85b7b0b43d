"""The live WebSocket: a page subscribes to what it shows and gets a snapshot, then deltas.

``ws/clusters/<cluster>/live/`` sits behind ``AllowedHostsOriginValidator`` and
``AuthMiddlewareStack`` (``dashboard/asgi.py``). Anonymous sockets are closed with 4401, unknown
clusters or users without permission with 4403. Each subscription:

1. registers interest (so the mirror sends this scope's deltas at all; ``workers/mirror/deltas.py``),
2. joins the scope's group (names only from ``groups``),
3. reads the snapshot (counters and ``gen``/``seq`` in one Redis transaction) and sends it.

Deltas that arrive between 2 and 3 are forwarded too; the browser drops those already in the
snapshot by ``seq`` (protocol in ``dashboard/live/protocol.py``).

Permissions (issue #10): every message the browser sends is checked against fresh database rows
before it is acted on, so a user deactivated or stripped of the viewer role while the socket is
open gets the next message refused and the socket closed (4403); forwarded server messages are
re-checked at most every ``RECHECK_S`` (one check answers a user's sockets: ``verdicts``).
Inbound messages are bounded in size (``MAX_MESSAGE_BYTES``) and rate (``MAX_MESSAGES`` per
``MESSAGE_WINDOW_S``). Every refused or closed socket is audited (``REQUEST_REJECTED``).

A stalled feed (F19): the mirror sends every page a status each heartbeat (1 s), so a consumer that
hears nothing from the channel layer for ``FEED_STALL_S`` was not reading its channel (its process
paused or starved, its Redis connection gone), and a channel that is not read overflows and drops
the newest messages. The first message after such a gap therefore brings a fresh snapshot of every
subscription before it is forwarded: the page is right again at once, instead of after draining a
backlog of up to ``capacity`` stale messages and waiting for the next heartbeat's ``scope_seqs``.
A gap without loss (the mirror stopped) costs one extra snapshot per subscription.

Fan-out (issue #31): one web process holds many sockets, and every flush reaches each of them.
channels_redis already stores one copy per process in Redis and hands the same event dict to every
consumer of the process; the per-socket cost left is ours, kept small by two rules (``fanout``):
group events skip Channels' per-message ``close_old_connections`` hop (a round trip through the one
thread every consumer's sync calls share, queued behind the others: it dominated 100 viewers'
latency), and a browser message is JSON-encoded once per event, not once per socket.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

import redis
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from dashboard.audit.rejections import record_socket_rejection
from dashboard.clusters import layout
from dashboard.clusters.snapshot import ClusterSnapshot, get_redis
from dashboard.live import fanout, groups, permissions, verdicts
from dashboard.live.scopes import Scope, parse_scope

logger = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS: Final = 8
INTEREST_TTL_S: Final = 60.0
INTEREST_REFRESH_S: Final = 20.0
CLOSE_UNAUTHENTICATED: Final = 4401
CLOSE_FORBIDDEN: Final = 4403
CLOSE_TOO_BIG: Final = 4413
CLOSE_TOO_MANY: Final = 4429
MAX_MESSAGE_BYTES: Final = 4096
MAX_MESSAGES: Final = 60
MESSAGE_WINDOW_S: Final = 10.0
#: Silence from the channel layer after which a consumer assumes it may have lost messages
#: (one and a half of the mirror's 1 s heartbeats; see the module docstring).
FEED_STALL_S: Final = 1.5


class LiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """One browser tab's live connection to one cluster."""

    cluster_name: str
    subscriptions: dict[str, str]

    async def connect(self) -> None:
        self.cluster_name = str(self.scope["url_route"]["kwargs"]["cluster"])
        self.subscriptions = {}
        self._checked_at = 0.0
        self._interest_at = 0.0
        self._fed_at = time.monotonic()
        self._window_start = time.monotonic()
        self._window_count = 0
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._audit("anonymous socket: log in first", CLOSE_UNAUTHENTICATED)
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(permissions.can_view_cluster)(user, self.cluster_name):
            await self._audit(
                f"no viewer access to cluster {self.cluster_name!r} (or no such cluster)", CLOSE_FORBIDDEN
            )
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self._checked_at = time.monotonic()
        await self.channel_layer.group_add(groups.status(self.cluster_name), self.channel_name)
        await self.accept()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Group events go straight to their handler; the browser's own messages as Channels does."""
        if fanout.is_group_event(message):
            await getattr(self, fanout.handler_name(message))(message)
            return
        await super().dispatch(message)

    async def disconnect(self, code: int) -> None:
        if not hasattr(self, "subscriptions"):
            return
        for group in self.subscriptions.values():
            await self.channel_layer.group_discard(group, self.channel_name)
        if self.subscriptions:
            entries = [self._interest_entry(s) for s in self.subscriptions]
            await sync_to_async(self._drop_interest)(entries)
        await self.channel_layer.group_discard(groups.status(self.cluster_name), self.channel_name)

    # -- browser -> server ----------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Bound size and rate, re-check the user's rights on every message, then parse the JSON."""
        size = len(text_data.encode()) if text_data is not None else len(bytes_data or b"")
        if size > MAX_MESSAGE_BYTES:
            await self._refuse(f"message of {size} bytes is over the {MAX_MESSAGE_BYTES}-byte limit", CLOSE_TOO_BIG)
            return
        now = time.monotonic()
        if now - self._window_start > MESSAGE_WINDOW_S:
            self._window_start, self._window_count = now, 0
        self._window_count += 1
        if self._window_count > MAX_MESSAGES:
            await self._refuse(f"more than {MAX_MESSAGES} messages in {MESSAGE_WINDOW_S:g} s", CLOSE_TOO_MANY)
            return
        if not await self._recheck():
            return
        if text_data is None:
            await self._error("messages must be JSON text")
            return
        try:
            content = await self.decode_json(text_data)
        except ValueError:
            await self._error("messages must be JSON objects")
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self._error("messages must be JSON objects")
            return
        action = content.get("action")
        if action == "subscribe":
            try:
                scope = parse_scope(str(content.get("scope", "")))
            except ValueError as exc:
                await self._error(str(exc))
                return
            await self._subscribe(scope)
        elif action == "resync":
            for scope_text in list(self.subscriptions):
                await self._send_snapshot(parse_scope(scope_text))
        elif action == "unsubscribe":
            scope_text = str(content.get("scope", ""))
            group = self.subscriptions.pop(scope_text, None)
            if group is not None:
                await self.channel_layer.group_discard(group, self.channel_name)
        else:
            await self._error(f"unknown action {action!r} (use subscribe, unsubscribe or resync)")

    async def _subscribe(self, scope: Scope) -> None:
        key = str(scope)
        if key not in self.subscriptions:
            if len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
                await self._error(f"at most {MAX_SUBSCRIPTIONS} subscriptions per connection")
                return
            group = groups.for_scope(self.cluster_name, scope)
            await sync_to_async(self._add_interest)([self._interest_entry(key)])
            await self.channel_layer.group_add(group, self.channel_name)
            self.subscriptions[key] = group
        await self._send_snapshot(scope)

    async def _send_snapshot(self, scope: Scope) -> None:
        try:
            snap = await sync_to_async(self._read_snapshot)(scope)
        except redis.RedisError as exc:
            # Keep the socket: the page shows "stale" and asks again on the next resync notice.
            logger.warning("live snapshot of %s/%s unavailable: %s", self.cluster_name, scope, exc)
            await self._error(f"the snapshot is unavailable right now (Redis: {exc})")
            await self.send_json({"kind": "status", "status": {"present": False, "resync_pending": True}})
            return
        self._fed_at = time.monotonic()
        await self.send_json({"kind": "snapshot", "scope": str(scope), **snap})

    def _read_snapshot(self, scope: Scope) -> dict[str, Any]:
        return ClusterSnapshot(get_redis(), self.cluster_name).scope_snapshot(scope)

    async def _error(self, message: str) -> None:
        await self.send_json({"kind": "error", "error": message})

    # -- interest registry (which scopes the mirror must publish) --------------------------------
    def _interest_entry(self, scope: str) -> str:
        return f"{scope}|{self.channel_name}"

    def _add_interest(self, entries: list[str]) -> None:
        expiry = int((time.time() + INTEREST_TTL_S) * 1000)
        try:
            get_redis().zadd(layout.interest_key(self.cluster_name), dict.fromkeys(entries, expiry))
        except redis.RedisError as exc:  # the next status message tries again
            logger.warning("cannot register live interest for %s: %s", self.cluster_name, exc)
            return
        self._interest_at = time.monotonic()

    def _drop_interest(self, entries: list[str]) -> None:
        try:
            get_redis().zrem(layout.interest_key(self.cluster_name), *entries)
        except redis.RedisError as exc:  # entries expire on their own
            logger.warning("cannot drop live interest for %s: %s", self.cluster_name, exc)

    # -- permission re-checks ---------------------------------------------------------------------
    async def allowed(self) -> bool:
        """Re-check the user's right to view at most every ``RECHECK_S``; close the socket if gone."""
        if time.monotonic() - self._checked_at < permissions.RECHECK_S:
            return True
        ok = await verdicts.shared_recheck(self.scope.get("user"), self.cluster_name)
        self._checked_at = time.monotonic()
        if not ok:
            await self._refuse(f"access to cluster {self.cluster_name!r} was revoked", CLOSE_FORBIDDEN, False)
        return ok

    async def _recheck(self, explain: bool = True) -> bool:
        """Ask the database now; on a revoked right, audit it and close the socket (4403).

        ``explain``: answer the browser's message with the reason first (server pushes just close).
        """
        ok = await database_sync_to_async(permissions.still_allowed)(self.scope.get("user"), self.cluster_name)
        self._checked_at = time.monotonic()
        if not ok:
            await self._refuse(f"access to cluster {self.cluster_name!r} was revoked", CLOSE_FORBIDDEN, explain)
        return bool(ok)

    async def _refuse(self, reason: str, code: int, explain: bool = True) -> None:
        if explain:
            await self._error(reason)
        await self._audit(reason, code)
        await self.close(code=code)

    async def _audit(self, reason: str, code: int) -> None:
        path = str(self.scope.get("path", ""))
        await database_sync_to_async(record_socket_rejection)(self.scope.get("user"), path, reason, code)

    # -- group events (server -> browser) -------------------------------------------------------
    async def _after_stall(self) -> None:
        """Resend every subscription's snapshot if the channel layer was silent for ``FEED_STALL_S``."""
        now = time.monotonic()
        silent_s, self._fed_at = now - self._fed_at, now
        if silent_s > FEED_STALL_S and self.subscriptions:
            logger.info(
                "live feed of %s was silent for %.1f s: resending %d snapshot(s)",
                self.cluster_name,
                silent_s,
                len(self.subscriptions),
            )
            for scope_text in list(self.subscriptions):
                await self._send_snapshot(parse_scope(scope_text))

    async def live_delta(self, event: dict[str, Any]) -> None:
        if not await self.allowed():
            return
        await self._after_stall()
        if event.get("scope") not in self.subscriptions:
            return
        await self.send(text_data=fanout.delta_text(event))

    async def live_status(self, event: dict[str, Any]) -> None:
        if not await self.allowed():
            return
        await self._after_stall()
        if self.subscriptions and time.monotonic() - self._interest_at > INTEREST_REFRESH_S:
            await sync_to_async(self._add_interest)([self._interest_entry(s) for s in self.subscriptions])
        await self.send(text_data=fanout.status_text(event))

    async def live_resync(self, event: dict[str, Any]) -> None:
        if await self.allowed():
            await self._after_stall()
            await self.send_json({"kind": "resync", "gen": event.get("gen")})
