"""Subprocesses of the tests that run the real stack: ``manage.py`` commands and server teardown."""

from __future__ import annotations

import sys
from typing import Final

from scripts.support.django_manage import manage
from workers.local_processes import terminate_all

__all__ = ["CELERY_WORKER", "manage", "terminate_all"]

#: ``celery worker`` of the project's app, as the tests start it (options follow).
CELERY_WORKER: Final = (sys.executable, "-m", "celery", "-A", "dashboard", "worker")
