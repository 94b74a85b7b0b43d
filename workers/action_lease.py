"""The run lease on an ``Action``: one copy of an admin task acts on it at a time (F16, F17).

Why: Celery with ``acks_late`` redelivers a task whose worker died (F16), and the Redis transport
also redelivers one that merely outlived its ``visibility_timeout`` while the first copy still runs
(F17). Both copies would act. A copy claims the action with one conditional UPDATE, a heartbeat
thread renews the claim while it works, and every journal write is fenced by it
(``workers.actions``, ``workers.reassign``). The beat task that re-queues an action whose holder died
with nothing left to redeliver it is ``workers.actions.recover_stalled`` (``requeue_stalled``).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Final

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from dashboard.audit.models import Action

logger = logging.getLogger(__name__)

LEASE_S: Final = 10.0
"""How long a claim holds without renewal (``settings.ACTION_LEASE_S`` overrides it). A copy whose
worker died (F16) is taken over at most this long after its last heartbeat."""
HEARTBEAT_S: Final = 2.0
"""How often the holder renews its lease (``settings.ACTION_LEASE_HEARTBEAT_S``): well inside LEASE_S,
so a live holder is never mistaken for a dead one."""
MAX_DELIVERIES: Final = 50
"""How many delivery notes an action keeps (``Action.deliveries``); ``attempts`` counts them all."""


class LeaseLost(Exception):
    """This copy's lease expired and another copy took the action over: it must stop writing."""


def lease_seconds() -> float:
    return float(getattr(settings, "ACTION_LEASE_S", LEASE_S))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "ACTION_LEASE_HEARTBEAT_S", HEARTBEAT_S))


def try_claim(action_id: int, owner: str, lease_s: float) -> bool:
    """Take (or extend) the lease in one conditional UPDATE: it succeeds only when nobody holds the
    lease, the holder's has expired, or ``owner`` already holds it, so two copies never both win."""
    now = timezone.now()
    free = Q(lease_owner="") | Q(lease_until__isnull=True) | Q(lease_until__lt=now) | Q(lease_owner=owner)
    until = now + timedelta(seconds=lease_s)
    return Action.objects.filter(free, pk=action_id).update(lease_owner=owner, lease_until=until) == 1


def renew_lease(action_id: int, owner: str, lease_s: float) -> bool:
    """Push the holder's expiry forward; False when ``owner`` no longer holds the lease."""
    until = timezone.now() + timedelta(seconds=lease_s)
    return Action.objects.filter(pk=action_id, lease_owner=owner).update(lease_until=until) == 1


def release_lease(action_id: int, owner: str) -> None:
    """Clear the lease if ``owner`` still holds it (a copy that lost it must not clear the new holder's)."""
    Action.objects.filter(pk=action_id, lease_owner=owner).update(lease_owner="", lease_until=None)


def note_delivery(action_id: int, owner: str, what: str, **extra: Any) -> None:
    """Append what this delivery did to ``Action.deliveries`` (the audit of redeliveries).

    The row is updated *first* inside the transaction, which takes its write lock (a row lock on
    PostgreSQL, the database write lock on SQLite) before it is read, so two copies noting at once
    never lose each other's entry. Only this function writes ``deliveries``; the lease holder's journal
    writes never touch it, so a duplicate's note cannot clobber the holder's progress or the reverse.
    """
    entry = {"at": timezone.now().isoformat(), "owner": owner, "what": what, **extra}
    with transaction.atomic():
        Action.objects.filter(pk=action_id).update(deliveries=F("deliveries"))
        current = Action.objects.filter(pk=action_id).values_list("deliveries", flat=True).first()
        notes = [*(current if isinstance(current, list) else []), entry][-MAX_DELIVERIES:]
        Action.objects.filter(pk=action_id).update(deliveries=notes)


class RunLease:
    """One task copy's claim on an action, renewed by a heartbeat thread while the copy works.

    Why a thread: the work blocks for long stretches (waiting for the controller to consume a batch,
    a 70 s cancel request), and a holder that is alive must never look dead. A SIGKILLed worker's
    thread dies with it, so its lease simply expires and the next copy takes over (F16). If renewing
    ever finds the lease gone the heartbeat stops; the holder's next fenced write fails with
    ``LeaseLost``.
    """

    def __init__(self, action_id: int, lease_s: float | None = None, heartbeat_s: float | None = None) -> None:
        self.action_id = action_id
        self.owner = uuid.uuid4().hex
        self.lease_s = lease_seconds() if lease_s is None else float(lease_s)
        self.heartbeat_s = heartbeat_seconds() if heartbeat_s is None else float(heartbeat_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def holder(self) -> tuple[str, datetime | None]:
        """Who holds the lease now, and until when."""
        row = Action.objects.filter(pk=self.action_id).values_list("lease_owner", "lease_until").first()
        return (str(row[0]), row[1]) if row is not None else ("", None)

    def acquire(self, sleep: Callable[[float], None] = time.sleep) -> str | None:
        """Claim the lease, polling up to one lease period (plus a heartbeat) for a holder's to expire.

        Returns how it was claimed (for ``Action.deliveries``), or None when the holder kept renewing
        all along: it is alive and working, and this copy must leave the action alone.
        """
        deadline = time.monotonic() + self.lease_s + self.heartbeat_s
        poll = max(0.05, min(self.heartbeat_s / 4, 0.5))
        while True:
            holder, until = self.holder()
            if try_claim(self.action_id, self.owner, self.lease_s):
                if not holder or holder == self.owner:
                    return "claimed"
                expired = until is None or until < timezone.now()
                return f"took over the expired lease of {holder}" if expired else f"claimed after {holder} released it"
            if time.monotonic() >= deadline:
                return None
            sleep(poll)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.action_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.heartbeat_s):
                try:
                    if not renew_lease(self.action_id, self.owner, self.lease_s):
                        logger.warning("action #%s: lease %s was taken over", self.action_id, self.owner)
                        return
                except DatabaseError as exc:  # the next beat retries; the lease has slack for a few misses
                    logger.warning("action #%s: could not renew the lease: %s", self.action_id, exc)
        finally:
            connection.close()  # this thread's own connection

    def close(self) -> None:
        """Stop the heartbeat and release the lease (unless it was already cleared or taken over)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.heartbeat_s + 5)
        release_lease(self.action_id, self.owner)

    def __enter__(self) -> RunLease:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def status_of(action_id: int) -> str:
    """The action's status as committed now (what a copy that did not act answers)."""
    return str(Action.objects.values_list("status", flat=True).get(pk=action_id))


