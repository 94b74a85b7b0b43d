"""Routes of the audit history: pages under ``/actions/`` and their JSON API under ``/api/v1/``.

Both lists are mounted by ``dashboard.urls``: ``urlpatterns`` in the ``audit`` namespace,
``api_urlpatterns`` in the ``api`` namespace beside the actions' (docs/api.md).
"""

from __future__ import annotations

from typing import Final

from django.urls import URLPattern, URLResolver, path

from dashboard.audit import api, views

app_name = "audit"

_CLUSTER = "clusters/<slug:name>/"
_PARTITION_HISTORY = _CLUSTER + "topics/<str:topic>/<int:partition>/history/"
_BROKER_HISTORY = _CLUSTER + "brokers/<int:broker>/history/"

HISTORIES: Final = (
    (_PARTITION_HISTORY, "partition-history", views.partition_history, api.partition_history),
    (_BROKER_HISTORY, "broker-history", views.broker_history, api.broker_history),
    (_CLUSTER + "failovers/", "failovers", views.failovers, api.failovers),
)
"""Each history's route, name, page and API view: the same path under ``/actions/`` and ``/api/v1/``."""

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.action_list, name="list"),
    path("<int:pk>/", views.action_detail, name="detail"),
    *(path(route, page, name=name) for route, name, page, _ in HISTORIES),
]

api_urlpatterns: list[URLPattern | URLResolver] = [
    path("actions/", api.action_list, name="action-list"),
    path("actions/<int:pk>/", api.action_detail, name="action-detail"),
    *(path(route, json, name=name) for route, name, _, json in HISTORIES),
]
