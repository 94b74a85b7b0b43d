"""The analytics pipeline: state-change history in, availability and leadership metrics out.

``records`` states the input contract, ``transforms`` holds the pure DataFrame logic, ``job`` is the
entry point (``spark-submit workers/analytics/job.py`` or :func:`workers.analytics.job.run`),
``compaction`` turns closed days into Parquet, ``load`` copies results into the dashboard's tables,
``runner`` runs compaction, job and load for one recorded run, ``tasks`` wraps it for Celery, and
``generate`` writes synthetic histories for tests and the benchmark. Only ``load``, ``runner`` and
``tasks`` import Django, so the Spark side runs on a cluster without it.
"""
