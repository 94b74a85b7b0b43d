"""The audit history: what operators did and what the controllers changed, kept, shown and pruned.

* ``models``: ``Action`` (every operator action, rejected attempt and (failed) login, append-only),
  ``StateChange`` (the controllers' state-change stream, stored once each) and ``IngestCursor``.
* Pages (``views``, ``urls``): ``/actions/`` (filters, pagination, ``?format=csv``), ``/actions/<id>/``,
  a partition's and a broker's history and the controller failovers; ``api`` answers them as JSON
  under ``/api/v1/``; ``listing`` pages, filters and exports them.
* Recording: ``signals`` (logins, cluster, user and role changes), ``rejections`` (requests the
  hardening layer refused). The state-change ingest runs in the workers (``workers.audit``).
* Retention: ``retention.cleanup_audit`` (daily, ``workers.retention.cleanup``; ``manage.py audit_retention``).
"""
