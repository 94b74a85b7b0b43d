from django.contrib import admin
from django.urls import include, path

from dashboard import views
from dashboard.health.views import healthz

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("accounts/", include("dashboard.accounts.urls")),
    path("clusters/", include("dashboard.clusters.urls")),
    path("analytics/", include("dashboard.analytics.urls")),
    path("actions/", include("dashboard.actions.urls")),
    path("api/v1/", include("dashboard.actions.api_urls")),
    path("admin/", admin.site.urls),
]
