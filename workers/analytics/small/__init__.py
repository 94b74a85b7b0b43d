"""The analytics job for tiny increments, in plain Python: beat's cursor runs without Spark.

Why a second engine: a cursor run over a few minutes of a cluster's log holds tens or hundreds of
records, yet Spark costs it about 20 jobs' latency (10-20 s of a warm server, docs/analytics.md,
"What bounds it"). Below :data:`workers.analytics.inputs.JobConfig.python_max_records` records this
package computes the same result tables and the same saved state as ``job.py`` does, row for row,
with the Spark semantics the job relies on (SQL's three-valued logic, null ordering, ``floor``
types, ``min_by``/``max_by``), and writes them where ``load`` and the next run read them.

One module a step, mirroring the Spark modules: ``events`` (read and project, ``transforms.prepare_events``),
``walk`` (the per-partition walk, intervals and estimated starts), ``tables`` (``metrics`` and
``actions``), ``state`` (the saved state, read and written) and ``engine`` (the wiring).
``tests/integration/test_analytics_small.py`` checks every table and state part against Spark's
on random cuts of the hand-computed history and of the demo cluster's.
"""
