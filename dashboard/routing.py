"""WebSocket routes (filled by the live dashboard)."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
