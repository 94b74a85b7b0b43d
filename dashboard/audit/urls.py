"""Routes of the audit history: pages under ``/actions/`` and their JSON API under ``/api/v1/``.

Both lists are mounted by ``dashboard.urls``: ``urlpatterns`` in the ``audit`` namespace,
``api_urlpatterns`` in the ``api`` namespace beside the actions' (docs/api.md).
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.audit import api, views

app_name = "audit"

_CLUSTER = "clusters/<slug:name>/"
_PARTITION_HISTORY = _CLUSTER + "topics/<str:topic>/<int:partition>/history/"
_BROKER_HISTORY = _CLUSTER + "brokers/<int:broker>/history/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.action_list, name="list"),
    path("<int:pk>/", views.action_detail, name="detail"),
    path(_PARTITION_HISTORY, views.partition_history, name="partition-history"),
    path(_BROKER_HISTORY, views.broker_history, name="broker-history"),
    path(_CLUSTER + "failovers/", views.failovers, name="failovers"),
]

api_urlpatterns: list[URLPattern | URLResolver] = [
    path("actions/", api.action_list, name="action-list"),
    path("actions/<int:pk>/", api.action_detail, name="action-detail"),
    path(_PARTITION_HISTORY, api.partition_history, name="partition-history"),
    path(_BROKER_HISTORY, api.broker_history, name="broker-history"),
    path(_CLUSTER + "failovers/", api.failovers, name="failovers"),
]
