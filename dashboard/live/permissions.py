"""Who may watch a cluster live: the viewer role and up (``dashboard.accounts.roles``, the one permission module).

The socket follows exactly the rule the pages follow (``roles.can_view``), so a page and its live
feed never disagree. The consumer asks again, with fresh rows, on every message the browser sends
and at most every ``RECHECK_S`` while it forwards server messages (``still_allowed``), so a user
deactivated, stripped of their role or a cluster removed loses the live view at the next message.
"""

from __future__ import annotations

from typing import Any, Final

from django.contrib.auth import get_user_model

from dashboard.accounts import roles
from dashboard.clusters.models import Cluster

RECHECK_S: Final = 5.0


def can_view_cluster(user: Any, cluster_name: str) -> bool:
    """Whether ``user`` may see ``cluster_name`` (runs database queries: call off the event loop)."""
    if not roles.can_view(user):
        return False
    return Cluster.objects.filter(name=cluster_name).exists()


def still_allowed(user: Any, cluster_name: str) -> bool:
    """Re-check with fresh rows: the user may have been deactivated since the socket opened."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    # A fresh row: ``scope["user"]`` was loaded at connect, and its cached groups may be stale.
    fresh = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    return fresh is not None and can_view_cluster(fresh, cluster_name)
