"""A kazoo client on ``PollingThreadingHandler`` (the mirror's) works against a real ZooKeeper."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import WatchedEvent

from controller_core.zk.poll_handler import PollingThreadingHandler

pytestmark = pytest.mark.integration


def test_reads_writes_and_watches_go_through_the_polling_handler(zk_chroot: str) -> None:
    client = KazooClient(hosts=zk_chroot, timeout=10.0, handler=PollingThreadingHandler())
    client.start(timeout=10)
    try:
        client.create("/polled", b"one", makepath=True)
        fired = threading.Event()
        seen: list[WatchedEvent] = []

        def on_change(event: WatchedEvent) -> None:
            seen.append(event)
            fired.set()

        data, _stat = client.get("/polled", watch=on_change)
        assert data == b"one"
        transaction = client.transaction()
        for i in range(200):  # a large reply read through several polls
            transaction.create(f"/polled/child-{i:03d}", b"x" * 1000)
        assert all(r is not None for r in transaction.commit())
        client.set("/polled", b"two")
        assert fired.wait(5), "the data watch never fired"
        assert seen[0].path == "/polled"
        assert len(client.get_children("/polled")) == 200
    finally:
        client.stop()
        client.close()
