"""Cluster registry routes of the JSON API; mounted under ``/api/v1/`` (docs/api.md "Clusters")."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import api_clusters

urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/", api_clusters.cluster_collection, name="clusters"),
    path("clusters/<slug:name>/", api_clusters.cluster_item, name="cluster"),
    path("clusters/<slug:name>/remove/", api_clusters.cluster_remove, name="cluster-remove"),
]
