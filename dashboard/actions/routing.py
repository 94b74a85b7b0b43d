"""WebSocket routes of the actions app: a reassignment's progress page (``reassign_consumer``)."""

from __future__ import annotations

from django.urls import path

from dashboard.actions.reassign_consumer import ReassignProgressConsumer

websocket_urlpatterns = [
    path(
        "ws/clusters/<slug:cluster>/reassignments/<int:pk>/progress/",
        ReassignProgressConsumer.as_asgi(),
        name="reassign-progress",
    ),
]
