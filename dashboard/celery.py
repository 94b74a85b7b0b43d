"""The Celery app shared by the web process (which sends tasks by name) and the workers.

Configuration comes from Django settings under the ``CELERY_`` namespace; tasks are discovered in
installed apps (``workers`` among them), so the web process never imports ``workers`` itself.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
