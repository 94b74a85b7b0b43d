"""The Celery app shared by the web process (which sends tasks by name) and the workers.

Configuration comes from Django settings under the ``CELERY_`` namespace. Tasks are found by
Celery's own autodiscovery when a worker starts: ``tasks`` of every installed app (``workers.tasks``)
and the worker modules named for what their tasks do (``TASK_MODULES``), each task named after the
module that defines it (``workers.audit.ingest_state_changes`` is defined in ``workers.audit``). The
packages are named as strings, so the web process never imports ``workers`` itself.
"""

from __future__ import annotations

import os
from typing import Final

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

TASK_MODULES: Final = {
    "workers": ("actions", "audit", "catchup_election", "reassign", "retention"),
    "workers.analytics": ("tasks",),
}
"""Package -> modules holding tasks besides the installed apps' ``tasks``."""

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
for package, modules in TASK_MODULES.items():
    for module in modules:
        app.autodiscover_tasks([package], related_name=module)