def begin_run(action_id: int, final: Collection[str]) -> RunLease | None:
    """Start a task copy on ``action_id``: count the attempt, then claim the run lease.

    Returns the started lease (heartbeat running) when this copy is to act, or None, with the delivery
    noted in ``Action.deliveries``, when it must not: the action is finished, or another copy holds a
    lease it keeps renewing (the Redis transport redelivered a task that outlived its visibility timeout
    while the first copy still runs: F17). Waiting for a lease to expire is what lets a copy whose
    worker died be taken over (F16).
    """
    Action.objects.filter(pk=action_id).update(attempts=F("attempts") + 1)
    lease = RunLease(action_id)
    status = status_of(action_id)
    if status in final:
        note_delivery(action_id, lease.owner, f"left alone: already {status}")
        return None
    how = lease.acquire()
    if how is None:
        holder, until = lease.holder()
        logger.warning("action #%s: a duplicate delivery while %s holds the lease; left alone", action_id, holder)
        note_delivery(
            action_id,
            lease.owner,
            "duplicate: another copy holds the lease and keeps renewing it; left alone",
            holder=holder,
            lease_until=until.isoformat() if until is not None else None,
        )
        return None
    lease.start()
    status = status_of(action_id)
    if status in final:  # the holder finished while this copy waited
        lease.close()
        note_delivery(action_id, lease.owner, f"left alone: already {status}")
        return None
    note_delivery(action_id, lease.owner, how)
    return lease


# -- recovery: a holder that died after its message was acked by a duplicate ----------------------------

#: The task that carries out each kind of leased action (sent by name, as the web process does).
TASK_OF_KIND: Final = {
    Action.Kind.PREFERRED_ELECTION: "workers.actions.preferred_election",
    Action.Kind.REASSIGNMENT: "workers.reassign.execute",
    Action.Kind.REASSIGNMENT_CANCEL: "workers.reassign.cancel",
}
RECOVERY_OWNER_PREFIX: Final = "recovery:"


def stalled_actions(grace_s: float, now: datetime | None = None) -> list[Action]:
    """Actions whose lease is still held but has not been renewed for ``grace_s`` past its expiry.

    A finished copy releases its lease in the same UPDATE as the final status, so a lease left held
    means the holder died mid-run. Normally Celery redelivers its task (``reject_on_worker_lost``),
    which takes the lease over. Not when a duplicate delivery (F17: the same message, the same
    delivery tag) was acked first: then nothing redelivers and the action would stay *running* for
    ever. ``grace_s`` leaves the normal redelivery time to happen first.
    """
    cutoff = (now or timezone.now()) - timedelta(seconds=grace_s)
    return list(
        Action.objects.filter(kind__in=list(TASK_OF_KIND), lease_until__lt=cutoff)
        .exclude(lease_owner="")
        .order_by("id")
    )


def requeue_stalled(send: Callable[[str, int], object], grace_s: float | None = None) -> list[int]:
    """Send the task of every stalled action again; returns their ids.

    The lease is handed to a ``recovery:`` placeholder that is already expired, in one conditional
    UPDATE on the owner that was seen (a holder that comes back to life, or another recovery run,
    makes it match nothing): the new copy claims it at once, and the action is not sent again before
    another ``grace_s`` has passed without anybody claiming it.
    """
    grace = 2 * lease_seconds() if grace_s is None else grace_s
    sent: list[int] = []
    for action in stalled_actions(grace):
        now = timezone.now()
        placeholder = f"{RECOVERY_OWNER_PREFIX}{uuid.uuid4().hex}"
        taken = Action.objects.filter(
            pk=action.pk, lease_owner=action.lease_owner, lease_until=action.lease_until
        ).update(lease_owner=placeholder, lease_until=now)
        if not taken:
            continue
        note_delivery(action.pk, placeholder, f"re-queued: the lease of {action.lease_owner} expired unrenewed")
        logger.warning("action #%s: its holder %s stopped renewing; re-queued", action.pk, action.lease_owner)
        send(TASK_OF_KIND[Action.Kind(action.kind)], action.pk)
        sent.append(action.pk)
    return sent
