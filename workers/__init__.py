"""Celery-side code: the controller host, the mirror, action tasks and the analytics job.

May import ``dashboard`` and ``controller_core``; nothing imports it (tasks are sent by name).
"""
