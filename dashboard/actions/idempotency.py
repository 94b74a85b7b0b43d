"""One keyed submission per user at a time, so the first action with an idempotency key is the one that acts.

Why: a submission creates its action and then looks for an earlier one with the same key (create,
then check: the lowest id wins and later copies are recorded as rejected duplicates). That is only
right when ids are handed out in commit order. SQLite guarantees it (one writer at a time: an id is
taken and committed under the database's write lock). PostgreSQL does not: an id comes from a
sequence when the INSERT runs, and commits can land in another order. Request A takes id 10, request
B takes id 11 and commits first; B's check cannot see A's uncommitted row and B acts; then A
commits, finds itself the lowest id and acts too: the same request twice. Inside a request-wide
transaction (``ATOMIC_REQUESTS``) the window is the whole request.

The fix: the create and the check run in one transaction that first locks the user's row
(``SELECT ... FOR UPDATE``), so a user's keyed submissions are serialized and the second one's
check sees the first one's committed row. Other users are not held up. Only where the database has
row locks (PostgreSQL); on SQLite the write lock already gives the order.

``first_with_key`` and ``create_first`` are that create-then-check, shared by every keyed submission
(preferred elections, reassignments, their cancels).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from dashboard.audit.models import Action

#: The error of an action refused because a concurrent request with the same key got there first.
DUPLICATE: Final = "duplicate of action"


@contextlib.contextmanager
def serialized_for(user: Any, key: str) -> Iterator[None]:
    """Run a create-then-check of ``user``'s submission with ``key`` as one transaction, one at a time."""
    if not key or not getattr(user, "is_authenticated", False) or not connection.features.has_select_for_update:
        yield
        return
    with transaction.atomic():
        # The model from settings, not type(user): a request's user is a lazy proxy.
        users = get_user_model()._default_manager
        list(users.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
        yield


def first_with_key(user: Any, key: str, kind: str) -> Action | None:
    """The first action of ``kind`` this user submitted with ``key``, even a rejected one (a retry gets
    the first answer), never a row that was itself refused as a concurrent duplicate."""
    if not key or not getattr(user, "is_authenticated", False):
        return None
    return (
        Action.objects.filter(user=user, idempotency_key=key, kind=kind)
        .exclude(error__startswith=DUPLICATE)
        .order_by("id")
        .first()
    )


def create_first(submitter: Any, key: str, /, **fields: Any) -> tuple[Action, Action | None]:
    """Create ``submitter``'s queued action (``fields`` plus the user, ``idempotency_key=key``) and check
    it is the first ``submitter`` sent with ``key``:
    ``(action, None)`` when it is, else ``(action, earlier)`` with ``action`` recorded as a rejected
    duplicate of ``earlier`` (audited, never to be queued)."""
    with serialized_for(submitter, key):  # ids in commit order, so the lowest id is the first
        action = Action.objects.create(
            user=submitter if getattr(submitter, "is_authenticated", False) else None,
            username=submitter.get_username(),
            status=Action.Status.QUEUED,
            idempotency_key=key,
            **fields,
        )
        earlier = first_with_key(submitter, key, str(fields["kind"]))
        if earlier is None or earlier.pk == action.pk:
            return action, None
        Action.objects.filter(pk=action.pk).update(
            status=Action.Status.REJECTED, error=f"{DUPLICATE} #{earlier.pk} (same idempotency key)"
        )
    return action, earlier
