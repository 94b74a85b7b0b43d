"""WebSocket routes of the live dashboard."""

from __future__ import annotations

from django.urls import path

from dashboard.live.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/clusters/<slug:cluster>/live/", LiveConsumer.as_asgi(), name="live"),
]
