"""Who may watch a cluster live: viewers and up (``dashboard.actions.roles``, the one permission module).

Today any active, logged-in user may view every cluster (DESIGN §6: "viewers read"); the consumer
asks again while the socket stays open (``still_allowed``), so deactivating a user or deleting a
cluster cuts their live view within ``RECHECK_S`` seconds, not at their next page load.
"""

from __future__ import annotations

from typing import Any, Final

from django.contrib.auth import get_user_model

from dashboard.actions import roles
from dashboard.clusters.models import Cluster

RECHECK_S: Final = 30.0


def can_view_cluster(user: Any, cluster_name: str) -> bool:
    """Whether ``user`` may see ``cluster_name`` (runs database queries: call off the event loop)."""
    if not roles.can_view(user):
        return False
    return Cluster.objects.filter(name=cluster_name).exists()


def still_allowed(user: Any, cluster_name: str) -> bool:
    """Re-check with fresh rows: the user may have been deactivated since the socket opened."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    fresh = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    return fresh is not None and can_view_cluster(fresh, cluster_name)
