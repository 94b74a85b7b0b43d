"""``WatchRegistry.watch_nodes(since=...)`` against a real ZooKeeper: watches armed late, relative to
a zxid the caller's knowledge is current to (a warm standby's context), fire at once for every node
changed since then and not for the others (the warm takeover arms its per-topic watches this way,
after its requests went out)."""

from __future__ import annotations

import queue
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from controller_core.zk.watchers import WatchEventType, WatchRegistry
from tests.support.zk import started_client

pytestmark = pytest.mark.integration


@pytest.fixture
def other(zk_chroot: str) -> Iterator[KazooClient]:
    with started_client(zk_chroot) as client:
        yield client


def test_nodes_changed_since_the_given_zxid_fire_at_once(zk: KazooClient, other: KazooClient) -> None:
    events: queue.Queue[object] = queue.Queue()
    registry = WatchRegistry(zk, events.put)
    try:
        for name in ("kept", "changed", "deleted"):
            other.ensure_path(f"/brokers/topics/{name}")
        zk.exists("/")
        since = zk.last_zxid  # what the caller knows is current to here
        other.set("/brokers/topics/changed", b"{}")
        other.delete("/brokers/topics/deleted")
        other.create("/brokers/topics/created", b"{}")
        handlers = {
            f"/brokers/topics/{name}": (lambda e, name=name: (name, e.type))
            for name in ("kept", "changed", "deleted", "created")
        }
        registry.watch_nodes(handlers, since=since)
        fired = set()
        while True:
            try:
                fired.add(events.get(timeout=1.0))
            except queue.Empty:
                break
        # "deleted" was read as absent (an exists watch: nothing to fire); its deletion is a child change.
        assert fired == {("changed", WatchEventType.CHANGED), ("created", WatchEventType.CHANGED)}
        other.set("/brokers/topics/kept", b"{}")
        assert events.get(timeout=5.0) == ("kept", WatchEventType.CHANGED)
    finally:
        registry.close()
