"""JSON API routes; mounted under ``/api/v1/`` by ``dashboard.actions.api_urls``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
