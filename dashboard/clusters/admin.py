from django.contrib import admin

from dashboard.clusters.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "mode", "zookeeper_connect", "created")
    list_filter = ("mode",)
    search_fields = ("name", "zookeeper_connect", "description")
    readonly_fields = ("created",)
