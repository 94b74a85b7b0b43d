"""The warm standby's view and kept controller context against a real ZooKeeper: after random change
sequences (hypothesis) and a catch-up, the view equals a full read by the store and the context a cold
failover's load (with its state machines' initial states), field by field; and it says when it
cannot be trusted (connection lost, backlog overflow, paused) instead of serving a stale view."""

from __future__ import annotations

import gc
import random
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from controller_core.standby import FailoverSource, StandbyFollower
from controller_core.standby import follower as follower_module
from controller_core.standby.view import ClusterView
from controller_core.zk.multiread import SubmittedRead
from controller_core.zk.store import ZkStore
from scripts.support.zk_changes import KINDS, Change, random_changes
from tests.support.contexts import cold_loaded_context, context_fields


def _wait(predicate: Any, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@pytest.fixture
def follower(zk_chroot: str) -> Iterator[StandbyFollower]:
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    f = StandbyFollower(client, catch_up_timeout_s=10.0)
    f.start()
    try:
        assert _wait(lambda: f.is_warm), f.status()
        yield f
    finally:
        f.stop()
        client.stop()
        client.close()


def full_read(store: ZkStore) -> dict[str, Any]:
    """What a cold failover reads, in the view's shape."""
    topics = store.get_all_topics()
    assignments = store.get_replica_assignments(topics)
    view = ClusterView(topics=assignments)
    return {
        "brokers": store.get_all_broker_registrations(),
        "topics": assignments,
        "states": store.get_partition_leadership(list(view.assigned_partitions())),
        "topic_deletions": set(store.get_topic_deletions()),
        "reassignment": store.get_partition_reassignment(),
        "preferred_election": store.get_preferred_replica_election(),
    }


def warm_read(view: ClusterView) -> dict[str, Any]:
    return {
        "brokers": dict(view.brokers),
        "topics": view.assignments_for(view.topics),
        "states": view.leadership_for(list(view.assigned_partitions())),
        "topic_deletions": set(view.topic_deletions),
        "reassignment": view.reassignment,
        "preferred_election": view.preferred_election,
    }


def assert_same(warm: dict[str, Any], cold: dict[str, Any]) -> None:
    for name, expected in cold.items():
        if isinstance(expected, dict):
            assert set(warm[name]) == set(expected), name
            for key, value in expected.items():
                assert warm[name][key] == value, (name, key)
        else:
            assert warm[name] == expected, name


def assert_context_is_a_cold_load(follower: StandbyFollower, zk: KazooClient) -> None:
    """The kept context equals what a cold failover loads now, field by field (call when caught up)."""
    kept = follower.context_for_tests()
    assert kept is not None and kept.broken is None, kept and kept.broken
    assert_same(context_fields(kept.ctx), context_fields(cold_loaded_context(ZkStore(zk))))


changes = st.lists(st.builds(Change, st.sampled_from(KINDS), st.integers(0, 1 << 30)), min_size=1, max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=changes)
def test_warm_view_equals_a_full_read_after_random_changes(
    batch: list[Change], follower: StandbyFollower, zk: KazooClient
) -> None:
    for change in batch:
        change.apply(zk)
    assert follower.catch_up(), follower.status()
    view = follower.snapshot_for_tests()
    assert view is not None
    assert_same(warm_read(view), full_read(ZkStore(zk)))
    assert_context_is_a_cold_load(follower, zk)


def test_catch_up_is_proven_by_one_round_trip(follower: StandbyFollower, zk: KazooClient) -> None:
    # No sleeping: the changes' events arrive before the catch-up's own reply, so it must see them.
    for change in random_changes(random.Random(7), 200):
        change.apply(zk)
    assert follower.catch_up()
    view = follower.snapshot_for_tests()
    assert view is not None
    assert_same(warm_read(view), full_read(ZkStore(zk)))
    assert_context_is_a_cold_load(follower, zk)
    assert follower.status()["standby_lag_p99_ms"] >= 0
    assert follower.status()["standby_context"] == "kept"
    kept = follower.context_for_tests()
    assert kept is not None
    # Idle again: the drain refreshed the kept start-up requests of what changed (a takeover has none left).
    assert _wait(lambda: kept.stale_count == 0), kept.stale_count


def test_backlog_overflow_reloads_and_says_so(zk_chroot: str, zk: KazooClient) -> None:
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    f = StandbyFollower(client, max_backlog=5)
    try:
        f.start()
        assert _wait(lambda: f.is_warm)
        reloads = f.reloads
        zk.ensure_path("/brokers/ids")
        with f._apply_lock:  # the follower cannot apply: changes pile up past the bound
            for i in range(50):
                zk.create(f"/brokers/ids/{100 + i}", b"{}")
            zk.exists("/")
            assert not f.is_warm and "backlog overflow" in f.reason
        assert _wait(lambda: f.reloads > reloads and f.is_warm), f.status()
        view = f.snapshot_for_tests()
        assert view is not None
        assert_same(warm_read(view), full_read(ZkStore(zk)))
        assert_context_is_a_cold_load(f, zk)
    finally:
        f.stop()
        client.stop()
        client.close()


def test_lost_connection_makes_it_cold_until_it_reloaded(follower: StandbyFollower, zk: KazooClient) -> None:
    client = follower._client
    reloads = follower.reloads
    # The connection drops (EOF); the server drops its watches with it; kazoo reconnects the session.
    client._connection._socket.shutdown(socket.SHUT_RDWR)
    assert _wait(lambda: not follower.is_warm or follower.reloads > reloads, 10)
    assert _wait(lambda: follower.is_warm and follower.reloads > reloads, 20), follower.status()
    for change in random_changes(random.Random(3), 50):
        change.apply(zk)
    assert follower.catch_up()
    view = follower.snapshot_for_tests()
    assert view is not None
    assert_same(warm_read(view), full_read(ZkStore(zk)))
    assert_context_is_a_cold_load(follower, zk)


def test_failover_source_hands_over_only_when_caught_up(follower: StandbyFollower, zk: KazooClient) -> None:
    for change in random_changes(random.Random(11), 60):
        change.apply(zk)
    source = FailoverSource(follower)
    handover = source.take_over()
    assert handover is not None and handover.context is not None, source.reason
    assert handover.zxid >= zk.exists("/brokers").mzxid
    record = source.finish()
    assert record["path"] == "warm", record
    expected = context_fields(cold_loaded_context(ZkStore(zk)))
    assert_same(context_fields(handover.context.ctx), expected)
    assert not follower.is_warm and follower.status()["standby_state"] == "paused"
    # Paused (active): a second failover source hands nothing over and says so.
    again = FailoverSource(follower)
    assert again.take_over() is None
    assert again.finish()["path"] == "cold" and again.reason
    follower.resume()
    assert _wait(lambda: follower.is_warm)


def test_a_drain_reads_with_the_collector_paused_and_lets_it_run_between_drains(
    zk_chroot: str, zk: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A drain's time is up at once: it takes one round of small reads only, so a backlog is applied
    # by several drains (the collector gets its turn between them), each with the collector paused.
    monkeypatch.setattr(follower_module, "MAX_DRAIN_S", 0.0)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    f = StandbyFollower(client, read_chunk=7, reads_in_flight=2)
    collector_on: list[bool] = []
    drains = 0
    apply_chunk, drain = f._apply_chunk, f._drain

    def counted_drain() -> None:
        nonlocal drains
        drains += 1
        drain()

    def watched_apply(*args: Any) -> bool:
        collector_on.append(gc.isenabled())
        return apply_chunk(*args)

    f._drain, f._apply_chunk = counted_drain, watched_apply  # type: ignore[method-assign,assignment]
    try:
        f.start()
        assert _wait(lambda: f.is_warm)
        with f._apply_lock:  # the backlog piles up
            for change in random_changes(random.Random(5), 300):
                change.apply(zk)
            client.exists("/")  # the follower's own session: every change's event is recorded by now
            backlog, before = f.status()["standby_backlog"], drains
        assert f.catch_up(), f.status()
        assert collector_on and not any(collector_on), "a re-read was applied with the collector running"
        assert drains - before >= backlog // 14, (drains - before, backlog)
        view = f.snapshot_for_tests()
        assert view is not None
        assert_same(warm_read(view), full_read(ZkStore(zk)))
        assert_context_is_a_cold_load(f, zk)
        assert _wait(gc.isenabled), "the collector stayed paused after the follower went idle"
    finally:
        f.stop()
        client.stop()
        client.close()


def test_changes_recorded_while_a_read_is_out_are_sent_before_it_is_in(
    follower: StandbyFollower, zk: KazooClient
) -> None:
    # The first re-read stays "out" (not ready) until released: what changes meanwhile is read too.
    released = threading.Event()
    sent: list[int] = []
    submit = follower._reader.submit_data

    def held_submit(paths: Any, *, size_hint: int = 256) -> SubmittedRead:
        read = submit(paths, size_hint=size_hint)
        sent.append(len(paths))
        if len(sent) > 1:
            return read

        class Held(SubmittedRead):
            def ready(self) -> bool:
                return released.is_set() and read.ready()

            def __call__(self) -> Any:
                released.wait(30)
                return read()

        return Held(read, None)

    follower._reader.submit_data = held_submit  # type: ignore[method-assign]
    applied = follower.changes_applied
    zk.ensure_path("/brokers/ids")
    zk.create("/brokers/ids/500", b"{}")
    assert _wait(lambda: len(sent) >= 1)
    first = len(sent)
    for i in range(3):
        zk.create(f"/brokers/ids/{501 + i}", b"{}")
    assert _wait(lambda: len(sent) > first, 5), "nothing was sent while the first read was out"
    assert follower.changes_applied == applied  # the first read is not in: nothing applied yet
    released.set()
    assert follower.catch_up(), follower.status()
    view = follower.snapshot_for_tests()
    assert view is not None
    assert_same(warm_read(view), full_read(ZkStore(zk)))
    assert_context_is_a_cold_load(follower, zk)
