"""WebSocket routes: the live dashboard's consumers (``dashboard/live``) and a reassignment's
progress (``dashboard/actions``)."""

from __future__ import annotations

from typing import Any

from dashboard.actions.routing import websocket_urlpatterns as actions_patterns
from dashboard.live.routing import websocket_urlpatterns as live_patterns

websocket_urlpatterns: list[Any] = [*live_patterns, *actions_patterns]
