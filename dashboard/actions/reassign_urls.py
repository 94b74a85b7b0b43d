"""Reassignment pages: generate, edit, validate, execute, progress, cancel (issue #7, item 3)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
