"""The audit retention cleanup task (issue #7, item 4)."""

from __future__ import annotations
