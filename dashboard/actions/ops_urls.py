"""Impact preview, broker and failover history, cluster and user management (issue #7)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import admin_pages, history_views, impact_views
from dashboard.clusters.views import hosting

urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/<slug:name>/impact/", impact_views.impact_page, name="impact"),
    path("clusters/<slug:name>/brokers/<int:broker>/history/", history_views.broker_history, name="broker-history"),
    path("clusters/<slug:name>/failovers/", history_views.failovers, name="failovers"),
    path("admin/clusters/", admin_pages.cluster_list, name="admin-clusters"),
    path("admin/clusters/new/", admin_pages.cluster_edit, name="admin-cluster-new"),
    path("admin/clusters/<slug:name>/", admin_pages.cluster_edit, name="admin-cluster-edit"),
    path("admin/clusters/<slug:name>/remove/", admin_pages.cluster_remove, name="admin-cluster-remove"),
    path("admin/hosting/", hosting.hosting_page, name="admin-hosting"),
    path("admin/users/", admin_pages.user_list, name="admin-users"),
    path("admin/users/<int:pk>/", admin_pages.user_edit, name="admin-user-edit"),
]
