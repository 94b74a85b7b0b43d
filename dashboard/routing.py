"""WebSocket routes: the live dashboard's consumers (``dashboard/live``)."""

from __future__ import annotations

from typing import Any

from dashboard.live.routing import websocket_urlpatterns as live_patterns

websocket_urlpatterns: list[Any] = [*live_patterns]
