"""The JSON API (``/api/v1/``): everything a button does, with the same permissions (issue #7, item 6).

Each part of the API lives in its own module; this one only mounts them.
"""

from __future__ import annotations

from django.urls import include, path

app_name = "api"

urlpatterns = [
    path("", include("dashboard.actions.api_reassign_urls")),
    path("", include("dashboard.actions.api_ops_urls")),
    path("", include("dashboard.actions.api_topic_urls")),
    path("", include("dashboard.actions.api_cluster_urls")),
]
