from django.contrib import admin

from dashboard.clusters.forms import ClusterRegistrationForm
from dashboard.clusters.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = ClusterRegistrationForm  # the same checks as the dashboard's pages and API
    list_display = ("name", "mode", "zookeeper_connect", "created")
    list_filter = ("mode",)
    search_fields = ("name", "zookeeper_connect", "description")
    readonly_fields = ("created",)
