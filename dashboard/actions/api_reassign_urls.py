"""JSON API routes; mounted under ``/api/v1/`` by ``dashboard.actions.api_urls`` (docs/api.md, "Reassignment")."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import reassign_api

_BASE = "clusters/<slug:name>/reassignments/"

urlpatterns: list[URLPattern | URLResolver] = [
    path(_BASE + "generate", reassign_api.generate_view, name="reassign-generate"),
    path(_BASE + "validate", reassign_api.validate_view, name="reassign-validate"),
    path(_BASE + "execute", reassign_api.execute_view, name="reassign-execute"),
    path(_BASE + "<int:pk>/cancel", reassign_api.cancel_view, name="reassign-cancel"),
    path(_BASE + "<int:pk>/progress", reassign_api.progress_view, name="reassign-progress"),
    path(_BASE + "<int:pk>/throttle", reassign_api.throttle_view, name="reassign-throttle"),
]
