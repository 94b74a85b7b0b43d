"""Celery tasks that execute and cancel partition reassignments (issue #7, item 3)."""

from __future__ import annotations
