"""The run lease that keeps two copies of an admin task from acting at once (F17), and concurrent
submissions with the same idempotency key (one acts, the other is answered as a replay).

The lease tests that need a live holder run its heartbeat thread against committed rows
(``transaction=True``). The submission races release two threads together right after their first
idempotency look-up, the window in which both used to act.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, transaction
from django.db.backends.sqlite3.base import DatabaseWrapper as SqliteWrapper
from django.db.models.signals import post_save
from django.utils import timezone
from kazoo.client import KazooClient

from controller_core.model import BrokerRegistration, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller_core.model import TopicPartition as TP
from controller_core.zk.store import ZkStore
from dashboard.actions import election_submit, reassign_service
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from workers import action_lease as leases
from workers import actions as worker
from workers import reassign

T = TypeVar("T")
NAME = "leased"
NOWHERE = "127.0.0.1:1/nothing"  # a copy that must not act never connects; one that did would fail loudly
LEASE_S = 1.0
HEARTBEAT_S = 0.1
JOURNAL = {"journal": {"plan": [[["orders", 0]]], "done": 0, "writing": 0, "submitted": [["orders", 0]]}}


@pytest.fixture
def short_lease(settings: Any) -> None:
    settings.ACTION_LEASE_S = LEASE_S
    settings.ACTION_LEASE_HEARTBEAT_S = HEARTBEAT_S


@pytest.fixture
def holder(short_lease: None) -> Iterator[Callable[[int], leases.RunLease]]:
    """Starts a live lease holder (claimed, heartbeat running) on an action; stops them all afterwards."""
    started: list[leases.RunLease] = []

    def start(action_id: int) -> leases.RunLease:
        lease = leases.RunLease(action_id)
        assert lease.acquire() == "claimed"
        lease.start()
        started.append(lease)
        return lease

    yield start
    for lease in started:
        lease.close()


def action(**fields: Any) -> Action:
    values: dict[str, Any] = {"username": "otto", "cluster": NAME, "kind": "preferred_election", "status": "queued"}
    return Action.objects.create(**(values | fields))


def row(pk: int) -> Action:
    return Action.objects.get(pk=pk)


# -- the claim: one conditional UPDATE ------------------------------------------------------------------


@pytest.mark.django_db
def test_one_conditional_update_gives_the_lease_to_one_copy() -> None:
    a = action()
    assert leases.try_claim(a.pk, "first", 10)
    assert not leases.try_claim(a.pk, "second", 10)  # live: refused
    assert leases.try_claim(a.pk, "first", 10)  # the holder may extend its own
    assert not leases.renew_lease(a.pk, "second", 10)
    leases.release_lease(a.pk, "second")  # not the holder: nothing cleared
    assert row(a.pk).lease_owner == "first"

    Action.objects.filter(pk=a.pk).update(lease_until=timezone.now() - timedelta(seconds=1))  # the holder died
    assert leases.try_claim(a.pk, "second", 10)
    assert not leases.renew_lease(a.pk, "first", 10)  # the old holder finds it gone
    assert row(a.pk).lease_owner == "second" and row(a.pk).lease_until is not None
    leases.release_lease(a.pk, "second")
    assert (row(a.pk).lease_owner, row(a.pk).lease_until) == ("", None)


@pytest.mark.django_db
def test_a_finished_action_is_left_alone_without_taking_the_lease() -> None:
    a = action(status="succeeded")
    assert leases.begin_run(a.pk, worker.FINAL) is None
    done = row(a.pk)
    assert done.attempts == 1 and done.lease_owner == ""
    assert [d["what"] for d in done.deliveries] == ["left alone: already succeeded"]


@pytest.mark.django_db
def test_an_expired_lease_is_taken_over(short_lease: None) -> None:
    """F16: the worker holding the lease was SIGKILLed, so nothing renews or releases it."""
    a = action(status="running", lease_owner="dead-copy", lease_until=timezone.now() - timedelta(seconds=1))
    lease = leases.begin_run(a.pk, worker.FINAL)
    assert lease is not None
    try:
        taken = row(a.pk)
        assert taken.lease_owner == lease.owner and taken.attempts == 1
        assert taken.deliveries[-1]["what"] == "took over the expired lease of dead-copy"
    finally:
        lease.close()
    assert row(a.pk).lease_owner == ""


@pytest.mark.django_db
def test_a_copy_whose_lease_was_taken_over_writes_nothing_more() -> None:
    """Fencing: every journal and status write names the writer's lease; a stale one fails."""
    a = action(status="running", outcome=JOURNAL, lease_owner="new-holder", lease_until=timezone.now())
    stale = row(a.pk)
    stale.lease_owner = "old-holder"
    stale.outcome = {"journal": {"done": 99}}
    with pytest.raises(leases.LeaseLost):
        worker._save_outcome(stale)
    stale.status = "failed"
    with pytest.raises(leases.LeaseLost):
        reassign._save(stale, "status", "outcome")
    assert (row(a.pk).outcome, row(a.pk).status) == (JOURNAL, "running")


