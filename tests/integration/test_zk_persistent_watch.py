"""AddWatch (persistent recursive) against the real ZooKeeper: events below the root reach the tap,
kazoo's own one-shot watches still fire, and RemoveWatches stops the stream."""

from __future__ import annotations

import threading
import time

from kazoo.client import KazooClient

from controller_core.zk.persistent_watch import (
    NODE_CREATED,
    NODE_DATA_CHANGED,
    NODE_DELETED,
    PersistentWatchTap,
    add_watch_async,
    decode_watch_event,
    remove_watches_async,
)
from tests.support.zk import wait_for


def test_recursive_watch_delivers_every_change_below_its_root(zk: KazooClient) -> None:
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def sink(event_type: int, path: str) -> None:
        with lock:
            seen.append((event_type, path))

    tap = PersistentWatchTap(zk, ["/brokers"], sink)
    tap.install()
    try:
        add_watch_async(zk, "/brokers").get(timeout=5)
        one_shot = threading.Event()
        zk.ensure_path("/brokers/topics")
        zk.create("/brokers/topics/t", b"a")
        zk.get("/brokers/topics/t", watch=lambda e: one_shot.set())
        zk.set("/brokers/topics/t", b"b")
        zk.create("/brokers/topics/t/partitions/0/state", b"s", makepath=True)
        zk.delete("/brokers/topics/t", recursive=True)
        zk.create("/elsewhere", b"x")  # outside the root: not passed on
        expected = [
            (NODE_CREATED, "/brokers"),
            (NODE_CREATED, "/brokers/topics"),
            (NODE_CREATED, "/brokers/topics/t"),
            (NODE_DATA_CHANGED, "/brokers/topics/t"),
            (NODE_CREATED, "/brokers/topics/t/partitions"),
            (NODE_CREATED, "/brokers/topics/t/partitions/0"),
            (NODE_CREATED, "/brokers/topics/t/partitions/0/state"),
        ]
        wait_for(lambda: len(seen) >= len(expected) + 4, timeout=5.0, interval=0.01)
        assert seen[: len(expected)] == expected
        assert (NODE_DELETED, "/brokers/topics/t") in seen
        assert all(path.startswith("/brokers") for _, path in seen)
        assert one_shot.wait(5), "kazoo's one-shot watch on the same path must still fire"

        # A reply read after a change means its event was handed over before it.
        zk.set("/brokers/topics", b"c")
        zk.exists("/brokers")
        with lock:
            assert seen[-1] == (NODE_DATA_CHANGED, "/brokers/topics")

        remove_watches_async(zk, "/brokers").get(timeout=5)
        with lock:
            before = len(seen)
        zk.set("/brokers/topics", b"d")
        zk.exists("/brokers")
        time.sleep(0.2)
        with lock:
            assert len(seen) == before, "RemoveWatches must stop the persistent watch"
    finally:
        tap.uninstall()


def test_kazoo_routes_only_events_a_one_shot_watcher_waits_for(zk: KazooClient) -> None:
    """The tap skips kazoo's routing for a path no one-shot watcher waits on (the follower's common
    case, a state znode) and hands every other event to it: data and child watchers still fire."""
    routed: list[str] = []
    connection = zk._connection
    kazoo_routing = connection._read_watch_event

    def counting(buffer: bytes, offset: int) -> object:
        routed.append(decode_watch_event(buffer, offset).path)
        return kazoo_routing(buffer, offset)

    connection._read_watch_event = counting
    tap = PersistentWatchTap(zk, ["/brokers"], lambda _type, _path: None)
    tap.install()
    try:
        zk.ensure_path("/brokers/ids")
        add_watch_async(zk, "/brokers").get(timeout=5)
        data_fired, child_fired = threading.Event(), threading.Event()
        zk.exists("/brokers/ids/1", watch=lambda e: data_fired.set())
        zk.get_children("/brokers/ids", watch=lambda e: child_fired.set())
        zk.create("/brokers/ids/1", b"a")  # data watcher on it; child watcher on its parent
        zk.create("/brokers/other", b"b")  # nobody waits: not routed
        zk.exists("/brokers")
        assert data_fired.wait(5) and child_fired.wait(5)
        root = zk.chroot or ""
        assert sorted(routed) == [f"{root}/brokers/ids", f"{root}/brokers/ids/1"]  # the child event, the created one
        # /brokers/other's creation was not routed: nobody waited on it
    finally:
        tap.uninstall()
        connection._read_watch_event = kazoo_routing
