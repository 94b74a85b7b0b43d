"""The dashboard's routes: each app mounts its own pages; ``/api/v1/`` gathers the apps' JSON APIs and
``/actions/admin/`` their management pages (namespaces ``api`` and ``manage``)."""

from django.contrib import admin
from django.urls import include, path

from dashboard import views
from dashboard.accounts import urls as accounts_urls
from dashboard.actions import urls as actions_urls
from dashboard.audit import urls as audit_urls
from dashboard.clusters import urls as clusters_urls
from dashboard.health.views import healthz

api_v1 = [*actions_urls.api_urlpatterns, *audit_urls.api_urlpatterns, *clusters_urls.api_urlpatterns]
manage = [*clusters_urls.admin_urlpatterns, *accounts_urls.admin_urlpatterns]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("accounts/", include("dashboard.accounts.urls")),
    path("clusters/", include("dashboard.clusters.urls")),
    path("analytics/", include("dashboard.analytics.urls")),
    path("actions/", include("dashboard.audit.urls")),
    path("actions/admin/", include((manage, "manage"))),
    path("actions/", include("dashboard.actions.urls")),
    path("api/v1/", include((api_v1, "api"))),
    path("admin/", admin.site.urls),
]
