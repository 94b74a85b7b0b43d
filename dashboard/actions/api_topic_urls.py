"""Topic admin JSON API routes (admin role; ``dashboard.actions.topic_admin``), mounted under ``/api/v1/``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import topic_admin

urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/<slug:name>/topics/", topic_admin.create_topic, name="topic-create"),
    path("clusters/<slug:name>/topics/<str:topic>/partitions/", topic_admin.add_partitions, name="topic-partitions"),
    path("clusters/<slug:name>/topics/<str:topic>/delete/", topic_admin.delete_topic, name="topic-delete"),
]
