"""Kafka's ZooKeeper-era controller, re-implemented as a plain Python library.

No Django, Celery, Channels or Redis here (``lint-imports`` enforces it): the controller runs the
same under ``manage.py run_controller``, inside a Celery worker, or in a benchmark.
"""