# -- a live holder: heartbeats, and duplicates that leave it alone --------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_keeps_a_live_holder_s_lease(holder: Callable[[int], leases.RunLease]) -> None:
    a = action(status="running")
    lease = holder(a.pk)
    time.sleep(3 * LEASE_S)  # three lease periods: only renewals keep it
    until = row(a.pk).lease_until
    assert until is not None and until > timezone.now()
    assert not leases.try_claim(a.pk, "someone-else", LEASE_S)
    lease.close()
    assert (row(a.pk).lease_owner, row(a.pk).lease_until) == ("", None)


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_election_waits_one_lease_period_then_leaves_it_alone(
    holder: Callable[[int], leases.RunLease],
) -> None:
    """F17: the transport redelivered the task while the first copy still waits for the controller."""
    a = action(status="running", outcome=JOURNAL, attempts=1)
    lease = holder(a.pk)
    began = time.monotonic()
    assert worker.preferred_election.run(a.pk, batch_size=1, wait_s=5, connect=NOWHERE) == "running"
    waited = time.monotonic() - began
    assert LEASE_S <= waited < LEASE_S + 5
    after = row(a.pk)
    assert (after.status, after.outcome, after.error, after.attempts) == ("running", JOURNAL, "", 2)
    assert after.lease_owner == lease.owner  # still the first copy's
    duplicate = after.deliveries[-1]
    assert duplicate["what"].startswith("duplicate") and duplicate["holder"] == lease.owner


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_takes_over_once_the_holder_stops_renewing(short_lease: None) -> None:
    a = action(status="running", outcome=JOURNAL, attempts=1)
    dying = leases.RunLease(a.pk)
    assert dying.acquire() == "claimed"  # claimed, but its heartbeat never runs: the worker died
    lease = leases.begin_run(a.pk, worker.FINAL)
    assert lease is not None
    lease.close()
    assert row(a.pk).deliveries[-1]["what"] == f"took over the expired lease of {dying.owner}"


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_that_waited_finds_the_action_finished(short_lease: None) -> None:
    """The holder records the outcome and releases the lease in one update: the waiting copy sees it done."""
    a = action(status="running", outcome=JOURNAL, attempts=1)
    first = leases.RunLease(a.pk)
    assert first.acquire() == "claimed"
    first.start()
    finisher = threading.Timer(0.3, _finish, args=(a.pk, first.owner))
    finisher.start()
    try:
        assert worker.preferred_election.run(a.pk, connect=NOWHERE) == "succeeded"
    finally:
        finisher.join()
        first.close()
    assert [d["what"] for d in row(a.pk).deliveries] == ["left alone: already succeeded"]


def _finish(pk: int, owner: str) -> None:
    """The holder's last step (in its own thread): the outcome recorded and the lease released at once."""
    try:
        done = row(pk)
        done.lease_owner = owner
        done.status = Action.Status.SUCCEEDED
        worker._finish_leased(done)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_duplicate_reassignment_tasks_leave_the_holder_alone(holder: Callable[[int], leases.RunLease]) -> None:
    moving = action(kind="reassignment", status="running", outcome={"writing": True}, attempts=1)
    cancelling = action(kind="reassignment_cancel", status="queued", parameters={"reassignment": moving.pk})
    leases = {moving.pk: holder(moving.pk), cancelling.pk: holder(cancelling.pk)}
    assert reassign.execute.run(moving.pk, connect=NOWHERE, monitor=False) == "running"
    assert reassign.cancel.run(cancelling.pk, connect=NOWHERE) == "queued"
    for pk, expected in ((moving.pk, ("running", {"writing": True})), (cancelling.pk, ("queued", {}))):
        after = row(pk)
        assert (after.status, after.outcome) == expected and after.lease_owner == leases[pk].owner
        assert after.deliveries[-1]["what"].startswith("duplicate")


# -- concurrent submissions with one idempotency key ----------------------------------------------------


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str, settings: Any, redis_url: str) -> Cluster:
    """Brokers 1-4; orders-0 on [1, 2] led by 2 (its preferred replica 1 can be elected)."""
    settings.REDIS_URL = redis_url
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(99)
    for b in (1, 2, 3, 4):
        store.register_broker(BrokerRegistration(id=b, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 1),)))
    store.create_topic("orders", {0: [1, 2]})
    store.create_partition_states(
        {TP("orders", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (1, 2)), epoch.epoch)},
        epoch.epoch_zk_version,
    )
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot, mode=Cluster.Mode.MANAGED)


