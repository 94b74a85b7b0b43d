"""The Django project: settings, URLs, ASGI app, the Celery app, and the web apps.

The Celery app is imported here (Celery's Django recipe) so that ``@shared_task`` everywhere binds
to it, in the web process and in workers alike.
"""

from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
