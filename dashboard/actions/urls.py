"""Routes of the operator actions: pages under ``/actions/`` and their JSON API under ``/api/v1/``.

Both lists are mounted by ``dashboard.urls``: ``urlpatterns`` in the ``actions`` namespace,
``api_urlpatterns`` in the ``api`` namespace beside the audit's (docs/api.md).
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import (
    api_ops,
    impact_views,
    reassign_api,
    reassign_views,
    topic_admin,
    views,
)

app_name = "actions"

_CLUSTER = "clusters/<slug:name>/"
_REASSIGNMENTS = _CLUSTER + "reassignments/"

urlpatterns: list[URLPattern | URLResolver] = [
    path(_CLUSTER + "preferred-election/", views.preferred_election, name="preferred-election"),
    path(_CLUSTER + "reassign/", reassign_views.reassign, name="reassign"),
    path(_CLUSTER + "reassign/<int:pk>/", reassign_views.progress_page, name="reassign-progress"),
    path(_CLUSTER + "reassign/<int:pk>/cancel/", reassign_views.cancel, name="reassign-cancel"),
    path(_CLUSTER + "reassign/<int:pk>/throttle/", reassign_views.throttle, name="reassign-throttle"),
    path(_CLUSTER + "impact/", impact_views.impact_page, name="impact"),
]

api_urlpatterns: list[URLPattern | URLResolver] = [
    path(_REASSIGNMENTS + "generate", reassign_api.generate_view, name="reassign-generate"),
    path(_REASSIGNMENTS + "validate", reassign_api.validate_view, name="reassign-validate"),
    path(_REASSIGNMENTS + "execute", reassign_api.execute_view, name="reassign-execute"),
    path(_REASSIGNMENTS + "<int:pk>/cancel", reassign_api.cancel_view, name="reassign-cancel"),
    path(_REASSIGNMENTS + "<int:pk>/progress", reassign_api.progress_view, name="reassign-progress"),
    path(_REASSIGNMENTS + "<int:pk>/throttle", reassign_api.throttle_view, name="reassign-throttle"),
    path(_CLUSTER + "preferred-election/preview/", api_ops.election_preview, name="preferred-election-preview"),
    path(_CLUSTER + "preferred-election/", api_ops.election_execute, name="preferred-election"),
    path(_CLUSTER + "impact/", api_ops.impact, name="impact"),
    path(_CLUSTER + "topics/", topic_admin.create_topic, name="topic-create"),
    path(_CLUSTER + "topics/<str:topic>/partitions/", topic_admin.add_partitions, name="topic-partitions"),
    path(_CLUSTER + "topics/<str:topic>/delete/", topic_admin.delete_topic, name="topic-delete"),
]
