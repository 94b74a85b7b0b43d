"""WatchRegistry against a real ZooKeeper: watches re-arm themselves, callbacks only enqueue, and
watches dropped by a disconnect or a session expiry come back."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from controller_core.zk.multiread import DataResult, MultiReader
from controller_core.zk.setwatches import set_node_watches
from controller_core.zk.watchers import EventFactory, WatchEvent, WatchEventType, WatchKind, WatchRegistry
from tests.support.zk import drop_connection, expire_session, started_client, wait_for

pytestmark = pytest.mark.integration

TIMEOUT = 10.0


@pytest.fixture
def other(zk_chroot: str) -> Iterator[KazooClient]:
    """A second client: the rest of the cluster making changes."""
    with started_client(zk_chroot) as client:
        yield client


@pytest.fixture
def events() -> queue.Queue[object]:
    return queue.Queue()


@pytest.fixture
def registry(zk: KazooClient, events: queue.Queue[object]) -> Iterator[WatchRegistry]:
    reg = WatchRegistry(zk, events.put)
    try:
        yield reg
    finally:
        reg.close()


def _next(events: queue.Queue[object]) -> object:
    return events.get(timeout=TIMEOUT)


def _handle(events: queue.Queue[object], client: KazooClient) -> object:
    """Take the next event and "handle" it as the controller would: by reading through the same client.

    One-shot watches coalesce changes made before the handler's read; changes after it fire again.
    """
    event = _next(events)
    client.exists("/")
    return event


def _quiet(events: queue.Queue[object], seconds: float = 0.3) -> bool:
    try:
        events.get(timeout=seconds)
    except queue.Empty:
        return True
    return False


def _drain(events: queue.Queue[object]) -> None:
    while not _quiet(events, 0.5):
        pass


def _tag(tag: str) -> EventFactory:
    return lambda e: (tag, e.type)


def test_a_child_watch_fires_again_after_every_handled_change(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    other.ensure_path("/brokers/ids")
    assert registry.watch_children("/brokers/ids", _tag("BrokerChange")) == []
    for broker in (1, 2, 3):
        other.create(f"/brokers/ids/{broker}", ephemeral=True)
        assert _handle(events, zk) == ("BrokerChange", WatchEventType.CHILDREN)
    other.delete("/brokers/ids/2")
    assert _handle(events, zk) == ("BrokerChange", WatchEventType.CHILDREN)
    assert _quiet(events)


def test_a_node_watch_sees_creation_changes_and_deletion(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    def controller_events(e: WatchEvent) -> object:
        return "Reelect" if e.type is WatchEventType.DELETED else ("ControllerChange", e.type)

    assert registry.watch_node("/controller", controller_events) is False
    other.create("/controller", b"{}", ephemeral=True)
    assert _handle(events, zk) == ("ControllerChange", WatchEventType.CREATED)
    other.set("/controller", b'{"brokerid":2}')
    assert _handle(events, zk) == ("ControllerChange", WatchEventType.CHANGED)
    other.delete("/controller")
    assert _handle(events, zk) == "Reelect"
    other.create("/controller", b"{}")
    assert _handle(events, zk) == ("ControllerChange", WatchEventType.CREATED)


def test_many_node_watches_armed_at_once_behave_like_single_ones(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    """A failover arms two watches per topic in one pass (``watch_nodes``: a multi-read, then SetWatches)."""
    other.ensure_path("/brokers/topics/a")
    other.ensure_path("/brokers/topics/b")
    exists = registry.watch_nodes({f"/brokers/topics/{t}": _tag(f"modified-{t}") for t in ("a", "b", "c")})
    assert exists == {"/brokers/topics/a": True, "/brokers/topics/b": True, "/brokers/topics/c": False}
    other.set("/brokers/topics/b", b"{}")
    assert _handle(events, zk) == ("modified-b", WatchEventType.CHANGED)
    other.create("/brokers/topics/c", b"{}")
    assert _handle(events, zk) == ("modified-c", WatchEventType.CREATED)
    other.set("/brokers/topics/a", b"{}")
    assert _handle(events, zk) == ("modified-a", WatchEventType.CHANGED)
    assert _quiet(events)


class _ReaderThenChanges(MultiReader):
    """A multi-reader after whose read the rest of the cluster changes things, before any watch is armed."""

    def __init__(self, client: KazooClient, changes: Callable[[], None]) -> None:
        super().__init__(client)
        self._changes = changes

    def get_data(self, paths: Sequence[str], *, size_hint: int = 256) -> list[DataResult]:
        results = super().get_data(paths, size_hint=size_hint)
        self._changes()
        return results


def test_changes_between_reading_and_arming_many_watches_fire_at_once(
    zk: KazooClient, other: KazooClient, events: queue.Queue[object]
) -> None:
    """``watch_nodes`` reads first and arms after: what changed in between is not lost."""
    for name in ("kept", "modified", "deleted"):
        other.create(f"/topics/{name}", b"{}", makepath=True)

    def meanwhile() -> None:
        other.set("/topics/modified", b'{"partitions":{}}')
        other.delete("/topics/deleted")
        other.create("/topics/created", b"{}")

    registry = WatchRegistry(zk, events.put, reader=_ReaderThenChanges(zk, meanwhile))
    try:
        names = ("kept", "modified", "deleted", "created")
        exists = registry.watch_nodes({f"/topics/{n}": _tag(n) for n in names})
        # What the read saw (before the changes) ...
        assert exists == {
            "/topics/kept": True,
            "/topics/modified": True,
            "/topics/deleted": True,
            "/topics/created": False,
        }
        # ... and every change after it, reported as soon as the watches are armed.
        assert {_next(events) for _ in range(3)} == {
            ("modified", WatchEventType.CHANGED),
            ("deleted", WatchEventType.DELETED),
            ("created", WatchEventType.CREATED),
        }
        assert _quiet(events)
        other.set("/topics/kept", b"1")  # the untouched node's watch is armed, not fired
        assert _handle(events, zk) == ("kept", WatchEventType.CHANGED)
        other.set("/topics/created", b"1")  # and the fired ones re-armed themselves
        assert _handle(events, zk) == ("created", WatchEventType.CHANGED)
    finally:
        registry.close()


def test_many_watches_are_armed_in_requests_of_bounded_size(
    zk: KazooClient, other: KazooClient, events: queue.Queue[object]
) -> None:
    """The SetWatches requests are split (here at 1 KB: 20 requests for 300 paths); every watch is armed."""
    other.ensure_path("/many")
    transaction = other.transaction()
    for i in range(0, 300, 2):
        transaction.create(f"/many/node-{i:04d}", b"")
    transaction.commit()
    fired: queue.Queue[str] = queue.Queue()
    present = [(f"/many/node-{i:04d}", _record(fired)) for i in range(0, 300, 2)]
    missing = [(f"/many/node-{i:04d}", _record(fired)) for i in range(1, 300, 2)]
    zk.exists("/many")  # its reply brings our session's last zxid past the creations
    pending = set_node_watches(zk, zk.last_zxid, present, missing, max_request_bytes=1024)
    assert len(pending) > 10
    for result in pending:
        result.get(timeout=TIMEOUT)
    assert fired.empty()
    transaction = other.transaction()
    for i in range(300):
        if i % 2:
            transaction.create(f"/many/node-{i:04d}", b"")
        else:
            transaction.set_data(f"/many/node-{i:04d}", b"1")
    transaction.commit()
    seen = {fired.get(timeout=TIMEOUT) for _ in range(300)}
    assert seen == {f"/many/node-{i:04d} {'CREATED' if i % 2 else 'CHANGED'}" for i in range(300)}


def _record(into: queue.Queue[str]) -> Callable[[Any], None]:
    return lambda event: into.put(f"{event.path} {event.type}")


def test_many_node_watches_without_multi_read_are_armed_one_by_one(
    zk: KazooClient, other: KazooClient, events: queue.Queue[object]
) -> None:
    other.ensure_path("/topics/a")
    registry = WatchRegistry(zk, events.put, reader=MultiReader(zk, use_multi_read=False))
    try:
        assert registry.watch_nodes({"/topics/a": _tag("a"), "/topics/b": _tag("b")}) == {
            "/topics/a": True,
            "/topics/b": False,
        }
        other.create("/topics/b")
        assert _handle(events, zk) == ("b", WatchEventType.CREATED)
        other.set("/topics/a", b"1")
        assert _handle(events, zk) == ("a", WatchEventType.CHANGED)
    finally:
        registry.close()


def test_a_node_we_may_not_read_does_not_fail_the_others(
    zk: KazooClient, zk_chroot: str, registry: WatchRegistry, events: queue.Queue[object]
) -> None:
    """No READ permission: the multi-read fails for that path only; ``exists`` (no permission needed)
    arms it, and every other watch is armed as usual."""
    owner = KazooClient(hosts=zk_chroot, timeout=10.0, auth_data=[("digest", "owner:secret")])
    owner.start(timeout=15)
    try:
        owner.create("/locked", b"{}", acl=[make_digest_acl("owner", "secret", all=True)])
        owner.create("/open", b"{}")
        assert registry.watch_nodes({"/locked": _tag("locked"), "/open": _tag("open")}) == {
            "/locked": True,
            "/open": True,
        }
        owner.set("/open", b"1")
        assert _handle(events, zk) == ("open", WatchEventType.CHANGED)
    finally:
        owner.delete("/locked")
        owner.stop()
        owner.close()


def test_many_node_watches_come_back_after_a_dropped_connection(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    other.ensure_path("/topics/a")
    registry.watch_nodes({"/topics/a": _tag("a"), "/topics/b": _tag("b")})
    drop_connection(zk)
    other.set("/topics/a", b"1")  # most likely while we are reconnecting
    assert _next(events) == ("a", WatchEventType.CHANGED)
    wait_for(lambda: zk.connected, what="reconnection")
    _drain(events)
    other.create("/topics/b")
    assert _handle(events, zk) == ("b", WatchEventType.CREATED)
    other.set("/topics/a", b"2")
    assert _handle(events, zk) == ("a", WatchEventType.CHANGED)


def test_callbacks_only_build_and_enqueue_the_event_on_kazoos_thread(zk: KazooClient, other: KazooClient) -> None:
    seen_threads: list[str] = []
    enqueued: list[object] = []
    done = threading.Event()

    def enqueue(item: object) -> None:
        enqueued.append(item)
        done.set()

    def factory(e: WatchEvent) -> object:
        seen_threads.append(threading.current_thread().name)
        return e

    registry = WatchRegistry(zk, enqueue)
    try:
        registry.watch_node("/x", factory)
        other.create("/x")
        assert done.wait(TIMEOUT)
        assert enqueued == [WatchEvent("/x", WatchEventType.CREATED, WatchKind.NODE)]
        assert seen_threads and threading.main_thread().name not in seen_threads
    finally:
        registry.close()


def test_a_factory_returning_none_enqueues_nothing(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    registry.watch_node("/x", lambda e: None if e.type is WatchEventType.CHANGED else e.type)
    other.create("/x")
    assert _handle(events, zk) is WatchEventType.CREATED
    other.set("/x", b"1")
    zk.exists("/")  # the CHANGED notification is ahead of this reply, and was dropped by the factory
    other.delete("/x")
    assert _handle(events, zk) is WatchEventType.DELETED
    assert _quiet(events)


def test_a_deletion_right_after_a_change_is_never_lost(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    """The deletion may land between the CHANGED notification and the re-armed read: it is reported."""
    registry.watch_node("/race", lambda e: None if e.type is WatchEventType.CHANGED else e.type)
    for _ in range(15):
        other.create("/race")
        assert _handle(events, zk) is WatchEventType.CREATED
        other.set("/race", b"1")
        other.delete("/race")  # no barrier: often before the re-arm
        assert _handle(events, zk) is WatchEventType.DELETED
    assert _quiet(events)


def test_unregistered_handlers_are_silent(
    registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    other.ensure_path("/a")
    registry.watch_children("/a", _tag("a"))
    registry.watch_node("/controller", _tag("controller"))
    registry.watch_node("/b", _tag("b"))
    assert registry.registered() == [
        ("/a", WatchKind.CHILDREN),
        ("/b", WatchKind.NODE),
        ("/controller", WatchKind.NODE),
    ]

    registry.unregister("/a")
    registry.unregister_all(keep=["/controller"])
    assert registry.registered() == [("/controller", WatchKind.NODE)]
    other.create("/a/child")
    other.create("/b")
    other.create("/controller")  # events arrive in order, so anything from /a or /b would come first
    assert _next(events) == ("controller", WatchEventType.CREATED)
    assert _quiet(events)


def test_registering_again_replaces_the_handler(
    registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    registry.watch_node("/x", _tag("old"))
    registry.watch_node("/x", _tag("new"))
    other.create("/x")
    assert _next(events) == ("new", WatchEventType.CREATED)
    assert _quiet(events)


def test_a_child_watch_on_a_missing_parent_waits_for_it(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    assert registry.watch_children("/isr_change_notification", _tag("isr")) is None
    other.create("/isr_change_notification")
    assert _handle(events, zk) == ("isr", WatchEventType.CREATED)
    other.create("/isr_change_notification/isr_change_", sequence=True)
    assert _handle(events, zk) == ("isr", WatchEventType.CHILDREN)
    other.delete("/isr_change_notification", recursive=True)
    assert _handle(events, zk) == ("isr", WatchEventType.CHILDREN)  # the child went first
    _drain(events)  # the parent's deletion may or may not be seen, depending on the re-arm race
    other.create("/isr_change_notification")
    assert _next(events) == ("isr", WatchEventType.CREATED)


def test_watches_come_back_after_a_dropped_connection(
    zk: KazooClient, registry: WatchRegistry, other: KazooClient, events: queue.Queue[object]
) -> None:
    other.ensure_path("/brokers/ids")
    registry.watch_children("/brokers/ids", _tag("BrokerChange"))
    registry.watch_node("/controller", _tag("controller"))
    drop_connection(zk)
    other.create("/brokers/ids/1", ephemeral=True)  # most likely while we are reconnecting
    assert _next(events) == ("BrokerChange", WatchEventType.CHILDREN)
    wait_for(lambda: zk.connected, what="reconnection")
    _drain(events)  # a duplicate is allowed (handlers re-read); a missing event is not
    other.create("/brokers/ids/2", ephemeral=True)  # and the watches are armed again afterwards
    assert _handle(events, zk) == ("BrokerChange", WatchEventType.CHILDREN)
    other.create("/controller", ephemeral=True)
    assert _next(events) == ("controller", WatchEventType.CREATED)


def test_watches_are_restored_in_a_new_session_and_see_what_changed(
    zk: KazooClient, zk_chroot: str, other: KazooClient, events: queue.Queue[object]
) -> None:
    # Short session so that expiry is quick.
    victim = KazooClient(hosts=zk_chroot, timeout=4.0)
    victim.start(timeout=15)
    registry = WatchRegistry(victim, events.put)
    try:
        victim.ensure_path("/brokers/ids")
        victim.create("/brokers/ids/1", ephemeral=True)
        registry.watch_children("/brokers/ids", _tag("BrokerChange"))
        registry.watch_node("/brokers/ids/1", _tag("BrokerModifications-1"))
        expire_session(victim, zk_chroot)
        # The expiry deleted our ephemeral: both handlers hear of it once the new session re-arms.
        got = {_next(events), _next(events)}
        assert got == {
            ("BrokerChange", WatchEventType.CHILDREN),
            ("BrokerModifications-1", WatchEventType.DELETED),
        }
        wait_for(lambda: victim.connected, what="new session")
        victim.exists("/")  # as the controller's re-read would: the re-arms are ahead of it
        other.create("/brokers/ids/5", ephemeral=True)
        assert _handle(events, victim) == ("BrokerChange", WatchEventType.CHILDREN)
        other.create("/brokers/ids/1", ephemeral=True)
        assert {_next(events), _next(events)} == {
            ("BrokerChange", WatchEventType.CHILDREN),
            ("BrokerModifications-1", WatchEventType.CREATED),
        }
    finally:
        registry.close()
        victim.stop()
        victim.close()
