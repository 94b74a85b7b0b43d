"""JSON API routes; mounted under ``/api/v1/`` by ``dashboard.actions.api_urls`` (docs/api.md)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import api_ops

urlpatterns: list[URLPattern | URLResolver] = [
    path(
        "clusters/<slug:name>/preferred-election/preview/", api_ops.election_preview, name="preferred-election-preview"
    ),
    path("clusters/<slug:name>/preferred-election/", api_ops.election_execute, name="preferred-election"),
    path("clusters/<slug:name>/impact/", api_ops.impact, name="impact"),
    path("clusters/<slug:name>/brokers/<int:broker>/history/", api_ops.broker_history, name="broker-history"),
    path("clusters/<slug:name>/failovers/", api_ops.failovers, name="failovers"),
    path(
        "clusters/<slug:name>/topics/<str:topic>/<int:partition>/history/",
        api_ops.partition_history,
        name="partition-history",
    ),
    path("actions/", api_ops.action_list, name="action-list"),
    path("actions/<int:pk>/", api_ops.action_detail, name="action-detail"),
]
