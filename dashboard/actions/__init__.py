"""Operator actions on a cluster: preferred leader elections, partition reassignments, impact previews,
topic and cluster administration, and their JSON API (``urls.api_urlpatterns``, docs/api.md).

* Preferred leader election: ``/actions/clusters/<name>/preferred-election/`` previews from ZooKeeper
  (``election.read_plan``, the controller's own election rule), takes a reason, and on POST records an
  ``Action`` (``dashboard.audit.models``) and sends ``workers.actions.preferred_election`` by name.
* Reassignment: ``reassign_*`` (generate, validate, execute, progress, cancel; ``workers.reassign``).
* Who may do what is ``dashboard.accounts.roles``; every action is an audit row (``dashboard.audit``).
"""
