from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from dashboard.analytics.models import AnalyticsRun


@admin.register(AnalyticsRun)
class AnalyticsRunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Runs are written by the pipeline; the admin is for looking, not editing."""

    list_display = ("pk", "status", "trigger", "since", "until", "clusters", "created_at", "duration_s")
    list_filter = ("status", "trigger")
    readonly_fields = [f.name for f in AnalyticsRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
