"""Impact preview, broker and failover history, cluster and user management (issue #7)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