def after_first_lookup(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    """Make ``module.name`` (called between a submission's first idempotency look-up and its create)
    wait until both racing requests got there: both have found no earlier action with the key."""
    barrier = threading.Barrier(2, timeout=30)
    real = getattr(module, name)

    def wait_then(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        barrier.wait()
        return result

    monkeypatch.setattr(module, name, wait_then)


def race(first: Callable[[], T], second: Callable[[], T]) -> list[T]:
    """Run both at once in two threads. An in-memory SQLite test database is shared the way Django's
    live server shares it (one connection, statements serialized by SQLite); any other database gives
    each thread its own connection."""
    main = connections["default"]
    shared = main if isinstance(main, SqliteWrapper) and main.is_in_memory_db() else None
    results: dict[int, T] = {}
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], T]) -> None:
        if shared is not None:
            connections["default"] = shared
        try:
            results[index] = call()
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)
        finally:
            if shared is None:
                connection.close()

    if shared is not None:
        shared.inc_thread_sharing()
    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate((first, second))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        if shared is not None:
            shared.dec_thread_sharing()
    if errors:
        raise errors[0]
    return [results[0], results[1]]


GOOD = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4]}]}


@pytest.mark.django_db(transaction=True)
def test_two_reassignments_with_one_key_at_once_act_once(
    cluster: Cluster, sent: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    otto = User.objects.create_user("otto")
    after_first_lookup(monkeypatch, reassign_service, "check")

    def submit() -> reassign_service.Submitted:
        return reassign_service.submit(otto, cluster, GOOD, "move it", False, "same-key")

    answers = race(submit, submit)
    assert sorted(a.created for a in answers) == [False, True]  # one acted, one is a replay
    acted = next(a for a in answers if a.created).action
    assert all(a.action.pk == acted.pk for a in answers)
    assert sent == [("workers.reassign.execute", [acted.pk])]
    duplicate = Action.objects.exclude(pk=acted.pk).get(kind="reassignment")
    assert (
        duplicate.status == "rejected" and duplicate.error == f"duplicate of action #{acted.pk} (same idempotency key)"
    )
    again = reassign_service.submit(otto, cluster, GOOD, "move it", False, "same-key")
    assert (again.created, again.action.pk) == (False, acted.pk)  # later retries get the first action


@pytest.mark.django_db(transaction=True)
def test_two_cancellations_with_one_key_at_once_act_once(
    cluster: Cluster, sent: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    otto = User.objects.create_user("otto")
    target = action(kind="reassignment", status="running", parameters={"partitions": GOOD["partitions"]})
    after_first_lookup(monkeypatch, reassign_service, "cancel_unavailable")

    def submit() -> reassign_service.Submitted:
        return reassign_service.submit_cancel(otto, cluster, target, "stop it", "cancel-key")

    answers = race(submit, submit)
    assert sorted(a.created for a in answers) == [False, True]
    acted = next(a for a in answers if a.created).action
    assert all(a.action.pk == acted.pk for a in answers)
    assert sent == [("workers.reassign.cancel", [acted.pk])]


@pytest.mark.django_db(transaction=True)
def test_two_elections_with_one_key_at_once_act_once(
    cluster: Cluster, sent: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON API (``api_ops.election_execute``) and the form both submit through this function."""
    otto = User.objects.create_user("otto")
    after_first_lookup(monkeypatch, election_submit, "compute_plan")
    data = {"scope": "imbalanced", "reason": "rebalance"}

    def submit() -> election_submit.Outcome:
        return election_submit.submit(otto, cluster, data, "election-key")

    answers = race(submit, submit)
    assert sorted(a.status for a in answers) == [200, 201] and sorted(a.replayed for a in answers) == [False, True]
    acted = next(a for a in answers if not a.replayed).action
    assert acted is not None and all(a.action is not None and a.action.pk == acted.pk for a in answers)
    assert sent == [("workers.actions.preferred_election", [acted.pk])]


@pytest.mark.django_db(transaction=True)
def test_ids_taken_in_one_order_and_committed_in_another_still_act_once(
    cluster: Cluster, sent: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL hands out ids when the INSERT runs, not at commit (dashboard/actions/idempotency.py):
    the first request takes the lower id but commits after the second has checked. Both used to act.
    Each request runs in a transaction (as under ATOMIC_REQUESTS; without one the window is the
    INSERT's own), and the first one's is held open until the second is done (or 3 s)."""
    if not connection.features.has_select_for_update:
        pytest.skip("SQLite serializes writers: ids are taken in commit order (the race needs PostgreSQL)")
    otto = User.objects.create_user("otto")
    data = {"scope": "imbalanced", "reason": "rebalance"}
    first_created, second_done = threading.Event(), threading.Event()

    def hold_first_commit(sender: Any, instance: Action, created: bool, **kwargs: Any) -> None:
        if created and instance.idempotency_key == "slow-commit" and not first_created.is_set():
            first_created.set()
            second_done.wait(3)

    def first() -> election_submit.Outcome:
        with transaction.atomic():
            return election_submit.submit(otto, cluster, data, "slow-commit")

    def second() -> election_submit.Outcome:
        assert first_created.wait(30)
        try:
            with transaction.atomic():
                return election_submit.submit(otto, cluster, data, "slow-commit")
        finally:
            second_done.set()

    post_save.connect(hold_first_commit, sender=Action, weak=False, dispatch_uid="hold-first-commit")
    try:
        answers = race(first, second)
    finally:
        post_save.disconnect(sender=Action, dispatch_uid="hold-first-commit")
    acted = [a for a in answers if not a.replayed]
    assert len(acted) == 1 and acted[0].action is not None
    assert sent == [("workers.actions.preferred_election", [acted[0].action.pk])]
    rows = list(Action.objects.filter(idempotency_key="slow-commit").order_by("id"))
    assert [r.status for r in rows] == ["queued", "rejected"] and rows[0].pk == acted[0].action.pk


# -- recovery: a holder that died with nothing left to redeliver its task -------------------------------


@pytest.mark.django_db
def test_an_action_whose_holder_stopped_renewing_is_requeued_once_to_its_task(short_lease: None) -> None:
    """The holder died after a duplicate acked the shared message (F17): its lease stays held and
    expired. Recovery sends the action's own task again and hands the lease to an expired
    placeholder; the next run within the grace period sends nothing more."""
    long_ago = timezone.now() - timedelta(seconds=60)
    election = action(status="running", lease_owner="dead-copy", lease_until=long_ago)
    moving = action(kind="reassignment", status="running", lease_owner="dead-too", lease_until=long_ago)
    sent: list[tuple[str, int]] = []

    assert leases.requeue_stalled(lambda task, pk: sent.append((task, pk)), grace_s=5) == [election.pk, moving.pk]

    assert sent == [("workers.actions.preferred_election", election.pk), ("workers.reassign.execute", moving.pk)]
    after = row(election.pk)
    assert after.lease_owner.startswith(leases.RECOVERY_OWNER_PREFIX)
    assert after.lease_until is not None and after.lease_until <= timezone.now()
    assert "re-queued" in after.deliveries[-1]["what"] and "dead-copy" in after.deliveries[-1]["what"]
    assert leases.requeue_stalled(lambda task, pk: sent.append((task, pk)), grace_s=5) == []
    assert len(sent) == 2


@pytest.mark.django_db
def test_released_live_and_unleased_actions_are_left_alone(short_lease: None) -> None:
    long_ago = timezone.now() - timedelta(seconds=60)
    action(status="running", lease_owner="", lease_until=None)  # released: a reassignment the controller runs
    action(status="running", lease_owner="alive", lease_until=timezone.now() + timedelta(seconds=30))
    action(kind="topic_create", status="pending", lease_owner="odd", lease_until=long_ago)  # no task to send
    action(status="running", lease_owner="just-expired", lease_until=timezone.now() - timedelta(seconds=1))
    sent: list[tuple[str, int]] = []

    assert leases.requeue_stalled(lambda task, pk: sent.append((task, pk)), grace_s=5) == []
    assert sent == []


@pytest.mark.django_db(transaction=True)
def test_the_requeued_copy_claims_the_placeholder_lease_at_once(short_lease: None) -> None:
    a = action(status="running", lease_owner="dead-copy", lease_until=timezone.now() - timedelta(seconds=60))
    leases.requeue_stalled(lambda task, pk: None, grace_s=5)

    started = time.monotonic()
    lease = leases.begin_run(a.pk, worker.FINAL)
    try:
        assert lease is not None
        assert time.monotonic() - started < LEASE_S  # no waiting for a live holder
        assert row(a.pk).lease_owner == lease.owner
        assert row(a.pk).deliveries[-1]["what"].startswith("took over the expired lease of recovery:")
    finally:
        if lease is not None:
            lease.close()
