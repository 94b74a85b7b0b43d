"""Reassignment pages: generate, edit, validate, execute, progress, cancel (issue #7, item 3)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from dashboard.actions import reassign_views

urlpatterns: list[URLPattern | URLResolver] = [
    path("clusters/<slug:name>/reassign/", reassign_views.reassign, name="reassign"),
    path("clusters/<slug:name>/reassign/<int:pk>/", reassign_views.progress_page, name="reassign-progress"),
    path("clusters/<slug:name>/reassign/<int:pk>/cancel/", reassign_views.cancel, name="reassign-cancel"),
    path("clusters/<slug:name>/reassign/<int:pk>/throttle/", reassign_views.throttle, name="reassign-throttle"),
]
