"""AddWatch (persistent recursive) against the real ZooKeeper: events below the root reach the tap,
kazoo's own one-shot watches still fire, and RemoveWatches stops the stream."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient

from controller_core.zk.persistent_watch import (
    NODE_CREATED,
    NODE_DATA_CHANGED,
    NODE_DELETED,
    PersistentWatchTap,
    add_watch_async,
    remove_watches_async,
)


def _wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


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
        assert _wait_for(lambda: len(seen) >= len(expected) + 4)
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
