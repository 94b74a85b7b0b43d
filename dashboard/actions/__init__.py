"""Operator actions and the audit history (issue #7).

* ``roles``: viewer / operator / admin as Django groups (created by migration 0002 and
  ``manage.py ensure_roles``); the one permission module, also used by ``dashboard.live.permissions``.
* Preferred leader election: ``/actions/clusters/<name>/preferred-election/`` previews from ZooKeeper
  (``election.read_plan``, the controller's own election rule), takes a reason, and on POST records an
  ``Action`` and sends ``workers.actions.preferred_election`` by name; ``?format=json`` on the preview.
* Audit: ``Action`` rows for every action, every rejected attempt and every (failed) login;
  ``/actions/`` (filters, pagination, ``?format=csv``), ``/actions/<id>/`` (``?format=json``).
* State changes: ``workers.actions.ingest_state_changes`` copies ``kcp:{cluster}:state-changes`` into
  ``StateChange`` exactly once; ``/actions/clusters/<name>/topics/<t>/<p>/history/`` and the
  ``partition_history`` block of the partition page show them.
"""
