"""The progress page's WebSocket: a reassignment's progress pushed as it is measured (issue #29).

``ws/clusters/<cluster>/reassignments/<id>/progress/`` sits behind the same origin check and session
authentication as the live pages (``dashboard/asgi.py``) and follows the same rule as the progress
page (``roles.can_view``): anonymous sockets are closed with 4401; users without the viewer role,
unknown clusters and actions that are not a reassignment of that cluster with 4403. Every refused
or closed socket is audited (``REQUEST_REJECTED``), and the right to view is re-checked with fresh
rows at most every ``permissions.RECHECK_S`` while messages are forwarded.

On connect the page gets the last stored document (the database only: the consumer never reads
ZooKeeper), then every document the worker side pushes (``reassign_push``)::

    <- {"kind": "progress", "document": {...}}     the whole document (status, progress, throttle)
    <- {"kind": "changed"}                          too big to push: fetch it over HTTP once

The socket only pushes: a message from the browser closes it (4400).
"""

from __future__ import annotations

import time
from typing import Any, Final

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from dashboard.actions import reassign_push
from dashboard.audit.models import Action
from dashboard.audit.rejections import record_socket_rejection
from dashboard.clusters.models import Cluster
from dashboard.live import permissions

CLOSE_UNAUTHENTICATED: Final = 4401
CLOSE_FORBIDDEN: Final = 4403
CLOSE_PUSH_ONLY: Final = 4400


def _initial(user: Any, cluster_name: str, action_id: int) -> tuple[str, dict[str, Any] | None]:
    """``("", document)`` when ``user`` may watch this reassignment, else ``(reason, None)``."""
    if not permissions.can_view_cluster(user, cluster_name):
        return f"no viewer access to cluster {cluster_name!r} (or no such cluster)", None
    action = Action.objects.filter(pk=action_id, cluster=cluster_name, kind=Action.Kind.REASSIGNMENT).first()
    if action is None:
        return f"no reassignment #{action_id} on cluster {cluster_name!r}", None
    cluster = Cluster.objects.get(name=cluster_name)
    from dashboard.actions.reassign_service import cancel_unavailable

    return "", reassign_push.document(action, None, cancel_unavailable(cluster))


class ReassignProgressConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """One progress page's connection to one reassignment."""

    cluster_name: str
    action_id: int
    group: str = ""

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        self.cluster_name = str(kwargs["cluster"])
        self.action_id = int(kwargs["pk"])
        self._checked_at = 0.0
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._refuse("anonymous socket: log in first", CLOSE_UNAUTHENTICATED)
            return
        reason, doc = await database_sync_to_async(_initial)(user, self.cluster_name, self.action_id)
        if doc is None:
            await self._refuse(reason, CLOSE_FORBIDDEN)
            return
        self._checked_at = time.monotonic()
        self.group = reassign_push.group(self.cluster_name, self.action_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"kind": "progress", "document": doc})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        await self._refuse("this socket only pushes progress: the browser sends nothing", CLOSE_PUSH_ONLY)

    async def reassign_progress(self, event: dict[str, Any]) -> None:
        """A document pushed by the worker side (``reassign_push.EVENT``)."""
        if time.monotonic() - self._checked_at >= permissions.RECHECK_S:
            user = self.scope.get("user")
            ok = await database_sync_to_async(permissions.still_allowed)(user, self.cluster_name)
            self._checked_at = time.monotonic()
            if not ok:
                await self._refuse(f"access to cluster {self.cluster_name!r} was revoked", CLOSE_FORBIDDEN)
                return
        if event.get("changed"):
            await self.send_json({"kind": "changed"})
        else:
            await self.send_json({"kind": "progress", "document": event.get("document") or {}})

    async def _refuse(self, reason: str, code: int) -> None:
        path = str(self.scope.get("path", ""))
        await database_sync_to_async(record_socket_rejection)(self.scope.get("user"), path, reason, code)
        await self.close(code=code)
