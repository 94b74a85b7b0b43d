"""Routes of the cluster pages (``/clusters/``), plus the registry's management pages
(``admin_urlpatterns``, ``/actions/admin/``, ``manage`` namespace) and its JSON API (``api_urlpatterns``,
``/api/v1/``), both mounted by ``dashboard.urls``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.clusters import api
from dashboard.clusters.views import admin, agent, diagrams, hosting, metrics, pages

app_name = "clusters"

urlpatterns = [
    path("", pages.cluster_list, name="list"),
    path("<slug:name>/", pages.overview, name="overview"),
    path("<slug:name>/metrics", metrics.metrics, name="metrics"),
    path("<slug:name>/brokers/", pages.broker_list, name="brokers"),
    path("<slug:name>/brokers/<int:broker>/", pages.broker_detail, name="broker"),
    path("<slug:name>/brokers/<int:broker>/agent.json", agent.broker_agent, name="broker-agent"),
    path("<slug:name>/brokers/<int:broker>/diagram/", diagrams.broker_diagram, name="broker-diagram"),
    path("<slug:name>/topics/", pages.topic_list, name="topics"),
    path("<slug:name>/topics.json", pages.topic_list_rows, name="topics-rows"),
    path("<slug:name>/topics/<str:topic>/", pages.topic_detail, name="topic"),
    path("<slug:name>/topics/<str:topic>/rows.json", pages.topic_rows, name="topic-rows"),
    path("<slug:name>/topics/<str:topic>/diagram/", diagrams.topic_diagram, name="topic-diagram"),
    path("<slug:name>/topics/<str:topic>/<int:partition>/", pages.partition_detail, name="partition"),
    path("<slug:name>/diagram/", diagrams.cluster_diagram, name="diagram"),
    path("<slug:name>/members.json", diagrams.members, name="members"),
]

admin_urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/", admin.cluster_list, name="clusters"),
    path("clusters/new/", admin.cluster_edit, name="cluster-new"),
    path("clusters/<slug:name>/", admin.cluster_edit, name="cluster-edit"),
    path("clusters/<slug:name>/remove/", admin.cluster_remove, name="cluster-remove"),
    path("hosting/", hosting.hosting_page, name="hosting"),
]

api_urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/", api.cluster_collection, name="clusters"),
    path("clusters/<slug:name>/", api.cluster_item, name="cluster"),
    path("clusters/<slug:name>/remove/", api.cluster_remove, name="cluster-remove"),
]
