from __future__ import annotations

from django.urls import include, path

from dashboard.actions import views

app_name = "actions"

urlpatterns = [
    path("", views.action_list, name="list"),
    path("<int:pk>/", views.action_detail, name="detail"),
    path(
        "clusters/<slug:name>/topics/<str:topic>/<int:partition>/history/",
        views.partition_history,
        name="partition-history",
    ),
    path("clusters/<slug:name>/preferred-election/", views.preferred_election, name="preferred-election"),
    path("", include("dashboard.actions.reassign_urls")),
    path("", include("dashboard.actions.ops_urls")),
]
